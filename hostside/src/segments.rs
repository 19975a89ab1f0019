//! The files of one recording: `FILE` alone, or the segments `rec --max-size` wrote next to
//! it (`FILE`, `FILE.1`, `FILE.2`, ...; the oldest may have been deleted, `FILE` among them).
//! Given `FILE`, every segment still present is read, oldest first, as one recording; given
//! a segment's own name (`FILE.3`), that segment alone.

use std::path::{Path, PathBuf};

/// The segment files of the recording at `path` that exist, in segment order: `path` itself
/// (segment 0) when present, then `path.N` by N (named as `rec` names them, see
/// [`crossprof_format::numbered_segments`]). Empty when there is none.
pub fn discover(path: &Path) -> Vec<PathBuf> {
    let first = path.exists().then(|| path.to_path_buf());
    first
        .into_iter()
        .chain(
            crossprof_format::numbered_segments(path)
                .into_iter()
                .map(|(_, p)| p),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_found_in_numeric_order_with_or_without_the_first() {
        let dir = std::env::temp_dir().join(format!("hostside-seg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let base = dir.join("t.zst");
        assert!(discover(&base).is_empty());
        for name in [
            "t.zst.10", "t.zst.9", "t.zst.x", "t.zst.", "t.zst.0", "u.zst.1",
        ] {
            std::fs::write(dir.join(name), b"").unwrap();
        }
        let names = |v: Vec<PathBuf>| -> Vec<String> {
            v.iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(names(discover(&base)), ["t.zst.9", "t.zst.10"]);
        std::fs::write(&base, b"").unwrap();
        assert_eq!(names(discover(&base)), ["t.zst", "t.zst.9", "t.zst.10"]);
        // A segment named on its own is read alone.
        assert_eq!(names(discover(&dir.join("t.zst.9"))), ["t.zst.9"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
