//! The little every output needs besides a profile: what the recording is, how its modules
//! matched, what the analysis had to fall back on, and the tasks' names. Outputs take this and a
//! profile, never the loader or the resolver, so they can be driven from a test with plain data.

use std::path::PathBuf;

use crossprof_format::{Header, Summary};
use crossprof_symbols::{MatchKind, Origin};

use crate::diagnostics::Diagnostic;
use crate::filter::Window;
use crate::processes::ProcessNames;

/// One module and how it was matched in the sysroot.
#[derive(Debug, Clone)]
pub struct ModuleRow {
    /// Path on the board.
    pub path: String,
    /// GNU build-id bytes, empty when none.
    pub build_id: Vec<u8>,
    /// The file symbols came from, if any.
    pub debug_file: Option<PathBuf>,
    /// How the sysroot file matched.
    pub match_kind: MatchKind,
    /// How the files were found (board path, build-id index, debuginfod).
    pub origin: Origin,
    /// Distinct code addresses of the profile in this module (see
    /// [`crate::resolve::ModuleInfo::addresses`]).
    pub addresses: u64,
}

/// What a report says about the recording around its profile.
#[derive(Debug, Clone)]
pub struct ReportContext {
    /// The recording file.
    pub path: PathBuf,
    /// The recording's header.
    pub header: Header,
    /// What the reader saw (frames, bytes discarded, completeness).
    pub summary: Summary,
    /// Nanoseconds from the recording's start to its end (or its last event).
    pub duration_ns: u64,
    /// Samples the kernel or recorder dropped.
    pub lost_samples: u64,
    /// Every code module, in order of first appearance.
    pub modules: Vec<ModuleRow>,
    /// Task names at the end of the recording, to label stacks by process.
    pub names: ProcessNames,
    /// Every fallback the analysis took.
    pub diagnostics: Vec<Diagnostic>,
    /// The time window, process and thread the profile was restricted to (`--from/--to/
    /// --pid/--tid`); reports say so in their header.
    pub window: Window,
}
