//! The data the HTML report's script reads: compact tables (functions, frames, stacks,
//! samples by time slice) serialized as one JSON object inside the page.

use std::collections::HashMap;

use serde::Serialize;

use crate::analysis::cpu::CpuProfile;
use crate::analysis::heap::HeapProfile;
use crate::analysis::off_cpu_profile::OffCpuProfile;
use crate::analysis::thread_timeline::ThreadTimeline;
use crate::diagnostics::Diagnostic;
use crate::frames::{FrameId, FrameTable};
use crate::output::context::ReportContext;
use crate::output::heap_beyond::{mmap_json, rss_split_json, MmapSiteJson, RssSplitJson};
use crate::output::html::Profiles;
use crate::output::latency;

/// At most this many time slices: the timeline's resolution and the bound on sample rows.
pub const TIME_SLICES: u64 = 1000;

/// The width of the page's time slices for a recording of `duration_ns`.
pub fn slice_ns(duration_ns: u64) -> u64 {
    duration_ns.max(1).div_ceil(TIME_SLICES).max(1)
}

/// Below this many samples a profile is too thin to trust: the summary says so.
pub const FEW_SAMPLES: u64 = 1000;

/// Everything the page shows.
#[derive(Serialize)]
pub struct Data {
    /// Page title.
    pub title: String,
    /// The profiled command.
    pub command: String,
    /// Target architecture.
    pub arch: String,
    /// The sampling event.
    pub event: String,
    /// Recording length, ns.
    pub duration_ns: u64,
    /// Board clock at the recording's start, ns: time slices count from here.
    pub start_ns: u64,
    /// Samples in the recording (in the selection, with `--from/--to/--pid/--tid`).
    pub samples: u64,
    /// What `--from/--to/--pid/--tid` selected, in words; empty for the whole recording.
    pub filter: String,
    /// What the summary warns about.
    pub warnings: Vec<Warning>,
    /// The CPU profile (empty for a heap-only recording).
    pub cpu: Tables,
    /// Threads, referred to by index.
    pub threads: Vec<Thread>,
    /// Width of a time slice, ns.
    pub slice_ns: u64,
    /// Sample rows: time slice, stack index and count, in three parallel arrays.
    pub sample_slice: Vec<u32>,
    /// See `sample_slice`.
    pub sample_stack: Vec<u32>,
    /// See `sample_slice`.
    pub sample_count: Vec<u32>,
    /// The heap analysis, for `rec --heap` recordings.
    pub heap: Option<Heap>,
    /// Blocked time, for `rec --off-cpu` recordings.
    pub off_cpu: Option<OffCpu>,
}

/// Off-CPU views: where threads waited, weighted by nanoseconds.
#[derive(Serialize)]
pub struct OffCpu {
    /// Functions, frames and the blocking stacks.
    pub tables: Tables,
    /// Wait rows: time slice, stack index and the nanoseconds of that stack's waits inside
    /// the slice, in three parallel arrays (a wait spanning slices is cut at their edges, so
    /// any run of slices adds up to the waits clipped to it).
    pub wait_slice: Vec<u32>,
    /// See `wait_slice`.
    pub wait_stack: Vec<u32>,
    /// See `wait_slice`.
    pub wait_ns: Vec<u64>,
    /// Whether the stacks are exact or approximate (the last CPU sample's).
    pub stacks: String,
}

/// One warning of the summary.
#[derive(Serialize)]
pub struct Warning {
    /// Stable kind name (the diagnostics' kinds, plus `few-samples`).
    pub kind: String,
    /// How many.
    pub count: u64,
    /// What happened and what to do.
    pub message: String,
}

/// A thread.
#[derive(Serialize)]
pub struct Thread {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Name.
    pub name: String,
    /// From context switches (`rec --off-cpu`), the slices where the thread was alive:
    /// `[slice, ns running, ns waiting]` (empty without switches).
    pub activity: Vec<[u64; 3]>,
    /// Its worst wakeups (`rec --off-cpu` with wakeups), marked on its timeline row.
    pub worst: Vec<WakeMark>,
}

/// One of a thread's worst wakeups, on the timeline.
#[derive(Serialize)]
pub struct WakeMark {
    /// The time slice it was woken in.
    pub slice: u32,
    /// Due to running, nanoseconds.
    pub latency_ns: u64,
    /// How late, and what ran instead (see [`crate::output::latency::describe`]).
    pub label: String,
}

/// Functions, frames (a function at a line) and stacks (frames outermost first).
#[derive(Serialize, Default)]
pub struct Tables {
    /// Function names.
    pub func_name: Vec<String>,
    /// Function source files ("" when unknown).
    pub func_file: Vec<String>,
    /// Function modules.
    pub func_module: Vec<String>,
    /// The line where the function was sampled most (0 when unknown): the report's file:line.
    pub func_line: Vec<u32>,
    /// Frame → function.
    pub frame_func: Vec<u32>,
    /// Frame → line (0 when unknown).
    pub frame_line: Vec<u32>,
    /// Stacks as frame indices, outermost first.
    pub stacks: Vec<Vec<u32>>,
    /// Thread index of each stack (CPU) or 0 (heap).
    pub stack_thread: Vec<u32>,
}

/// Heap views.
#[derive(Serialize)]
pub struct Heap {
    /// Functions, frames and the allocating stacks.
    pub tables: Tables,
    /// Per stack: allocations, temporary, bytes allocated, bytes at the peak, leaked bytes.
    pub costs: Vec<[u64; 5]>,
    /// Totals in the same order.
    pub totals: [u64; 5],
    /// Heap's own peak (max live bytes).
    pub peak_bytes: u64,
    /// Live heap bytes at the end of each heap time slice (null before the first event).
    pub live: Vec<Option<u64>>,
    /// The highest live heap bytes in each heap time slice (0 before the first event): the
    /// series `report --heap --json` gives as `timeline.heap_bytes`.
    pub live_max: Vec<u64>,
    /// Start of the first heap time slice, ns after the recording's start (a window's
    /// series starts and ends with the window).
    pub live_start_ns: u64,
    /// Width of a heap time slice, ns.
    pub live_slice_ns: u64,
    /// Whether each stack matches one of heaptrack's leak suppressions (its blocks live at
    /// the end are not leaks).
    pub suppressed: Vec<bool>,
    /// Allocation cells on the page's time slices (see
    /// [`crate::analysis::heap::slices`]): stack, allocating thread, the slice of the
    /// allocations, the slice of their frees (null: live at the end), count, bytes and how
    /// many heaptrack counts temporary, in parallel arrays. What the timeline's selection
    /// (time range, thread) sums up.
    pub cell_stack: Vec<u32>,
    /// See `cell_stack`: the page's index of the allocating thread.
    pub cell_thread: Vec<u32>,
    /// See `cell_stack`.
    pub cell_alloc: Vec<u32>,
    /// See `cell_stack`.
    pub cell_free: Vec<Option<u32>>,
    /// See `cell_stack`.
    pub cell_count: Vec<u64>,
    /// See `cell_stack`.
    pub cell_bytes: Vec<u64>,
    /// See `cell_stack`.
    pub cell_temporary: Vec<u64>,
    /// The program's own anonymous mappings by stack, as `report --heap --json` gives them
    /// (`heap.mmap.sites`).
    pub mmap: Vec<MmapSiteJson>,
    /// RSS by kind of mapping at rec's ticks (`heap.rss_split`).
    pub rss_split: Vec<RssSplitJson>,
}

/// Builds the tables of a frame table's stacks.
struct TableBuilder<'a> {
    table: &'a FrameTable,
    t: Tables,
    funcs: HashMap<(&'a str, &'a str), u32>,
    frames: HashMap<FrameId, u32>,
}

impl<'a> TableBuilder<'a> {
    fn new(table: &'a FrameTable) -> Self {
        TableBuilder {
            table,
            t: Tables::default(),
            funcs: HashMap::new(),
            frames: HashMap::new(),
        }
    }

    fn frame(&mut self, id: FrameId) -> u32 {
        if let Some(&i) = self.frames.get(&id) {
            return i;
        }
        let f = self.table.get(id);
        let key = (f.function.as_str(), f.module.as_str());
        let next = self.t.func_name.len() as u32;
        let func = *self.funcs.entry(key).or_insert(next);
        if func == next {
            self.t.func_name.push(f.function.clone());
            self.t.func_file.push(f.file.clone().unwrap_or_default());
            self.t.func_module.push(f.module.clone());
            self.t.func_line.push(f.line.unwrap_or(0));
        }
        let i = self.t.frame_func.len() as u32;
        self.t.frame_func.push(func);
        self.t.frame_line.push(f.line.unwrap_or(0));
        self.frames.insert(id, i);
        i
    }

    /// Adds a stack given innermost first.
    fn stack(&mut self, innermost_first: &[FrameId], thread: u32) {
        let s: Vec<u32> = innermost_first
            .iter()
            .rev()
            .map(|&id| self.frame(id))
            .collect();
        self.t.stacks.push(s);
        self.t.stack_thread.push(thread);
    }
}

/// The tables of a CPU profile's stacks; `threads` maps (pid, tid) to the page's thread
/// index (empty: every stack on thread 0).
pub fn cpu_tables(cpu: &CpuProfile, threads: &HashMap<(u32, u32), u32>) -> Tables {
    let mut b = TableBuilder::new(&cpu.table);
    for s in &cpu.stacks {
        let t = threads.get(&(s.pid, s.tid)).copied().unwrap_or(0);
        b.stack(&s.frames, t);
    }
    // Each function's line is that of its most sampled location, as `hostside report` says.
    for row in &cpu.functions {
        let f = cpu.table.get(row.frame);
        if let Some(&i) = b.funcs.get(&(f.function.as_str(), f.module.as_str())) {
            b.t.func_line[i as usize] = f.line.unwrap_or(0);
        }
    }
    b.t
}

/// The off-CPU tables and the waits cut at the page's slice edges (`start`, `slice_ns`).
fn off_cpu_data(
    w: &OffCpuProfile,
    threads: &HashMap<(u32, u32), u32>,
    start: u64,
    slice_ns: u64,
) -> OffCpu {
    // (slice, stack) → ns; BTreeMap for a stable order.
    let mut cells: std::collections::BTreeMap<(u32, u32), u64> = Default::default();
    for wait in &w.waits {
        let mut a = wait.from.max(start);
        while a < wait.to {
            let slice = (a - start) / slice_ns;
            if slice >= TIME_SLICES {
                break;
            }
            let end = start
                .saturating_add((slice + 1).saturating_mul(slice_ns))
                .min(wait.to);
            let ns = cells.entry((slice as u32, wait.stack)).or_default();
            *ns = ns.saturating_add(end - a);
            a = end;
        }
    }
    OffCpu {
        tables: cpu_tables(&w.profile, threads),
        wait_slice: cells.keys().map(|k| k.0).collect(),
        wait_stack: cells.keys().map(|k| k.1).collect(),
        wait_ns: cells.values().copied().collect(),
        stacks: w.stacks.clone(),
    }
}

/// The summary's warnings: a profile too thin to trust, then every diagnostic of `ctx`.
pub fn warnings(ctx: &ReportContext, samples: u64) -> Vec<Warning> {
    let mut warnings: Vec<Warning> = few_samples(samples).into_iter().collect();
    warnings.extend(ctx.diagnostics.iter().map(|d: &Diagnostic| Warning {
        kind: d.kind.name().to_string(),
        count: d.count,
        message: d.message.clone(),
    }));
    warnings
}

/// The `few-samples` warning for a profile of `samples` samples, when there are fewer than
/// [`FEW_SAMPLES`] (and some): the report page, and `diff` in text, JSON and HTML, give it.
pub fn few_samples(samples: u64) -> Option<Warning> {
    (samples > 0 && samples < FEW_SAMPLES).then(|| Warning {
        kind: "few-samples".into(),
        count: samples,
        message: format!(
            "only {samples} samples: shares below about {:.0}% are noise; record longer or \
             with a higher --freq",
            100.0 / (samples as f64).sqrt()
        ),
    })
}

/// Threads by index: those with CPU samples first, then those only the thread timeline or
/// the off-CPU profile know.
fn threads(ctx: &ReportContext, p: &Profiles<'_>) -> (Vec<Thread>, HashMap<(u32, u32), u32>) {
    let mut threads = Vec::new();
    let mut index = HashMap::new();
    let mut add = |pid: u32, tid: u32, name: &str| {
        *index.entry((pid, tid)).or_insert_with(|| {
            threads.push(Thread {
                pid,
                tid,
                name: name.to_string(),
                activity: Vec::new(),
                worst: Vec::new(),
            });
            threads.len() as u32 - 1
        })
    };
    for t in &p.cpu.threads {
        add(t.pid, t.tid, &t.comm);
    }
    for r in p.threads.map_or(&[][..], |t| &t.rows) {
        add(r.pid, r.tid, &r.comm);
    }
    for t in p.off_cpu.map_or(&[][..], |w| &w.threads) {
        add(t.pid, t.tid, &t.comm);
    }
    if let Some(h) = p.heap {
        for c in &h.slices {
            if let Some(t) = h.traces.get(c.trace as usize) {
                add(t.pid, c.tid, ctx.names.get(c.tid));
            }
        }
    }
    (threads, index)
}

/// Each woken thread's worst wakeups, on its row.
fn wake_marks(
    threads: &mut [Thread],
    index: &HashMap<(u32, u32), u32>,
    w: &OffCpuProfile,
    cpu: &CpuProfile,
    (start, slice_ns): (u64, u64),
) {
    let stacks = latency::InsteadStacks::new(cpu, &w.profile);
    for t in w.latency.iter().flatten() {
        let Some(row) = index
            .get(&(t.pid, t.tid))
            .and_then(|&i| threads.get_mut(i as usize))
        else {
            continue;
        };
        row.worst = t
            .worst
            .iter()
            .map(|x| WakeMark {
                slice: (x.woken.saturating_sub(start) / slice_ns).min(TIME_SLICES - 1) as u32,
                latency_ns: x.latency_ns,
                label: latency::describe(w, &stacks, x),
            })
            .collect();
    }
}

/// Each thread's running and waiting time per slice, from a timeline on the page's slices.
fn activity(threads: &mut [Thread], index: &HashMap<(u32, u32), u32>, t: &ThreadTimeline) {
    for r in &t.rows {
        let Some(th) = index
            .get(&(r.pid, r.tid))
            .and_then(|&i| threads.get_mut(i as usize))
        else {
            continue;
        };
        th.activity = r
            .running
            .iter()
            .zip(&r.waiting)
            .enumerate()
            .filter(|(_, (&run, &wait))| run + wait > 0)
            .map(|(i, (&run, &wait))| [i as u64, run, wait])
            .collect();
    }
}

/// Gathers the page's data.
pub fn gather(ctx: &ReportContext, p: &Profiles<'_>) -> Data {
    let h = &ctx.header;
    let cpu = p.cpu;
    let (mut threads, thread_index) = threads(ctx, p);
    if let Some(t) = p.threads {
        activity(&mut threads, &thread_index, t);
    }
    let start = h.start_clock_ns;
    let slice_ns = slice_ns(ctx.duration_ns);
    if let Some(w) = p.off_cpu {
        wake_marks(&mut threads, &thread_index, w, cpu, (start, slice_ns));
    }
    // (slice, stack) → count, in time order.
    let mut rows: Vec<(u32, u32, u32)> = Vec::new();
    for s in &cpu.timeline {
        let slice = (s.time.saturating_sub(start) / slice_ns).min(TIME_SLICES - 1) as u32;
        match rows
            .iter()
            .rev()
            .take_while(|r| r.0 == slice)
            .position(|r| r.1 == s.stack)
        {
            Some(back) => {
                let i = rows.len() - 1 - back;
                rows[i].2 = rows[i].2.saturating_add(1);
            }
            None => rows.push((slice, s.stack, 1)),
        }
    }
    let warnings = warnings(ctx, cpu.samples);
    let command = h.command.join(" ");
    Data {
        title: format!("crossprof: {command}"),
        command,
        arch: h.arch.clone(),
        event: h.event.clone(),
        duration_ns: ctx.duration_ns,
        start_ns: start,
        samples: cpu.samples,
        filter: ctx.window.describe().unwrap_or_default(),
        warnings,
        cpu: cpu_tables(cpu, &thread_index),
        threads,
        slice_ns,
        sample_slice: rows.iter().map(|r| r.0).collect(),
        sample_stack: rows.iter().map(|r| r.1).collect(),
        sample_count: rows.iter().map(|r| r.2).collect(),
        heap: p.heap.map(|h| heap_data(h, start, &thread_index)),
        off_cpu: p
            .off_cpu
            .map(|w| off_cpu_data(w, &thread_index, start, slice_ns)),
    }
}

fn heap_data(p: &HeapProfile, start: u64, threads: &HashMap<(u32, u32), u32>) -> Heap {
    let mut b = TableBuilder::new(&p.table);
    let mut costs = Vec::with_capacity(p.traces.len());
    for t in &p.traces {
        b.stack(&t.frames, 0);
        let c = &t.counts;
        costs.push([
            c.allocations,
            c.temporary,
            c.allocated_bytes,
            c.at_peak_bytes,
            c.leaked_bytes,
        ]);
    }
    let tt = &p.totals;
    Heap {
        tables: b.t,
        costs,
        totals: [
            tt.allocations,
            tt.temporary,
            tt.allocated_bytes,
            tt.peak_bytes,
            tt.leaked_bytes,
        ],
        peak_bytes: tt.peak_bytes,
        live: p.timeline.iter().map(|b| b.heap_last).collect(),
        live_max: p.timeline.iter().map(|b| b.heap_max.unwrap_or(0)).collect(),
        live_start_ns: p.timeline_start.saturating_sub(start),
        live_slice_ns: p.timeline_width,
        suppressed: p.traces.iter().map(|t| t.suppressed).collect(),
        cell_stack: p.slices.iter().map(|c| c.trace).collect(),
        cell_thread: p
            .slices
            .iter()
            .map(|c| {
                let pid = p.traces.get(c.trace as usize).map_or(0, |t| t.pid);
                threads.get(&(pid, c.tid)).copied().unwrap_or(0)
            })
            .collect(),
        cell_alloc: p.slices.iter().map(|c| c.allocated).collect(),
        cell_free: p.slices.iter().map(|c| c.freed).collect(),
        cell_count: p.slices.iter().map(|c| c.allocations).collect(),
        cell_bytes: p.slices.iter().map(|c| c.bytes).collect(),
        cell_temporary: p.slices.iter().map(|c| c.temporary).collect(),
        mmap: mmap_json(p, start).sites,
        rss_split: rss_split_json(p, start),
    }
}
