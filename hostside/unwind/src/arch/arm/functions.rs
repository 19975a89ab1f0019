//! Where each function of a 32-bit ARM module starts and ends, and whether it is Thumb code,
//! from its symbol tables: prologue analysis (see [`super::prologue`]) needs the start, and
//! the instruction set from the symbol (a Thumb function's address has its low bit set).

use object::{Object, ObjectSymbol, SymbolKind};

/// A module's functions, sorted by start (stated addresses).
#[derive(Debug, Clone, Default)]
pub struct Functions {
    /// (start, end, Thumb).
    ranges: Vec<(u64, u64, bool)>,
}

impl Functions {
    /// The function symbols of `files` (the image, then a debug file: `.symtab` and
    /// `.dynsym`), duplicates removed. Hand-written assembly often has no size (no `.size`
    /// directive, as libgcc's `__aeabi_ldivmod`): such a function runs to the next one.
    pub fn from_files(files: &[&object::File<'_>]) -> Functions {
        let mut ranges: Vec<(u64, u64, bool)> = files
            .iter()
            .flat_map(|f| f.symbols().chain(f.dynamic_symbols()))
            .filter(|s| s.kind() == SymbolKind::Text && s.address() > 1)
            .map(|s| {
                let start = s.address() & !1;
                (start, start.saturating_add(s.size()), s.address() & 1 != 0)
            })
            .collect();
        // Sized entries first at each start, so that they win the dedup.
        ranges.sort_unstable_by_key(|&(start, end, _)| (start, end == start));
        ranges.dedup_by_key(|r| r.0);
        for i in 0..ranges.len() {
            if ranges[i].1 == ranges[i].0 {
                ranges[i].1 = ranges.get(i + 1).map_or(u64::MAX, |r| r.0);
            }
        }
        Functions { ranges }
    }

    /// The function holding stated address `svma`: its start and whether it is Thumb code.
    pub fn at(&self, svma: u64) -> Option<(u64, bool)> {
        let i = self.ranges.partition_point(|r| r.0 <= svma);
        let &(start, end, thumb) = self.ranges.get(i.checked_sub(1)?)?;
        (svma < end).then_some((start, thumb))
    }

    /// A table of (start, end, Thumb) ranges, sorted (for tests of the walk).
    #[cfg(test)]
    pub(crate) fn from_ranges(ranges: Vec<(u64, u64, bool)>) -> Functions {
        Functions { ranges }
    }
}
