//! The build-id index's cache between runs: for each indexed root one file under the
//! cache directory listing every directory (with its mtime and entries) and every regular file
//! with its size, modification time and what the index read from it.
//!
//! A directory whose mtime is unchanged has the same entries, so its listing is reused without
//! `readdir`; its ELF files are still `stat`ed and read again when their size or mtime changed
//! (a binary relinked in place). Its non-ELF files are trusted: rewriting a non-ELF file in
//! place into an ELF file without touching its directory is the one change seen only when the
//! directory next changes. A cache that is missing, damaged, from another format version or for
//! another root is ignored. The format is bincode (reading a large sysroot's cache as JSON
//! cost more than the walk it saves). Written to a temporary file and renamed, so a crash or two
//! hostsides running at once never leave a torn cache.

use std::collections::HashMap;
use std::io::Write;

use bincode::Options as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::index::Facts;

/// Bumped whenever what is cached, or how it is read, changes.
const VERSION: u32 = 3;

/// A cache file larger than this is ignored (it would be a tree far past
/// [`crate::index::MAX_FILES_PER_ROOT`]).
const MAX_CACHE_BYTES: u64 = 1 << 30;

/// One file as cached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CachedFile {
    /// The file's name in its directory.
    pub name: String,
    pub size: u64,
    pub mtime_ns: u64,
    pub facts: Facts,
}

/// One directory as cached.
#[derive(Clone, Debug, Default)]
pub(crate) struct CachedDir {
    /// Path relative to the root, `/`-separated; empty for the root.
    pub rel: String,
    pub mtime_ns: u64,
    /// Subdirectory names.
    pub dirs: Vec<String>,
    /// Regular ELF files with a build-id, sorted by name.
    pub files: Vec<CachedFile>,
    /// The other regular files, packed (no allocation per file: most of a tree).
    pub others: Others,
    /// False when a name was not UTF-8: such a directory is listed again every run.
    pub cacheable: bool,
}

/// Names, sizes and mtimes of files that are not ELF (or have no build-id): names joined by
/// NUL, which no file name contains.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Others {
    names: String,
    sizes: Vec<u64>,
    mtimes: Vec<u64>,
}

impl Others {
    /// Adds one file.
    pub(crate) fn push(&mut self, name: &str, size: u64, mtime_ns: u64) {
        if !self.sizes.is_empty() {
            self.names.push('\0');
        }
        self.names.push_str(name);
        self.sizes.push(size);
        self.mtimes.push(mtime_ns);
    }

    /// How many files.
    pub(crate) fn len(&self) -> usize {
        self.sizes.len()
    }

    /// Each file as (name, size, mtime); empty when the three lists disagree (damage).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, u64, u64)> {
        let names: Vec<&str> = if self.sizes.is_empty() {
            Vec::new()
        } else {
            self.names.split('\0').collect()
        };
        let ok = names.len() == self.sizes.len() && names.len() == self.mtimes.len();
        names
            .into_iter()
            .zip(self.sizes.iter().copied())
            .zip(self.mtimes.iter().copied())
            .map(|((n, s), m)| (n, s, m))
            .filter(move |_| ok)
    }
}

impl CachedDir {
    /// The cached ELF file `name`.
    pub(crate) fn file(&self, name: &str) -> Option<&CachedFile> {
        self.files
            .binary_search_by(|f| f.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.files[i])
    }
}

/// The cached directories of one root.
#[derive(Default)]
pub(crate) struct Cache {
    dirs: HashMap<String, CachedDir>,
}

#[derive(Serialize, Deserialize)]
struct OnDisk {
    version: u32,
    root: String,
    dirs: Vec<DirEntry>,
}

/// A cache of a large sysroot holds hundreds of thousands of these.
#[derive(Serialize, Deserialize)]
struct DirEntry {
    p: String,
    m: u64,
    d: Vec<String>,
    f: Vec<FileEntry>,
    o: Others,
}

#[derive(Serialize, Deserialize)]
struct FileEntry {
    n: String,
    s: u64,
    m: u64,
    id: Option<Vec<u8>>,
    d: bool,
    i: bool,
}

/// bincode with a bound on what a damaged length field may make it allocate.
fn options() -> impl bincode::Options {
    bincode::DefaultOptions::new().with_limit(MAX_CACHE_BYTES)
}

impl Cache {
    /// The cache of `root` in `dir`, or an empty one.
    pub(crate) fn load(dir: &Path, root: &Path) -> Cache {
        let path = cache_file(dir, root);
        let fits = std::fs::metadata(&path).is_ok_and(|m| m.len() <= MAX_CACHE_BYTES);
        let Some(disk) = fits
            .then(|| std::fs::read(&path).ok())
            .flatten()
            .and_then(|b| options().deserialize::<OnDisk>(&b).ok())
        else {
            return Cache::default();
        };
        if disk.version != VERSION || Path::new(&disk.root) != root {
            return Cache::default();
        }
        let dirs = disk
            .dirs
            .into_iter()
            .map(|d| {
                let mut files =
                    d.f.into_iter()
                        .map(|e| CachedFile {
                            name: e.n,
                            size: e.s,
                            mtime_ns: e.m,
                            facts: Facts {
                                build_id: e.id,
                                has_dwarf: e.d,
                                is_image: e.i,
                            },
                        })
                        .collect::<Vec<_>>();
                files.sort_by(|a, b| a.name.cmp(&b.name));
                let dir = CachedDir {
                    rel: d.p,
                    mtime_ns: d.m,
                    dirs: d.d,
                    files,
                    others: d.o,
                    cacheable: true,
                };
                (dir.rel.clone(), dir)
            })
            .collect();
        Cache { dirs }
    }

    /// The cached directory `rel` (relative to the root), whatever its mtime.
    pub(crate) fn dir(&self, rel: &str) -> Option<&CachedDir> {
        self.dirs.get(rel)
    }

    /// How many directories the cache holds.
    pub(crate) fn len(&self) -> usize {
        self.dirs.len()
    }

    /// Replaces the cache of `root` with `dirs` (those that are not cacheable are left out).
    pub(crate) fn store(dir: &Path, root: &Path, dirs: Vec<CachedDir>) -> std::io::Result<()> {
        let Some(root_str) = root.to_str() else {
            return Ok(());
        };
        let disk = OnDisk {
            version: VERSION,
            root: root_str.to_string(),
            dirs: dirs
                .into_iter()
                .filter(|d| d.cacheable)
                .map(|d| DirEntry {
                    p: d.rel,
                    m: d.mtime_ns,
                    d: d.dirs,
                    f: d.files
                        .into_iter()
                        .map(|f| FileEntry {
                            n: f.name,
                            s: f.size,
                            m: f.mtime_ns,
                            id: f.facts.build_id,
                            d: f.facts.has_dwarf,
                            i: f.facts.is_image,
                        })
                        .collect(),
                    o: d.others,
                })
                .collect(),
        };
        std::fs::create_dir_all(dir)?;
        let path = cache_file(dir, root);
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
            options()
                .serialize_into(&mut out, &disk)
                .map_err(std::io::Error::other)?;
            out.flush()?;
            std::fs::rename(&tmp, &path)
        };
        let r = write();
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r
    }
}

/// `<dir>/<last path component>-<crc32 of the whole path>.bin`: readable, and distinct for
/// two roots with the same name.
fn cache_file(dir: &Path, root: &Path) -> PathBuf {
    let name = root
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("root")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(40)
        .collect::<String>();
    let crc = crc32fast::hash(root.as_os_str().as_encoded_bytes());
    dir.join(format!("{name}-{crc:08x}.bin"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let dir = tempfile::tempdir().unwrap();
        let root = Path::new("/some/sysroot");
        let f = CachedFile {
            name: "app".into(),
            size: 100,
            mtime_ns: 7,
            facts: Facts {
                build_id: Some(vec![0xab, 0x01]),
                has_dwarf: true,
                is_image: false,
            },
        };
        let d = CachedDir {
            rel: "usr/bin".into(),
            mtime_ns: 9,
            dirs: vec!["sub".into()],
            files: vec![f.clone()],
            others: {
                let mut o = Others::default();
                o.push("README", 12, 3);
                o.push("data.bin", 4096, 4);
                o
            },
            cacheable: true,
        };
        let skipped = CachedDir {
            rel: "odd".into(),
            cacheable: false,
            ..CachedDir::default()
        };
        Cache::store(dir.path(), root, vec![d, skipped]).unwrap();
        let c = Cache::load(dir.path(), root);
        assert_eq!(c.len(), 1);
        let got = c.dir("usr/bin").unwrap();
        assert_eq!(
            (got.mtime_ns, got.dirs.as_slice()),
            (9, &["sub".to_string()][..])
        );
        assert_eq!(got.file("app"), Some(&f));
        assert_eq!(got.file("other"), None);
        let others: Vec<_> = got.others.iter().collect();
        assert_eq!(others, [("README", 12, 3), ("data.bin", 4096, 4)]);
        assert_eq!(Cache::load(dir.path(), Path::new("/other")).len(), 0);
        // A damaged cache is ignored, not trusted.
        std::fs::write(cache_file(dir.path(), root), [2, 0, 0, 0, 0xff, 0xff, 0xff]).unwrap();
        assert_eq!(Cache::load(dir.path(), root).len(), 0);
    }
}
