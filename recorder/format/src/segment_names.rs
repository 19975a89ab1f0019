//! The names of a `rec --max-size` recording's segment files, written once for the writer
//! (which creates them and removes an earlier recording's) and the reader (which reads them as
//! one recording), so that the two always agree on which files belong to a recording.
//!
//! Segment 0 is `FILE` itself; segment N (N ≥ 1) is `FILE.N` in `FILE`'s directory, N written
//! in decimal without leading zeros: the only spelling [`segment_path`] produces. A name that
//! merely looks similar (`FILE.01`, `FILE.0`, `FILE.1x`, `FILE.`) is some other file and is
//! neither read nor removed.

use std::path::{Path, PathBuf};

/// The path of segment `index` of the recording at `base`: `base` itself for 0, else
/// `base.index`.
pub fn segment_path(base: &Path, index: u32) -> PathBuf {
    if index == 0 {
        return base.to_path_buf();
    }
    let mut p = base.as_os_str().to_os_string();
    p.push(format!(".{index}"));
    PathBuf::from(p)
}

/// The numbered segment files (`FILE.N`, N ≥ 1) of the recording at `base` that exist as
/// regular files in its directory (`.` when `base` names none), as `(N, path)` sorted by N.
/// Segment 0 (`base` itself) is not listed. Empty when the directory cannot be read. Reads
/// the directory once; costs one entry per file in it.
pub fn numbered_segments(base: &Path) -> Vec<(u64, PathBuf)> {
    let (Some(name), Some(dir)) = (base.file_name(), base.parent()) else {
        return Vec::new();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let name = name.as_encoded_bytes();
    let mut found = Vec::new();
    for e in entries.flatten() {
        let entry = e.file_name();
        let Some(n) = entry
            .as_encoded_bytes()
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(b"."))
            .and_then(segment_number)
        else {
            continue;
        };
        if e.file_type().is_ok_and(|t| t.is_file()) {
            found.push((n, base.with_file_name(entry)));
        }
    }
    found.sort();
    found
}

/// N when `suffix` is a segment number as [`segment_path`] writes it: decimal digits, the
/// first not 0, fitting a `u64`.
fn segment_number(suffix: &[u8]) -> Option<u64> {
    match suffix.first() {
        Some(b'1'..=b'9') if suffix.iter().all(u8::is_ascii_digit) => {
            std::str::from_utf8(suffix).ok()?.parse().ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("format-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn names(v: &[(u64, PathBuf)]) -> Vec<(u64, String)> {
        v.iter()
            .map(|(n, p)| (*n, p.file_name().unwrap().to_string_lossy().into_owned()))
            .collect()
    }

    #[test]
    fn only_the_names_segment_path_writes_are_segments() {
        let dir = scratch("seg-names");
        let base = dir.join("t.zst");
        assert!(numbered_segments(&base).is_empty());
        for name in [
            "t.zst.10",
            "t.zst.9",
            "t.zst.1",
            // Not segments: leading zero, zero, trailing letters, no number, other files,
            // a number too large for any index, a longer base name.
            "t.zst.01",
            "t.zst.0",
            "t.zst.1x",
            "t.zst.",
            "t.zst.x",
            "u.zst.1",
            "t.zst.99999999999999999999999",
            "t.zst.1.zst",
            "t.zst2.1",
            "t.zs.1",
        ] {
            std::fs::write(dir.join(name), b"").unwrap();
        }
        // A directory with a segment's name is not a segment file.
        std::fs::create_dir(dir.join("t.zst.3")).unwrap();
        // Segment 0 is the base itself and is never listed.
        std::fs::write(&base, b"").unwrap();
        let found = numbered_segments(&base);
        assert_eq!(
            names(&found),
            [
                (1, "t.zst.1".to_string()),
                (9, "t.zst.9".to_string()),
                (10, "t.zst.10".to_string())
            ]
        );
        // Each listed path is the one segment_path gives for its number.
        for (n, p) in &found {
            assert_eq!(*p, segment_path(&base, u32::try_from(*n).unwrap()));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_base_without_a_directory_is_looked_up_in_the_working_directory() {
        // Relative to the working directory: the test's own unique name keeps it apart.
        let base = PathBuf::from(format!("format-seg-cwd-{}.zst", std::process::id()));
        let seg = segment_path(&base, 2);
        assert_eq!(seg, PathBuf::from(format!("{}.2", base.display())));
        std::fs::write(&seg, b"").unwrap();
        let found = numbered_segments(&base);
        let _ = std::fs::remove_file(&seg);
        assert_eq!(found, [(2, seg)]);
    }

    #[test]
    fn no_file_name_or_no_directory_lists_nothing() {
        assert!(numbered_segments(Path::new("/")).is_empty());
        assert!(numbered_segments(Path::new("")).is_empty());
        assert!(numbered_segments(Path::new("/nonexistent-dir-crossprof/t.zst")).is_empty());
    }

    #[test]
    fn segment_paths() {
        assert_eq!(
            segment_path(Path::new("/d/t.zst"), 0),
            Path::new("/d/t.zst")
        );
        assert_eq!(segment_path(Path::new("t.zst"), 12), Path::new("t.zst.12"));
    }
}
