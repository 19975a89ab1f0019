//! Why a module could not be loaded. Lookup never fails (it reports [`crate::MatchKind::Missing`]
//! or [`crate::MatchKind::Mismatch`] instead); loading a located file can, and the message names
//! the file so the report can say which one.

use std::path::PathBuf;

/// An error loading a module's files. Every variant that concerns a file carries its path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The lookup found no file to load symbols from.
    #[error("no debug file or image was located for this module")]
    NoDebugFile,
    /// The file could not be opened or mapped.
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The path is a directory, FIFO, device or other non-regular file.
    #[error("{} is not a regular file", .path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// The file is not an ELF file this crate can read, or its headers are corrupt.
    #[error("{} is not a usable ELF file: {source}", .path.display())]
    Elf {
        /// The file.
        path: PathBuf,
        /// What the ELF parser said.
        source: object::Error,
    },
    /// A compressed section would decompress to more than the limit this crate allows.
    #[error("{}: section {section} would decompress to {size} bytes, over the {limit}-byte limit", .path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The section name.
        section: String,
        /// The size the section claims or reached.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A compressed section (zlib, zstd or the xz of `.gnu_debugdata`) did not decompress.
    #[error("{}: section {section} does not decompress: {message}", .path.display())]
    Decompress {
        /// The file.
        path: PathBuf,
        /// The section name.
        section: String,
        /// What the decompressor said.
        message: String,
    },
    /// A third-party parser panicked on the file's contents; the panic was contained and the
    /// source it was reading is not used.
    #[error("{}: the {parser} parser failed on this file's contents", .path.display())]
    ParserPanic {
        /// The file.
        path: PathBuf,
        /// Which parser.
        parser: &'static str,
    },
    /// The DWARF of the file is corrupt where it had to be read eagerly.
    #[error("{}: unreadable DWARF: {source}", .path.display())]
    Dwarf {
        /// The file.
        path: PathBuf,
        /// What gimli said.
        source: gimli::Error,
    },
}
