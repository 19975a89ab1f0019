//! One memory map per module file, shared by everything that reads it in one analysis: the
//! symbolizer ([`crate::Module`]) and the unwinder (which takes its `.eh_frame`, code and
//! `.debug_frame` as ranges of the same map). Without it each file was mapped for symbols
//! and read a second time, whole, onto the heap for unwinding.
//!
//! Memory stays bounded: the cache holds weak references, so a file is unmapped as soon as
//! no module and no unwind table uses it any more, and a mapping costs address space backed
//! by the page cache, not heap.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use crate::backing::Backing;
use crate::error::Error;

/// A whole file's bytes, shared: a read-only memory map (or an owned buffer for an empty
/// file). The same type as `crossprof_unwind::SharedFile`, so the unwinder can keep ranges
/// of it.
pub type SharedBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// The module files mapped so far, by path. `Send + Sync`: one per analysis, shared by the
/// symbolizer's loader threads and the unwinder.
#[derive(Default)]
pub struct FileCache {
    files: Mutex<HashMap<PathBuf, Weak<Backing>>>,
}

impl FileCache {
    /// An empty cache.
    pub fn new() -> FileCache {
        FileCache::default()
    }

    /// The mapping of `path`: the one already made when something still holds it, else a
    /// new one. Refuses what [`Backing::map`] refuses (not a regular file, unreadable).
    pub(crate) fn backing(&self, path: &Path) -> Result<Arc<Backing>, Error> {
        // A poisoned lock only means another thread panicked mid-insert; the map is still a
        // valid cache.
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = files.get(path).and_then(Weak::upgrade) {
            return Ok(b);
        }
        let b = Backing::map(path)?;
        files.retain(|_, w| w.strong_count() > 0);
        files.insert(path.to_path_buf(), Arc::downgrade(&b));
        Ok(b)
    }

    /// The bytes of the file at `path`, mapped once per analysis (see [`FileCache`]).
    pub fn map(&self, path: &Path) -> Result<SharedBytes, Error> {
        Ok(self.backing(path)?)
    }

    /// How many files are mapped now.
    pub fn mapped(&self) -> usize {
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        files.values().filter(|w| w.strong_count() > 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_mapped_once_while_used_and_unmapped_after() {
        let cache = FileCache::new();
        let exe = std::env::current_exe().unwrap();
        let a = cache.map(&exe).unwrap();
        let b = cache.map(&exe).unwrap();
        assert_eq!(
            (*a).as_ref().as_ptr(),
            (*b).as_ref().as_ptr(),
            "one mapping"
        );
        assert_eq!(cache.mapped(), 1);
        drop((a, b));
        assert_eq!(cache.mapped(), 0, "nothing holds it: unmapped");
        assert!(cache.map(Path::new("/nonexistent/file")).is_err());
        assert!(
            cache.map(Path::new("/dev/null")).is_err(),
            "not a regular file"
        );
    }
}
