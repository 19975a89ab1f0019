//! The little every output needs besides a profile: what the recording is, how its modules
//! matched, what the analysis had to fall back on, and the tasks' names. Outputs take this and a
//! profile, never the loader or the resolver, so they can be driven from a test with plain data.

use std::path::PathBuf;

use crossprof_format::{Header, Summary};
use crossprof_symbols::{MatchKind, Origin};

use crate::diagnostics::Diagnostic;
use crate::filter::Window;
use crate::processes::{Mappings, ProcessNames};

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
    /// How the symbol file was found (board path, build-id index, debuginfod).
    pub origin: Origin,
    /// The binary whose unwind tables and program headers were used, if any.
    pub image: Option<PathBuf>,
    /// How that binary was found, which may differ from the symbol file's way.
    pub image_origin: Origin,
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
    /// Task names over time, to label stacks by process and thread.
    pub names: ProcessNames,
    /// Where the board dropped samples, in time order (see [`LostMark`]).
    pub lost_marks: Vec<LostMark>,
    /// The executable mappings of the address spaces the profiles use, for exports that
    /// place addresses in their files (pprof).
    pub mappings: Mappings,
    /// Every fallback the analysis took.
    pub diagnostics: Vec<Diagnostic>,
    /// The time window, process and thread the profile was restricted to (`--from/--to/
    /// --pid/--tid`); reports say so in their header.
    pub window: Window,
}

/// Samples the board dropped at one time (a `Lost` record of kind `samples`), for exports
/// that mark where a profile is thinner. At most [`LostMark::MAX`] are kept: past that, each
/// further record's count is added to the last mark, so the counts always sum to
/// [`ReportContext::lost_samples`] and a hostile file cannot grow the list without bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostMark {
    /// Board time of the record (ns).
    pub time: u64,
    /// Samples lost.
    pub count: u64,
}

impl LostMark {
    /// The most marks a context holds.
    pub const MAX: usize = 10_000;

    /// Adds a record to `marks` under the rule above.
    pub fn push(marks: &mut Vec<LostMark>, time: u64, count: u64) {
        let full = marks.len() >= LostMark::MAX;
        match marks.last_mut() {
            Some(last) if full => last.count = last.count.saturating_add(count),
            _ => marks.push(LostMark { time, count }),
        }
    }
}
