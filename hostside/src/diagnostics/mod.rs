//! Every fallback the analysis took, counted and explained: the `diagnostics` section of the
//! text and JSON reports (field names in DESIGN.md). A weaker answer is never silent: a module
//! not found, debug info that could not be used, a stack cut short, events `rec` could not
//! decode or had to drop each become one entry with a count and a message that says what
//! happened and what to do.
//!
//! The pipeline gathers them from the parts that know ([`crate::pipeline::Loaded::context`]);
//! outputs only print them.

mod heap;
mod unwind;

use std::collections::BTreeMap;

use crossprof_format::Lost;
use crossprof_symbols::MatchKind;
use crossprof_unwind::CutShort;
use serde::Serialize;

use crate::analysis::heap::HeapProfile;
use crate::resolve::ModuleInfo;
use crate::unwinding::UnwindStats;

/// One fallback and how often it was taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// What happened, a stable kebab-case name (see [`Kind`]).
    pub kind: Kind,
    /// For kinds with several causes (`unwind-cut-short`, `heap-stack-cut-short`), which one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// For the stack diagnostics of a profile other than the CPU samples', which one:
    /// `off-cpu` (the blocking stacks of `rec --off-cpu`), `event` (the `--event` asked
    /// for) or `syscalls` (the system call entries of `rec -e syscalls`). Absent for the CPU
    /// samples and for everything that is not about stacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<&'static str>,
    /// How many times: modules, samples, allocations, records or bytes, as the message says.
    pub count: u64,
    /// What happened and what to do about it.
    pub message: String,
}

/// The kinds of fallback. The JSON names (kebab-case) are a contract: add, never rename.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Kind {
    /// The recording's end was torn or corrupt (count: bytes discarded).
    RecordingIncomplete,
    /// The kernel dropped samples (count: samples).
    SamplesLost,
    /// The interposer dropped heap events (count: events).
    HeapEventsLost,
    /// Perf records `rec` read but could not decode (count: records).
    PerfRecordsUndecoded,
    /// A perf ring buffer held an impossible record size and was skipped to its head (count:
    /// resynchronizations).
    RingResync,
    /// Perf events that could not be enabled when attaching (count: events).
    AttachEnableFailed,
    /// Heap interposer rings `rec` refused or could not read (count: rings).
    HeapRingsUnreadable,
    /// `rec -a` met more processes at once than it tracks, and did not read their maps from
    /// /proc (count: processes).
    ProcessesUntracked,
    /// Heap trace-tree nodes a `--max-size` segment could not carry (count: nodes).
    HeapNodesNotCarried,
    /// Live heap blocks a `--max-size` segment could not carry (count: blocks, at most).
    HeapBlocksNotCarried,
    /// Modules not found in the sysroot (count: modules).
    ModuleMissing,
    /// Modules whose sysroot file has another build-id (count: modules).
    ModuleMismatch,
    /// Modules found but not loadable (count: modules).
    ModuleLoadFailed,
    /// User frames outside every mapped file that no JIT map names (count: frames, per
    /// sample).
    JitMapMissing,
    /// Bytes of jitdumps `rec`'s size bound left on the board (count: bytes).
    JitdumpTruncated,
    /// jitdump records that did not parse or were cut short, pieces that did not follow on
    /// (count: records).
    JitdumpDamaged,
    /// Modules a debuginfod server could not provide: down, slow, not found, or answering
    /// something that is not the module (count: modules).
    DebuginfodFailed,
    /// Modules whose DWARF was damaged: symbol tables used instead (count: modules).
    DebugInfoDamaged,
    /// Modules whose DWARF was turned off after its parser panicked (count: modules).
    DwarfDisabled,
    /// Addresses whose DWARF lookup failed part way, named from the symbol tables or with a
    /// shortened inline chain (count: addresses).
    DwarfLookupFailed,
    /// Compilation units that did not parse and were skipped (count: units).
    DwarfUnitsUnreadable,
    /// Old segments of a `--max-size` recording rec could not delete (count: segments).
    SegmentDeleteFailed,
    /// Directory syncs after a segment was created or deleted that failed (count: syncs).
    DirectorySyncFailed,
    /// Other symbol sources present but unusable: MiniDebugInfo, an unreadable image (count:
    /// modules).
    SymbolSourceDamaged,
    /// The vDSO image copied from the board did not parse (count: 1).
    VdsoUnparsed,
    /// Stack-copy samples whose unwind stopped early, one entry per reason (count: samples).
    UnwindCutShort,
    /// Stack-copy samples without usable registers (count: samples).
    UnwindNoRegisters,
    /// Modules whose unwind sections could not be read (count: modules).
    UnwindSectionsFailed,
    /// CFI entries that did not parse and were skipped (count: entries).
    CfiEntriesSkipped,
    /// Frames in code no unwind table covers, unwound by the return-address or frame-pointer
    /// rule (count: frames).
    UnwindWithoutTables,
    /// Stacks that end where Go's runtime switched to the thread's system stack, so the
    /// goroutine's frames are not in the sample (count: samples).
    GoStackSwitch,
    /// Frames found by scanning the stack for a return address (count: frames).
    UnwindStackScanned,
    /// Stacks the copy cut short, completed from the same thread's complete stack (count:
    /// samples).
    UnwindJoined,
    /// Allocations whose stack reached the interposer's frame limit, so its outer end is
    /// missing (count: allocations).
    HeapStackCutShort,
    /// Allocations recorded without a known stack (count: allocations).
    HeapStackUnknown,
    /// Frees of blocks that were not live (count: frees).
    HeapUnknownFrees,
    /// Damage in the board's trace tree: unknown node ids, over-deep chains (count: chains).
    HeapTraceTreeDamaged,
    /// An export that shows each allocation at its time kept one in N, up to a cap (count:
    /// allocations not shown individually).
    HeapEventsSampled,
    /// Threads whose deepest stack came within 10% of their stack size (count: threads).
    StackNearLimit,
}

impl Kind {
    /// The kind's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::RecordingIncomplete => "recording-incomplete",
            Kind::SamplesLost => "samples-lost",
            Kind::HeapEventsLost => "heap-events-lost",
            Kind::PerfRecordsUndecoded => "perf-records-undecoded",
            Kind::RingResync => "ring-resync",
            Kind::AttachEnableFailed => "attach-enable-failed",
            Kind::HeapRingsUnreadable => "heap-rings-unreadable",
            Kind::ProcessesUntracked => "processes-untracked",
            Kind::HeapNodesNotCarried => "heap-nodes-not-carried",
            Kind::HeapBlocksNotCarried => "heap-blocks-not-carried",
            Kind::ModuleMissing => "module-missing",
            Kind::ModuleMismatch => "module-mismatch",
            Kind::ModuleLoadFailed => "module-load-failed",
            Kind::JitMapMissing => "jit-map-missing",
            Kind::JitdumpTruncated => "jitdump-truncated",
            Kind::JitdumpDamaged => "jitdump-damaged",
            Kind::DebuginfodFailed => "debuginfod-failed",
            Kind::DebugInfoDamaged => "debug-info-damaged",
            Kind::DwarfDisabled => "dwarf-disabled",
            Kind::DwarfLookupFailed => "dwarf-lookup-failed",
            Kind::DwarfUnitsUnreadable => "dwarf-units-unreadable",
            Kind::SegmentDeleteFailed => "segment-delete-failed",
            Kind::DirectorySyncFailed => "directory-sync-failed",
            Kind::SymbolSourceDamaged => "symbol-source-damaged",
            Kind::VdsoUnparsed => "vdso-unparsed",
            Kind::UnwindCutShort => "unwind-cut-short",
            Kind::UnwindNoRegisters => "unwind-no-registers",
            Kind::UnwindSectionsFailed => "unwind-sections-failed",
            Kind::CfiEntriesSkipped => "cfi-entries-skipped",
            Kind::UnwindWithoutTables => "unwind-without-tables",
            Kind::GoStackSwitch => "go-stack-switch",
            Kind::UnwindStackScanned => "unwind-stack-scanned",
            Kind::UnwindJoined => "unwind-joined",
            Kind::HeapStackCutShort => "heap-stack-cut-short",
            Kind::HeapStackUnknown => "heap-stack-unknown",
            Kind::HeapUnknownFrees => "heap-unknown-frees",
            Kind::HeapTraceTreeDamaged => "heap-trace-tree-damaged",
            Kind::HeapEventsSampled => "heap-events-sampled",
            Kind::StackNearLimit => "stack-near-limit",
        }
    }
}

impl Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// What [`gather`] looks at: the parts of a loaded recording that know about fallbacks.
pub struct Sources<'a> {
    /// Bytes discarded at the end of the file.
    pub bytes_discarded: u64,
    /// `Lost` record counts by kind (`samples`, `heap`, `undecodable`, `resync`,
    /// `enable-failed`, `heap-rings-unreadable`).
    pub lost: &'a BTreeMap<String, u64>,
    /// Every module with its lookup and load outcome.
    pub modules: &'a [ModuleInfo],
    /// Why the vDSO did not parse, if it did not.
    pub vdso_error: Option<&'a str>,
    /// How the CPU samples' stack copies unwound.
    pub unwind: &'a UnwindStats,
    /// How the stacks of the report's other profiles unwound, by profile name (`off-cpu`,
    /// `event`, `syscalls`): each gets its own stack diagnostics.
    pub other_stacks: &'a [(&'static str, &'a UnwindStats)],
    /// Why modules' unwind sections could not be read.
    pub unwind_errors: &'a [String],
    /// User frames outside every mapped file that no JIT map named.
    pub unmapped_frames: u64,
    /// What the jitdumps held and what was wrong with them.
    pub jit: &'a crate::jit::JitStats,
    /// The heap profile, when the report has one.
    pub heap: Option<&'a HeapProfile>,
}

/// Lists the fallbacks in `src`, most fundamental first (the file, then modules, then stacks).
/// Kinds with a zero count are left out.
pub fn gather(src: &Sources<'_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut add = |kind: Kind, count: u64, message: String| push(&mut out, kind, count, message);
    add(
        Kind::RecordingIncomplete,
        src.bytes_discarded,
        format!(
            "the last {} bytes of the recording were torn or corrupt and were skipped (rec was \
             killed or the board lost power); everything before them is used",
            src.bytes_discarded
        ),
    );
    let lost = |k: &str| src.lost.get(k).copied().unwrap_or(0);
    add(
        Kind::SamplesLost,
        lost("samples"),
        "the kernel dropped samples because rec did not drain its ring buffer in time; \
         record with a lower --freq"
            .into(),
    );
    add(
        Kind::HeapEventsLost,
        lost("heap"),
        "the heap interposer dropped events; heap counts are not exact".into(),
    );
    add(
        Kind::PerfRecordsUndecoded,
        lost("undecodable"),
        "perf records rec could not decode were skipped (a kernel with an unexpected record \
         layout); please report the board's kernel version"
            .into(),
    );
    add(
        Kind::RingResync,
        lost("resync"),
        "a perf ring buffer held an impossible record size; rec skipped what it held, so some \
         events are missing"
            .into(),
    );
    add(
        Kind::AttachEnableFailed,
        lost("enable-failed"),
        "perf events could not be enabled when attaching (a thread exited, or permissions): \
         those threads or CPUs were not sampled"
            .into(),
    );
    add(
        Kind::HeapRingsUnreadable,
        lost("heap-rings-unreadable"),
        "heap interposer rings rec refused or could not read (a libcrossprof_heap.so from \
         another release? see CROSSPROF_HEAP_LIB): those processes' heap events are missing"
            .into(),
    );
    add(
        Kind::SegmentDeleteFailed,
        lost(Lost::SEGMENT_DELETE_FAILED),
        "rec could not delete old segments of this --max-size recording: they stay on disk \
         and count against the bound, so newer segments were deleted in their place; check \
         the board's file system (read-only, failing)"
            .into(),
    );
    add(
        Kind::DirectorySyncFailed,
        lost(Lost::DIRECTORY_SYNC_FAILED),
        "rec could not sync the recording's directory after creating or deleting a segment: \
         after a power loss those segment files may be missing or back; check the board's \
         file system"
            .into(),
    );
    add(
        Kind::ProcessesUntracked,
        lost("untracked-process"),
        "rec -a met more processes at once than it keeps track of and did not read their \
         memory maps: samples of those processes that started before the recording are \
         unsymbolized"
            .into(),
    );
    add(
        Kind::HeapNodesNotCarried,
        lost(Lost::HEAP_NODE_NOT_CARRIED),
        "rec kept fewer heap stacks than the program made to write again into each new \
         --max-size segment: allocations of later segments that use the others show an \
         unknown stack"
            .into(),
    );
    add(
        Kind::HeapBlocksNotCarried,
        lost(Lost::HEAP_BLOCK_NOT_CARRIED),
        "live heap blocks past rec --heap-max-live were not carried into the next --max-size \
         segment (at most this many): a segment read alone misses them in its leaks and \
         peak; raise --heap-max-live if the board has the memory"
            .into(),
    );
    modules(src.modules, &mut add);
    add(
        Kind::JitMapMissing,
        src.unmapped_frames,
        "frames in memory no file is mapped at and no JIT map names: code generated at run \
         time without a /tmp/perf-PID.map (start Node with --perf-basic-prof, Java with a \
         perf-map agent, Python 3.12 with -X perf), or a damaged stack"
            .into(),
    );
    add(
        Kind::JitdumpTruncated,
        src.jit.bytes_cut,
        "bytes of jitdump files rec left on the board (its bound: 64 MiB per file, 256 MiB per \
         recording): JIT code loaded after the cut is unnamed"
            .into(),
    );
    add(
        Kind::JitdumpDamaged,
        src.jit.damaged,
        "jitdump records that did not parse or were cut short (a runtime still writing, a \
         damaged file); the code they describe is unnamed"
            .into(),
    );
    if let Some(e) = src.vdso_error {
        add(
            Kind::VdsoUnparsed,
            1,
            format!("the vDSO copied from the board did not parse ({e}): its frames are addresses and stacks through it are cut short"),
        );
    }
    unwind::stack_copies(src.unwind, src.unwind_errors, &mut add);
    if let Some(h) = src.heap {
        heap::allocations(h, &mut add);
    }
    if let Some(h) = src.heap {
        heap::cut_short(h, &mut out);
    }
    cut_short(src.unwind, None, &mut out);
    for &(profile, u) in src.other_stacks {
        let first = out.len();
        unwind::stack_copies(u, &[], &mut |kind, count, message| {
            push(&mut out, kind, count, message)
        });
        for d in &mut out[first..] {
            d.profile = Some(profile);
        }
        cut_short(u, Some(profile), &mut out);
    }
    out
}

/// Adds a diagnostic without a reason or profile, unless its count is 0.
fn push(out: &mut Vec<Diagnostic>, kind: Kind, count: u64, message: String) {
    if count > 0 {
        out.push(Diagnostic {
            kind,
            reason: None,
            profile: None,
            count,
            message,
        });
    }
}

/// The `unwind-cut-short` entries of one profile's stacks, one per reason.
fn cut_short(u: &UnwindStats, profile: Option<&'static str>, out: &mut Vec<Diagnostic>) {
    for why in CutShort::ALL {
        let n = u.truncated_by.get(why);
        if n > 0 {
            out.push(Diagnostic {
                kind: Kind::UnwindCutShort,
                reason: Some(why.name()),
                profile,
                count: n,
                message: format!("stacks cut short: {}", why.explain()),
            });
        }
    }
}

/// Up to three paths of the modules in `list`, for a message.
fn some_paths(list: &[&ModuleInfo]) -> String {
    let mut names: Vec<&str> = list.iter().take(3).map(|m| m.key.path.as_str()).collect();
    if list.len() > 3 {
        names.push("...");
    }
    names.join(", ")
}

fn modules(all: &[ModuleInfo], add: &mut impl FnMut(Kind, u64, String)) {
    let with = |f: &dyn Fn(&ModuleInfo) -> bool| all.iter().filter(|m| f(m)).collect::<Vec<_>>();
    // A missing module no frame fell in changes nothing in the report: not a fallback.
    let missing = with(&|m| m.located.match_kind == MatchKind::Missing && m.addresses > 0);
    add(
        Kind::ModuleMissing,
        missing.len() as u64,
        format!(
            "modules not found ({}): their frames are addresses and stack-copy unwinding stops \
             in them; pass --sysroot or --debug-dir with the board's unstripped files",
            some_paths(&missing)
        ),
    );
    let mismatched = with(&|m| m.located.match_kind == MatchKind::Mismatch);
    add(
        Kind::ModuleMismatch,
        mismatched.len() as u64,
        format!(
            "modules whose sysroot file has a different build-id ({}): not used, since a wrong \
             name is worse than an address; give the sysroot of the build that runs on the board",
            some_paths(&mismatched)
        ),
    );
    let failed = with(&|m| m.load_error.is_some());
    let first = failed.first().and_then(|m| m.load_error.as_deref());
    add(
        Kind::ModuleLoadFailed,
        failed.len() as u64,
        format!(
            "modules found but not loadable ({}; first error: {}): their frames are addresses",
            some_paths(&failed),
            first.unwrap_or("")
        ),
    );
    let unfetched = with(&|m| m.fetch_error.is_some());
    let first = unfetched.first().and_then(|m| m.fetch_error.as_deref());
    add(
        Kind::DebuginfodFailed,
        unfetched.len() as u64,
        format!(
            "modules the debuginfod servers in DEBUGINFOD_URLS did not provide ({}; first \
             error: {}): symbolized from local files as far as they go; check the servers \
             (DEBUGINFOD_TIMEOUT bounds each one)",
            some_paths(&unfetched),
            first.unwrap_or("")
        ),
    );
    let damaged = with(&|m| m.dwarf_error.is_some());
    let first = damaged.first().and_then(|m| m.dwarf_error.as_deref());
    add(
        Kind::DebugInfoDamaged,
        damaged.len() as u64,
        format!(
            "modules with damaged DWARF ({}; first error: {}): names come from the symbol \
             tables, without file:line or inlined functions; rebuild or re-extract the debug file",
            some_paths(&damaged),
            first.unwrap_or("")
        ),
    );
    let disabled = with(&|m| m.dwarf_disabled);
    add(
        Kind::DwarfDisabled,
        disabled.len() as u64,
        format!(
            "modules whose DWARF parser panicked during a lookup ({}): their DWARF was turned \
             off and later names come from the symbol tables; please report the file",
            some_paths(&disabled)
        ),
    );
    let skipped = with(&|m| m.dwarf_unreadable_units > 0);
    add(
        Kind::DwarfUnitsUnreadable,
        skipped.iter().map(|m| m.dwarf_unreadable_units).sum(),
        format!(
            "compilation units whose DWARF did not parse were skipped ({}): a damaged \
             abbreviation table, root entry or line table header; addresses in them are named \
             from the symbol tables, without file:line or inlined functions; rebuild or \
             re-extract the debug file",
            some_paths(&skipped)
        ),
    );
    let failing = with(&|m| m.dwarf_lookup_errors > 0);
    add(
        Kind::DwarfLookupFailed,
        failing.iter().map(|m| m.dwarf_lookup_errors).sum(),
        format!(
            "addresses whose DWARF lookup failed part way ({}): a damaged unit, line table or \
             inline entry; they are named from the symbol tables, or with fewer inlined \
             functions; rebuild or re-extract the debug file",
            some_paths(&failing)
        ),
    );
    let partial = with(&|m| !m.warnings.is_empty());
    let first = partial.first().and_then(|m| m.warnings.first());
    add(
        Kind::SymbolSourceDamaged,
        partial.len() as u64,
        format!(
            "modules with a symbol source present but unusable ({}; first: {}): the others are used",
            some_paths(&partial),
            first.map_or("", |s| s.as_str())
        ),
    );
}

#[cfg(test)]
mod tests;
