//! Section bytes that point into a module file the caller opened once, instead of copies.
//!
//! hostside maps each module file once and shares that mapping between the symbolizer and
//! this crate ([`SharedFile`]); a [`Section`] is a range of it, so the unwind tables and the
//! code of every module cost address space, not heap, and no file is read twice. Only what
//! has to be made (a decompressed `.debug_frame`) is owned.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// A whole module file's bytes as the caller holds them: a read-only memory map shared with
/// the symbolizer, or an owned buffer (the vDSO image a recording carries, a test's bytes).
/// Cloning it is one atomic increment.
pub type SharedFile = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// The bytes of a [`SharedFile`].
pub(crate) fn file_bytes(f: &SharedFile) -> &[u8] {
    (**f).as_ref()
}

/// A cheap, clonable handle to a range of a [`SharedFile`] (one section). Opaque outside
/// this crate; public only because framehop's unwinder type names it.
#[derive(Clone)]
pub struct Section {
    file: SharedFile,
    start: usize,
    end: usize,
}

impl Section {
    /// All of `file`.
    pub(crate) fn whole(file: SharedFile) -> Section {
        let end = file_bytes(&file).len();
        Section {
            file,
            start: 0,
            end,
        }
    }

    /// The handle for `sub`, a slice `object` returned while parsing `file`; a copy when
    /// `sub` is not inside it.
    pub(crate) fn within(file: &SharedFile, sub: &[u8]) -> Section {
        let whole = file_bytes(file);
        let start = (sub.as_ptr() as usize).wrapping_sub(whole.as_ptr() as usize);
        match start.checked_add(sub.len()) {
            Some(end) if start <= whole.len() && end <= whole.len() => Section {
                file: Arc::clone(file),
                start,
                end,
            },
            _ => Section::from(sub.to_vec()),
        }
    }
}

/// An empty section (what framehop's section info defaults to).
impl Default for Section {
    fn default() -> Section {
        Section::from(Vec::new())
    }
}

impl From<Vec<u8>> for Section {
    fn from(v: Vec<u8>) -> Section {
        Section::whole(Arc::new(v))
    }
}

impl Deref for Section {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        file_bytes(&self.file)
            .get(self.start..self.end)
            .unwrap_or(&[])
    }
}

impl fmt::Debug for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Section({}..{})", self.start, self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_section_points_into_its_file_or_is_a_copy() {
        let file: SharedFile = Arc::new(vec![1u8, 2, 3, 4, 5]);
        let inner = Section::within(&file, &file_bytes(&file)[1..4]);
        assert_eq!(&*inner, &[2, 3, 4]);
        assert_eq!(
            Arc::strong_count(&file),
            2,
            "shares the file, copies nothing"
        );
        let other = [9u8, 8];
        let copy = Section::within(&file, &other);
        assert_eq!(&*copy, &[9, 8]);
        assert_eq!(Arc::strong_count(&file), 2);
    }
}
