//! Symbolization for crossprof's host side: finds each recorded module's files in a debug
//! sysroot by path and GNU build-id, and turns file offsets into functions, files and lines,
//! inlined frames included.
//!
//! Use it with recordings made by `rec`, whose modules carry a board path, a build-id and file
//! offsets. It reads ELF only (any architecture, either endianness); DWARF comes from the
//! binary, a `.build-id` debug file or a `.gnu_debuglink` target; symbol names fall back to
//! `.symtab`, MiniDebugInfo and `.dynsym`. A [`BuildIdIndex`] finds files by build-id anywhere
//! under a sysroot or build tree; [`Debuginfod`] fetches them from debuginfod servers (opt-in).
//! Non-goals: split DWARF (`.dwo`), `dwz` supplementary files.
//!
//! Cost: [`Lookup::locate`] reads headers only. [`Module::load`] maps files (no copy) and parses
//! DWARF unit headers; line and function tables are parsed per unit on first lookup and kept
//! until the module is dropped. Every input file is treated as hostile: errors, not panics, and
//! compressed data is inflated only up to fixed limits.
//!
//! ```no_run
//! use crossprof_symbols::{Lookup, Module};
//!
//! let lookup = Lookup { sysroot: Some("/yocto/rootfs-dbg".into()), ..Lookup::default() };
//! let located = lookup.locate("/usr/lib/libfoo.so", &[0xab, 0xcd, 0xef, 0x01]);
//! println!("{}", located.match_kind.as_str());
//! let module = Module::load(&located)?;
//! if let Some(svma) = module.offset_to_svma(0x1234) {
//!     for frame in module.frames(svma) {
//!         println!("{:?} at {:?}:{:?}", frame.function, frame.file, frame.line);
//!     }
//! }
//! # Ok::<(), crossprof_symbols::Error>(())
//! ```

#![deny(missing_docs)]

mod backing;
mod debuginfod;
mod demangle;
mod dwarf;
mod dwarf_units;
mod elf_info;
mod error;
mod files;
mod functions;
mod index;
mod index_cache;
pub mod jitdump;
mod kallsyms;
mod lookup;
mod minidebuginfo;
mod module;
pub mod perf_map;
mod plt;
mod symtab;

pub use debuginfod::{Artifact, Debuginfod, FetchError};
pub use demangle::demangle;
pub use error::Error;
pub use files::{FileCache, SharedBytes};
pub use index::{BuildIdIndex, IndexOptions, IndexStats, IndexedFile, MAX_FILES_PER_ROOT};
pub use kallsyms::{Kallsyms, KernelSymbol};
pub use lookup::{Located, Lookup, MatchKind, Origin};
pub use module::{Module, ModuleStats, SymFrame};
