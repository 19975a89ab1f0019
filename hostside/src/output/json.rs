//! The `--json` report. Field names are a contract (DESIGN.md): scripts outside the project read
//! them, so fields may be added but never renamed.

use serde::Serialize;

use crate::analysis::cpu::CpuProfile;
use crate::analysis::events::EventProfile;
use crate::analysis::heap::HeapProfile;
use crate::analysis::off_cpu_profile::OffCpuProfile;
use crate::analysis::snapshot::ThreadSnapshot;
use crate::analysis::stack_usage::StackUsage;
use crate::analysis::syscalls::Syscalls;
use crate::analysis::thread_timeline::ThreadTimeline;
use crate::diagnostics::Diagnostic;
use crate::filter::Window;
use crate::output::context::ReportContext;
use crate::output::{heap_json, info, latency, off_cpu, stack_usage, syscalls, timeline};

/// The sections of `report --json` besides the recording's CPU profile, each present when
/// the recording has what it needs.
#[derive(Default)]
pub struct Sections<'a> {
    /// The event chosen with `--event`: its profile replaces the CPU profile in `cpu`.
    pub event: Option<&'a EventProfile>,
    /// The heap profile (`heap`).
    pub heap: Option<&'a HeapProfile>,
    /// The off-CPU waits (`off_cpu`).
    pub off_cpu: Option<&'a OffCpuProfile>,
    /// The thread timeline (`timeline`).
    pub timeline: Option<&'a ThreadTimeline>,
    /// The system calls (`syscalls` and `syscall_threads`).
    pub syscalls: Option<&'a Syscalls>,
    /// The threads of a snapshot recording (`snapshot`).
    pub snapshot: Option<&'a [ThreadSnapshot<'a>]>,
    /// Each thread's deepest stack (`stack_usage`, and a `stack-near-limit` diagnostic).
    pub stack_usage: Option<&'a StackUsage>,
}

/// Builds the `report --json` document: the recording, its modules, the `top` functions of
/// the CPU profile (or of the chosen event's) and the other `sections` present.
pub fn report(
    ctx: &ReportContext,
    cpu: &CpuProfile,
    sections: &Sections<'_>,
    top: usize,
) -> ReportJson {
    let mut report = base(
        ctx,
        sections.event.map_or(cpu, |e| &e.cpu),
        sections.heap,
        top,
    );
    if let (Some(e), Some(c)) = (sections.event, report.cpu.as_mut()) {
        c.event = e.name.clone();
        c.mappings = Some(e.mappings.iter().map(MappingJson::from).collect());
    }
    report.off_cpu = sections.off_cpu.map(|w| off_cpu::json(w, top));
    report.latency = sections
        .off_cpu
        .and_then(|w| latency::json(w, cpu, ctx.header.start_clock_ns));
    report.timeline = sections
        .timeline
        .map(|t| timeline::json(t, ctx.header.start_clock_ns));
    report.syscalls = sections.syscalls.map(|s| syscalls::json(s, top));
    report.syscall_threads = sections.syscalls.map(|s| syscalls::threads_json(s, top));
    report.snapshot = sections
        .snapshot
        .map(|t| crate::output::snapshot::json(cpu, t, ctx.header.start_clock_ns));
    report.stack_usage = sections.stack_usage.map(stack_usage::json);
    report
        .diagnostics
        .extend(sections.stack_usage.and_then(stack_usage::diagnostic));
    report
}

/// The document with its recording, modules, CPU and heap sections.
fn base(
    ctx: &ReportContext,
    cpu: &CpuProfile,
    heap: Option<&HeapProfile>,
    top: usize,
) -> ReportJson {
    let h = &ctx.header;
    ReportJson {
        recording: RecordingJson {
            arch: h.arch.clone(),
            command: h.command.clone(),
            complete: ctx.summary.complete,
            frames: ctx.summary.frames_read(),
            bytes_discarded: ctx.summary.bytes_discarded,
            duration_ns: ctx.duration_ns,
            lost_samples: ctx.lost_samples,
            filter: FilterJson::of(&ctx.window),
        },
        modules: ctx
            .modules
            .iter()
            .map(|m| ModuleJson {
                path: m.path.clone(),
                build_id: info::hex(&m.build_id),
                debug_file: m.debug_file.as_ref().map(|p| p.display().to_string()),
                match_kind: m.match_kind.as_str().to_string(),
                found_by: m.origin.as_str().to_string(),
                image_file: m.image.as_ref().map(|p| p.display().to_string()),
                image_found_by: m
                    .image
                    .as_ref()
                    .map(|_| m.image_origin.as_str().to_string()),
                addresses: m.addresses,
            })
            .collect(),
        diagnostics: ctx.diagnostics.clone(),
        cpu: Some(CpuJson {
            event: h.event.clone(),
            mappings: None,
            samples: cpu.samples,
            unsymbolized_frames: cpu.unsymbolized_frames,
            stack_unwinding: (cpu.unwind.total() > 0).then_some(cpu.unwind),
            functions: cpu
                .functions
                .iter()
                .take(top)
                .map(|f| {
                    let fr = cpu.table.get(f.frame);
                    FunctionJson {
                        function: fr.function.clone(),
                        file: fr.file.clone(),
                        line: fr.line,
                        module: fr.module.clone(),
                        self_samples: f.self_samples,
                        total: f.total_samples,
                    }
                })
                .collect(),
            processes: crate::output::process_table::rows(cpu, &ctx.names),
            threads: cpu
                .threads
                .iter()
                .map(|t| ThreadJson {
                    pid: t.pid,
                    tid: t.tid,
                    comm: t.comm.clone(),
                    samples: t.samples,
                })
                .collect(),
        }),
        off_cpu: None,
        latency: None,
        heap: heap.map(|p| heap_json::heap_json(p, top, h.start_clock_ns)),
        timeline: None,
        syscalls: None,
        syscall_threads: None,
        snapshot: None,
        stack_usage: None,
    }
}

/// The whole report.
#[derive(Serialize)]
pub struct ReportJson {
    /// What the file is and how much of it was readable.
    pub recording: RecordingJson,
    /// Every code module and how it was matched in the sysroot.
    pub modules: Vec<ModuleJson>,
    /// Every fallback the analysis took, with a count and what to do.
    pub diagnostics: Vec<Diagnostic>,
    /// CPU samples, or null when the report is not about CPU.
    pub cpu: Option<CpuJson>,
    /// Off-CPU time, or null when not recorded.
    pub off_cpu: Option<crate::output::off_cpu::OffCpuJson>,
    /// Each woken thread's scheduling latency (wakeup to running), or null when the recording
    /// has no wakeups (`rec --off-cpu` as root).
    pub latency: Option<Vec<crate::output::latency::LatencyJson>>,
    /// Heap analysis, or null when not recorded.
    pub heap: Option<crate::output::heap_json::HeapJson>,
    /// Each thread's running and waiting time over the recording, in slices (see
    /// [`crate::output::timeline`]); null when no thread was seen.
    pub timeline: Option<crate::output::timeline::TimelineJson>,
    /// Per system call (count, errors and errnos, time entry to exit, calling stacks), most
    /// time first; null when the recording has no system calls (`rec -e syscalls`).
    pub syscalls: Option<Vec<crate::output::syscalls::SyscallJson>>,
    /// The threads that spent most time in system calls (`--top` of them); null when the
    /// recording has no system calls.
    pub syscall_threads: Option<Vec<crate::output::syscalls::SyscallThreadJson>>,
    /// Every thread of every `rec --snapshot`: state, wait channel and stacks; null for other
    /// recordings.
    pub snapshot: Option<Vec<crate::output::snapshot::SnapshotJson>>,
    /// Each thread's deepest stack (bytes, its stack's size, the chain then), those near
    /// their limit first; null when the recording has no stack mappings (`rec --call-graph
    /// dwarf`, the default, records them).
    pub stack_usage: Option<Vec<crate::output::stack_usage::StackUsageJson>>,
}

/// The `recording` section.
#[derive(Serialize)]
pub struct RecordingJson {
    /// Architecture of the board.
    pub arch: String,
    /// Profiled command line.
    pub command: Vec<String>,
    /// Whether the recording ended normally.
    pub complete: bool,
    /// Frames decoded.
    pub frames: u64,
    /// Bytes at the end that were torn or corrupt.
    pub bytes_discarded: u64,
    /// Recording duration.
    pub duration_ns: u64,
    /// Samples the kernel dropped.
    pub lost_samples: u64,
    /// The time window, process and thread the report is restricted to (`--from/--to/
    /// --pid/--tid`), or null when it covers the whole recording.
    pub filter: Option<FilterJson>,
}

/// The `recording.filter` object: what `--from/--to/--pid/--tid` selected.
#[derive(Serialize)]
pub struct FilterJson {
    /// Window start, ns after the recording's start (inclusive), null when open.
    pub from_ns: Option<u64>,
    /// Window end, ns after the recording's start (exclusive), null when open.
    pub to_ns: Option<u64>,
    /// The selected process, or null.
    pub pid: Option<u32>,
    /// The selected thread, or null.
    pub tid: Option<u32>,
    /// The same in words, as the text report's header says it.
    pub description: String,
}

impl FilterJson {
    /// The object for `w`, `None` when it filters nothing.
    pub fn of(w: &Window) -> Option<FilterJson> {
        let description = w.describe()?;
        Some(FilterJson {
            from_ns: w.asked.from_ns,
            to_ns: w.asked.to_ns,
            pid: w.asked.pid,
            tid: w.asked.tid,
            description,
        })
    }
}

/// One module.
#[derive(Serialize)]
pub struct ModuleJson {
    /// Path on the board.
    pub path: String,
    /// Build-id as hex, empty when none.
    pub build_id: String,
    /// The file symbols came from.
    pub debug_file: Option<String>,
    /// `build-id`, `path-only`, `missing` or `mismatch`.
    #[serde(rename = "match")]
    pub match_kind: String,
    /// How the files were found: `path` (the board path or the conventional debug layouts),
    /// `index` (by build-id elsewhere in the sysroot, a debug dir or a search dir) or
    /// `debuginfod`.
    pub found_by: String,
    /// The binary that gave the unwind tables and program headers, when one was found (a
    /// debug file alone has no unwind tables).
    pub image_file: Option<String>,
    /// How that binary was found, as `found_by`: the two files may come from different places.
    pub image_found_by: Option<String>,
    /// Distinct code addresses of the profile that fell in the module: a missing module with
    /// none costs the report nothing.
    pub addresses: u64,
}

/// The `cpu` section.
#[derive(Serialize)]
pub struct CpuJson {
    /// The event these samples are of (`cpu-clock` unless `report --event` chose another;
    /// for fault events `self` and `total` count faults).
    pub event: String,
    /// Samples in the recording.
    pub samples: u64,
    /// Frames (per sample) no symbol covered.
    pub unsymbolized_frames: u64,
    /// Functions by self samples.
    pub functions: Vec<FunctionJson>,
    /// Samples per process, most first (`rec -a` recordings hold every process).
    pub processes: Vec<crate::output::process_table::ProcessJson>,
    /// Samples per thread.
    pub threads: Vec<ThreadJson>,
    /// How stack-copy samples unwound (`rec --call-graph dwarf`); absent for fp recordings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack_unwinding: Option<crate::unwinding::UnwindStats>,
    /// For events with a data address (faults): the mappings the addresses fell in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mappings: Option<Vec<MappingJson>>,
}

/// Where a fault event's addresses fell.
#[derive(Serialize)]
pub struct MappingJson {
    /// Process id.
    pub pid: u32,
    /// `heap`, `stack`, `anonymous`, `file`, `special` or `unmapped`.
    pub kind: String,
    /// The mapping's path as the board named it (`[heap]`, `//anon`, a file path).
    pub name: String,
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Events whose address fell in it.
    pub count: u64,
}

impl MappingJson {
    /// The JSON row of `m`.
    pub fn from(m: &crate::analysis::events::MappingHits) -> MappingJson {
        MappingJson {
            pid: m.pid,
            kind: m.kind.to_string(),
            name: m.name.clone(),
            start: m.start,
            end: m.end,
            count: m.count,
        }
    }
}

/// One function.
#[derive(Serialize)]
pub struct FunctionJson {
    /// Innermost (inlined) function name, demangled.
    pub function: String,
    /// Source file of its most sampled location.
    pub file: Option<String>,
    /// Source line of its most sampled location.
    pub line: Option<u32>,
    /// Module path on the board.
    pub module: String,
    /// Samples where it is the leaf.
    #[serde(rename = "self")]
    pub self_samples: u64,
    /// Samples where it is on the stack.
    pub total: u64,
}

/// One thread.
#[derive(Serialize)]
pub struct ThreadJson {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Thread name.
    pub comm: String,
    /// Samples.
    pub samples: u64,
}
