//! A loaded module: the located files mapped and turned into what address lookups need (DWARF
//! context, merged symbol table, load segments), shareable across threads.
//!
//! Loading maps the files and parses DWARF unit headers; function and line tables are parsed on
//! first use of each unit. Load a module once and reuse it for every address in it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossprof_gopclntab::GoTable;

use crate::backing::{Backing, Bytes};
use crate::demangle::demangle;
use crate::dwarf::Dwarf;
use crate::elf_info::{self, Segment};
use crate::error::Error;
use crate::files::FileCache;
use crate::functions::FunctionRanges;
use crate::lookup::Located;
use crate::minidebuginfo;
use crate::symtab::{self, Source, SymbolTable};

/// One frame of a symbolized address. An address inside inlined code gives several, innermost
/// first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymFrame {
    /// Demangled function name (`work::Engine::hot_a(long)`, `cpu_split::hot_a`, `hot_a`).
    pub function: Option<String>,
    /// Source file, as DWARF names it (usually absolute).
    pub file: Option<String>,
    /// Source line: of the address in the innermost frame, of the call site in the others.
    pub line: Option<u32>,
}

/// How lookups on a module were answered, so a report can show how much fell back to symbol
/// tables (no file:line, no inlines) or found nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModuleStats {
    /// Lookups answered by DWARF.
    pub dwarf: u64,
    /// Lookups whose function name came from `.symtab`, MiniDebugInfo or `.dynsym`.
    pub symbol_table: u64,
    /// Lookups answered by a Go binary's own function table (`.gopclntab`: name, file and
    /// line, no inlined frames).
    pub go_table: u64,
    /// Lookups that found no function.
    pub unresolved: u64,
}

#[derive(Default)]
struct Counters {
    dwarf: AtomicU64,
    symbol_table: AtomicU64,
    go_table: AtomicU64,
    unresolved: AtomicU64,
}

/// A module ready for address lookups. `Send + Sync`: share one per module across threads.
pub struct Module {
    dwarf: Option<Dwarf>,
    /// Why the debug file's DWARF could not be used, when it had some.
    dwarf_error: Option<String>,
    symbols: SymbolTable,
    /// A Go binary's function table, which stripping keeps.
    go: Option<GoTable<Bytes>>,
    /// Function ranges from the image's unwind tables, for code no symbol names.
    functions: FunctionRanges,
    segments: Vec<Segment>,
    warnings: Vec<String>,
    counters: Counters,
}

/// A mapped and parsed file.
struct Part<'a> {
    path: &'a Path,
    backing: &'a Arc<Backing>,
    file: object::File<'a>,
}

impl<'a> Part<'a> {
    fn parse(path: &'a Path, backing: &'a Arc<Backing>) -> Result<Part<'a>, Error> {
        let file = object::File::parse(backing.as_slice()).map_err(|source| Error::Elf {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Part {
            path,
            backing,
            file,
        })
    }
}

impl Module {
    /// Maps and loads the files `located` names: symbols from `debug_file`, load segments (and
    /// `.dynsym`, MiniDebugInfo) from `image` when there is one. Fails when the debug file cannot
    /// be read as ELF; damaged DWARF or MiniDebugInfo only loses those sources (see
    /// [`Module::warnings`]).
    pub fn load(located: &Located) -> Result<Module, Error> {
        Module::load_with(located, &FileCache::new())
    }

    /// [`Module::load`], mapping the files through `files`, so that the unwinder reading
    /// the same files gets the same maps.
    pub fn load_with(located: &Located, files: &FileCache) -> Result<Module, Error> {
        let debug_path = located.debug_file.as_deref().ok_or(Error::NoDebugFile)?;
        let debug_backing = files.backing(debug_path)?;
        let debug = Part::parse(debug_path, &debug_backing)?;
        let mut warnings = Vec::new();
        let image_backing = match located.image.as_deref().filter(|p| *p != debug_path) {
            Some(p) => match files.backing(p) {
                Ok(b) => Some((p, b)),
                Err(e) => {
                    warnings.push(e.to_string());
                    None
                }
            },
            None => None,
        };
        let image = match &image_backing {
            Some((p, b)) => match Part::parse(p, b) {
                Ok(part) => Some(part),
                Err(e) => {
                    warnings.push(e.to_string());
                    None
                }
            },
            None => None,
        };
        Ok(Module::build(&debug, image.as_ref(), warnings))
    }

    /// Loads an ELF image held in memory, such as the vDSO copied from the board.
    pub fn from_bytes(data: Vec<u8>) -> Result<Module, Error> {
        let backing = Arc::new(Backing::Owned(data));
        let path = PathBuf::from("<in-memory image>");
        let part = Part::parse(&path, &backing)?;
        Ok(Module::build(&part, None, Vec::new()))
    }

    fn build(debug: &Part<'_>, image: Option<&Part<'_>>, mut warnings: Vec<String>) -> Module {
        let (dwarf, dwarf_error) = match Dwarf::load(&debug.file, debug.backing, debug.path) {
            Ok(d) => (d, None),
            Err(e) => {
                warnings.push(format!("{e}; using symbol tables instead"));
                (None, Some(e.to_string()))
            }
        };
        let binary = image.unwrap_or(debug);
        let mut symbols = symtab::Builder::default();
        symbols.add(&debug.file, debug.backing, Source::Symtab);
        if let Some(image) = image {
            symbols.add(&image.file, image.backing, Source::Symtab);
        }
        match minidebuginfo::extract(&binary.file, binary.path) {
            Ok(Some(mini)) => match object::File::parse(mini.as_slice()) {
                Ok(file) => symbols.add(&file, &mini, Source::MiniDebugInfo),
                Err(e) => warnings.push(format!(
                    "{}: .gnu_debugdata holds no usable ELF file: {e}",
                    binary.path.display()
                )),
            },
            Ok(None) => {}
            Err(e) => warnings.push(e.to_string()),
        }
        symbols.add(&binary.file, binary.backing, Source::Dynsym);
        symbols.add_plt(&binary.file);
        Module {
            dwarf,
            dwarf_error,
            symbols: symbols.finish(),
            go: go_table(binary, &mut warnings),
            functions: FunctionRanges::of(&binary.file),
            segments: elf_info::segments(&binary.file),
            warnings,
            counters: Counters::default(),
        }
    }

    /// The stated virtual address (the address in the ELF file's own terms) of a byte at
    /// `file_offset` in the image, through its `PT_LOAD` headers. `None` when no segment covers
    /// the offset. When only a debug file was found its zeroed headers are rebuilt into the
    /// layout the linker produced.
    pub fn offset_to_svma(&self, file_offset: u64) -> Option<u64> {
        elf_info::offset_to_svma(&self.segments, file_offset)
    }

    /// The frames at `svma`, innermost inlined function first and the real function last. Names
    /// come from DWARF, else from a Go binary's function table (with file:line), else from
    /// the symbol tables, whichever first names the outermost frame; empty when nothing names
    /// the address. Allocates the returned strings; resolve each address once.
    pub fn frames(&self, svma: u64) -> Vec<SymFrame> {
        let mut frames = self
            .dwarf
            .as_ref()
            .map(|d| d.frames(svma))
            .unwrap_or_default();
        let go = || {
            let f = self.go.as_ref()?.func_at(svma)?;
            let (file, line) = f.file_line(svma).unzip();
            Some(SymFrame {
                function: Some(f.name()?.to_string()),
                file: file.map(str::to_string),
                line,
            })
        };
        let counter = if frames.last().is_some_and(|f| f.function.is_some()) {
            &self.counters.dwarf
        } else if let Some(frame) = go() {
            frames.clear();
            frames.push(frame);
            &self.counters.go_table
        } else if let Some(name) = self.symbols.lookup(svma) {
            let name = Some(demangle(&String::from_utf8_lossy(name)));
            match frames.last_mut() {
                Some(outer) => outer.function = name,
                None => frames.push(SymFrame {
                    function: name,
                    file: None,
                    line: None,
                }),
            }
            &self.counters.symbol_table
        } else {
            &self.counters.unresolved
        };
        counter.fetch_add(1, Ordering::Relaxed);
        frames
    }

    /// The file offset where the function containing `svma` starts, by the image's unwind
    /// tables (`.eh_frame` entries, else `.ARM.exidx`): what names code no symbol covers, so
    /// that all of one function's addresses share a name. `None` outside every range.
    pub fn function_start_offset(&self, svma: u64) -> Option<u64> {
        let start = self.functions.start_of(svma)?;
        elf_info::svma_to_offset(&self.segments, start)
    }

    /// True when the module has DWARF (so frames carry file:line and inlines).
    pub fn has_dwarf(&self) -> bool {
        self.dwarf.is_some()
    }

    /// Why the debug file's DWARF was present but unusable (damaged, or its parser panicked
    /// while loading): names then come from the symbol tables, without file:line or inlines.
    pub fn dwarf_error(&self) -> Option<&str> {
        self.dwarf_error.as_deref()
    }

    /// Compilation units of the debug file that did not parse and were skipped: their
    /// addresses are named from the symbol tables, without file:line or inlined functions.
    pub fn dwarf_unreadable_units(&self) -> u64 {
        self.dwarf.as_ref().map_or(0, |d| d.unreadable_units())
    }

    /// Lookups so far whose DWARF failed part way (a damaged unit, line program or inline
    /// entry, found only when an address falls in it): each address was named from the symbol
    /// tables instead, or with its inline chain cut short.
    pub fn dwarf_lookup_errors(&self) -> u64 {
        self.dwarf.as_ref().map_or(0, |d| d.lookup_errors())
    }

    /// True once a DWARF lookup panicked inside the parser: the module's DWARF is turned off
    /// for the rest of the run and its addresses are named from the symbol tables.
    pub fn dwarf_disabled(&self) -> bool {
        self.dwarf.as_ref().is_some_and(|d| d.disabled())
    }

    /// Number of distinct function addresses in the merged symbol tables.
    pub fn symbol_count(&self) -> usize {
        self.symbols.len()
    }

    /// Sources that were present but unusable (damaged DWARF, MiniDebugInfo, an unreadable
    /// image), each with its file. The module works without them.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// How lookups so far were answered.
    pub fn stats(&self) -> ModuleStats {
        ModuleStats {
            dwarf: self.counters.dwarf.load(Ordering::Relaxed),
            symbol_table: self.counters.symbol_table.load(Ordering::Relaxed),
            go_table: self.counters.go_table.load(Ordering::Relaxed),
            unresolved: self.counters.unresolved.load(Ordering::Relaxed),
        }
    }
}

/// The Go function table of `binary`, if it is a Go binary; a damaged one is a warning.
fn go_table(binary: &Part<'_>, warnings: &mut Vec<String>) -> Option<GoTable<Bytes>> {
    let whole = binary.backing.as_slice();
    let at = crossprof_gopclntab::locate(&binary.file, whole)?;
    let bytes = Bytes::within(binary.backing, whole.get(at.file_range)?)?;
    GoTable::new(bytes, at.text_start)
        .map_err(|e| warnings.push(format!("{}: {e}", binary.path.display())))
        .ok()
}

/// `resolve.rs` shares modules across rayon threads.
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<Module>();
};
