//! Function symbols from ELF symbol tables, for addresses DWARF does not cover or when there is
//! no DWARF: `.symtab`, the `.symtab` inside MiniDebugInfo, and `.dynsym`, merged into one sorted
//! table so each address finds the best name any source has.
//!
//! Names stay in the mapped files: an entry is 32 bytes plus nothing, and demangling happens
//! only when an address is looked up.

use std::sync::Arc;

use object::{Architecture, Object, ObjectSymbol, SymbolKind};

use crate::backing::{range_within, Backing};

/// Where a symbol came from; when two sources name the same address, the lower one wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Source {
    /// The full `.symtab` of the debug file or image.
    Symtab = 0,
    /// The `.symtab` inside a `.gnu_debugdata` section.
    MiniDebugInfo = 1,
    /// The dynamic symbol table, which every shared object keeps.
    Dynsym = 2,
    /// Names made up for the PLT's stubs (see [`crate::plt`]).
    Plt = 3,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    addr: u64,
    size: u64,
    name_start: usize,
    name_len: u32,
    file: u16,
    /// `Source` then binding (global, weak, local): lower is better.
    rank: u8,
}

/// A sorted table of function symbols. Lookup is a binary search.
#[derive(Default)]
pub(crate) struct SymbolTable {
    entries: Vec<Entry>,
    files: Vec<Arc<Backing>>,
}

/// Collects symbols from several files, then sorts them once.
#[derive(Default)]
pub(crate) struct Builder {
    entries: Vec<Entry>,
    files: Vec<Arc<Backing>>,
}

impl Builder {
    /// Adds the function symbols of `file` (parsed from `backing`) from `source`
    /// ([`Source::Dynsym`] reads `.dynsym`, the others `.symtab`).
    pub(crate) fn add(&mut self, file: &object::File<'_>, backing: &Arc<Backing>, source: Source) {
        let Ok(file_idx) = u16::try_from(self.files.len()) else {
            return;
        };
        let thumb = file.architecture() == Architecture::Arm;
        let whole = backing.as_slice();
        let before = self.entries.len();
        let symbols = match source {
            Source::Dynsym => file.dynamic_symbols(),
            Source::Symtab | Source::MiniDebugInfo => file.symbols(),
            // Made up from relocations instead: see `Builder::add_plt`.
            Source::Plt => return,
        };
        for sym in symbols {
            if sym.kind() != SymbolKind::Text || sym.is_undefined() {
                continue;
            }
            let Ok(name) = sym.name_bytes() else { continue };
            let Some((name_start, end)) = range_within(whole, name) else {
                continue;
            };
            let Ok(name_len) = u32::try_from(end - name_start) else {
                continue;
            };
            // Thumb function addresses have bit 0 set.
            let addr = if thumb {
                sym.address() & !1
            } else {
                sym.address()
            };
            if name.is_empty() || addr == 0 {
                continue;
            }
            let binding = if sym.is_global() {
                0
            } else if sym.is_weak() {
                1
            } else {
                2
            };
            self.entries.push(Entry {
                addr,
                size: sym.size(),
                name_start,
                name_len,
                file: file_idx,
                rank: (source as u8) * 4 + binding,
            });
        }
        if self.entries.len() > before {
            self.files.push(Arc::clone(backing));
        }
    }

    /// Adds the names made up for `file`'s PLT stubs (see [`crate::plt`]), kept in a
    /// buffer of their own.
    pub(crate) fn add_plt(&mut self, file: &object::File<'_>) {
        let stubs = crate::plt::stubs(file);
        let Ok(file_idx) = u16::try_from(self.files.len()) else {
            return;
        };
        if stubs.is_empty() {
            return;
        }
        let mut names = Vec::new();
        for s in stubs {
            let Ok(name_len) = u32::try_from(s.name.len()) else {
                continue;
            };
            self.entries.push(Entry {
                addr: s.addr,
                size: s.size,
                name_start: names.len(),
                name_len,
                file: file_idx,
                rank: (Source::Plt as u8) * 4,
            });
            names.extend_from_slice(s.name.as_bytes());
        }
        self.files.push(Arc::new(Backing::Owned(names)));
    }

    /// Sorts and keeps, for each address, the best-ranked name.
    pub(crate) fn finish(mut self) -> SymbolTable {
        self.entries.sort_unstable_by_key(|e| (e.addr, e.rank));
        self.entries.dedup_by_key(|e| e.addr);
        self.entries.shrink_to_fit();
        SymbolTable {
            entries: self.entries,
            files: self.files,
        }
    }
}

impl SymbolTable {
    /// The raw (mangled) name of the function containing `addr`: the nearest symbol at or below
    /// it, unless that symbol has a size and `addr` lies past its end.
    pub(crate) fn lookup(&self, addr: u64) -> Option<&[u8]> {
        let idx = self
            .entries
            .partition_point(|e| e.addr <= addr)
            .checked_sub(1)?;
        let e = &self.entries[idx];
        if e.size != 0 && addr - e.addr >= e.size {
            return None;
        }
        let file = self.files.get(usize::from(e.file))?;
        let end = e.name_start.checked_add(e.name_len as usize)?;
        file.as_slice().get(e.name_start..end)
    }

    /// Number of distinct symbol addresses.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}
