//! File bytes shared between everything a [`crate::Module`] keeps: the memory map (or owned
//! buffer) of each ELF file, and cheap handles to sub-ranges of it.
//!
//! This exists so DWARF sections, symbol names and program headers can point into a mapped file
//! without copying it and without a self-referencing struct: each [`Bytes`] holds an `Arc` to
//! its backing store plus a range, and implements gimli's `CloneStableDeref` so it can be used as
//! the storage of a `gimli::EndianReader`.

use std::fmt;
use std::fs::File;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;

use crate::error::Error;

/// Where the bytes of one ELF file live.
pub(crate) enum Backing {
    /// A read-only memory map of a file in the sysroot.
    Mapped(Mmap),
    /// Bytes owned in memory: a vDSO image, a decompressed section.
    Owned(Vec<u8>),
}

impl Backing {
    /// Maps the regular file at `path` read-only. Refuses anything that is not a regular file
    /// (a FIFO or device in a hostile sysroot would otherwise block or never end).
    pub(crate) fn map(path: &Path) -> Result<Arc<Backing>, Error> {
        let meta = std::fs::metadata(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if !meta.is_file() {
            return Err(Error::NotAFile {
                path: path.to_path_buf(),
            });
        }
        let file = File::open(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if file.metadata().map(|m| m.len()).unwrap_or(0) == 0 {
            return Ok(Arc::new(Backing::Owned(Vec::new())));
        }
        // SAFETY: the map is read-only and private to this process. As with every tool that maps
        // object files (gdb, perf, addr2line), a file truncated or rewritten while mapped can
        // fault or change under us; sysroots are build outputs that are not modified while
        // hostside runs.
        let map = unsafe { Mmap::map(&file) }.map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Arc::new(Backing::Mapped(map)))
    }

    /// The whole backing store.
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Backing::Mapped(m) => m,
            Backing::Owned(v) => v,
        }
    }
}

impl AsRef<[u8]> for Backing {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

/// A cheap, clonable handle to a range of a [`Backing`]. Cloning costs one atomic increment.
#[derive(Clone)]
pub(crate) struct Bytes {
    backing: Arc<Backing>,
    start: usize,
    end: usize,
}

impl Bytes {
    /// An empty range (for DWARF sections a file does not have).
    pub(crate) fn empty() -> Bytes {
        Bytes {
            backing: Arc::new(Backing::Owned(Vec::new())),
            start: 0,
            end: 0,
        }
    }

    /// The whole of `backing`.
    pub(crate) fn whole(backing: Arc<Backing>) -> Bytes {
        let end = backing.as_slice().len();
        Bytes {
            backing,
            start: 0,
            end,
        }
    }

    /// The handle for `sub`, which must be a sub-slice of `backing` (as the slices `object`
    /// returns when parsing it are). `None` if it is not.
    pub(crate) fn within(backing: &Arc<Backing>, sub: &[u8]) -> Option<Bytes> {
        let (start, end) = range_within(backing.as_slice(), sub)?;
        Some(Bytes {
            backing: Arc::clone(backing),
            start,
            end,
        })
    }
}

/// Where `sub` lies inside `whole`, if it does.
pub(crate) fn range_within(whole: &[u8], sub: &[u8]) -> Option<(usize, usize)> {
    let base = whole.as_ptr() as usize;
    let ptr = sub.as_ptr() as usize;
    let start = ptr.checked_sub(base)?;
    let end = start.checked_add(sub.len())?;
    (end <= whole.len()).then_some((start, end))
}

impl Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.backing
            .as_slice()
            .get(self.start..self.end)
            .unwrap_or(&[])
    }
}

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bytes({}..{})", self.start, self.end)
    }
}

// SAFETY: `deref` returns a slice of the backing store, which lives in the `Arc`'s heap
// allocation (an mmap region or a `Vec`'s buffer) that is never reallocated or moved: moving or
// cloning a `Bytes` only copies the `Arc` pointer, so the address stays the same for as long as
// any clone is alive.
unsafe impl stable_deref_trait::StableDeref for Bytes {}
// SAFETY: a clone shares the same `Arc` and range, so it dereferences to the same address.
unsafe impl stable_deref_trait::CloneStableDeref for Bytes {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_accepts_only_sub_slices() {
        let b = Arc::new(Backing::Owned(vec![1, 2, 3, 4, 5]));
        let s = b.as_slice();
        let inner = Bytes::within(&b, &s[1..4]).expect("sub-slice");
        assert_eq!(&*inner, &[2, 3, 4]);
        let other = [1u8, 2, 3];
        assert!(Bytes::within(&b, &other).is_none());
        assert_eq!(&*Bytes::empty(), &[] as &[u8]);
    }
}
