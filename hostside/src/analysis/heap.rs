//! Heap profile: every allocation and free of a `rec --heap` recording, counted with heaptrack's
//! definitions and attributed to symbolized sites.
//!
//! One streaming pass. Allocation stacks are canonicalized by [`TraceTree`]; per address space,
//! [`SpaceHeap`] applies heaptrack's rules (which free releases what, which allocation is
//! temporary). Counts are kept per canonical stack ("trace") and per *site*, the location that
//! called the allocator: the innermost frame of the first stack entry that is not one of the
//! `operator new` overloads heaptrack skips. A trace's site is symbolized the first time it
//! allocates (a handful of addresses per distinct stack), so per-site peaks can be tracked while
//! streaming; the remaining frames are resolved at the end, in parallel.
//!
//! Definitions (see DESIGN.md, and [`crate::analysis::heap_rules`] for the counting rules):
//! - `peak_bytes` of the whole heap is the maximum of live bytes, summed over processes, reached
//!   first at `peak_time`; a site's `peak_bytes` is the maximum of its own live bytes, and its
//!   `at_peak_bytes` what it held at the moment of the global peak (heaptrack_print's per-site
//!   "peak"; these add up to the global peak).
//! - `leaked` is what was still live at the end, minus allocations whose stack matches one of
//!   heaptrack's built-in leak suppressions (reported as `suppressed`).
//!
//! Memory: one entry per live block, one small record per distinct stack node and site; nothing
//! grows with the number of events.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use crossprof_format::Record;

use crate::analysis::heap_rules::{Block, SpaceHeap};
use crate::analysis::heap_timeline::{Bucket, Timeline};
use crate::analysis::trace_tree::{TraceId, TraceTree, TreeAnomalies, EMPTY_TRACE};
use crate::folded::Folded;
use crate::frames::{Frame, FrameId, FrameTable};
use crate::processes::{Placed, Processes, SpaceKey};
use crate::recording::Pass;
use crate::resolve::{unmapped_frame, Resolver};

/// Functions heaptrack removes from the inner end of a stack: the site is their caller.
pub const OPERATOR_NEW: [&str; 4] = [
    "operator new(unsigned long)",
    "operator new[](unsigned long)",
    "operator new(unsigned int)",
    "operator new[](unsigned int)",
];

/// Frames a printed stack ends with (heaptrack's stop functions); what lies outside is start-up.
pub const STOP_FUNCTIONS: [&str; 3] = [
    "main",
    "__libc_start_main",
    "__static_initialization_and_destruction_0",
];

/// heaptrack's built-in leak suppressions (substring matches on function, file or module):
/// one-time allocations of the C library, the dynamic linker and GLib that are never freed.
pub const BUILTIN_SUPPRESSIONS: [&str; 7] = [
    "__nss_module_allocate",
    "__gconv_read_conf",
    "__new_exitfn",
    "tzset_internal",
    "dl_open_worker",
    "g_main_context_new",
    "g_thread_self",
];

/// How far a heap event's time may lag behind the true time. The interposer stamps events with
/// the kernel tick's clock (`CLOCK_MONOTONIC_COARSE`, 1 to 10 ms behind), while `rec` stamps an
/// exec precisely, so the first events of a freshly exec'd image can carry a time just before
/// the exec. An event is placed in the image that runs [`HEAP_CLOCK_SLACK_NS`] after its stamp.
pub const HEAP_CLOCK_SLACK_NS: u64 = 10_000_000;

/// Name of the site of allocations whose stack is unknown.
pub const UNKNOWN_STACK: &str = "[unknown stack]";

/// Options of the analysis.
#[derive(Debug, Clone, Copy)]
pub struct HeapOptions {
    /// How many of the largest single allocations to keep.
    pub largest: usize,
    /// Apply heaptrack's built-in leak suppressions.
    pub suppressions: bool,
}

impl Default for HeapOptions {
    fn default() -> Self {
        HeapOptions {
            largest: 20,
            suppressions: true,
        }
    }
}

/// Whole-recording numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeapTotals {
    /// Calls to allocation functions (heaptrack's "calls to allocation functions").
    pub allocations: u64,
    /// Temporary allocations (heaptrack's "temporary memory allocations").
    pub temporary: u64,
    /// Bytes requested over the whole run.
    pub allocated_bytes: u64,
    /// Highest live heap bytes (heaptrack's "peak heap memory consumption").
    pub peak_bytes: u64,
    /// Board time at which the peak was first reached (0 without allocations).
    pub peak_time: u64,
    /// Bytes still live at the end, suppressed leaks excluded ("total memory leaked").
    pub leaked_bytes: u64,
    /// Blocks still live at the end, suppressed leaks excluded.
    pub leaked_allocations: u64,
    /// Live bytes at the end that a built-in suppression matched.
    pub suppressed_leaked_bytes: u64,
    /// Live blocks at the end that a built-in suppression matched.
    pub suppressed_leaked_allocations: u64,
    /// Highest RSS sampled, summed over the recorded processes (0 without RSS records).
    pub peak_rss_bytes: u64,
}

/// Counts shared by sites and traces.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeapCounts {
    /// Allocation calls.
    pub allocations: u64,
    /// Temporary allocations.
    pub temporary: u64,
    /// Bytes requested.
    pub allocated_bytes: u64,
    /// Maximum of the own live bytes (for a trace: 0; only sites track it).
    pub peak_bytes: u64,
    /// Live bytes at the moment of the global peak.
    pub at_peak_bytes: u64,
    /// Live bytes at the end, unless suppressed.
    pub leaked_bytes: u64,
    /// Live blocks at the end, unless suppressed.
    pub leaked_allocations: u64,
}

/// One distinct allocating stack.
#[derive(Debug, Clone)]
pub struct TraceRow {
    /// Process id.
    pub pid: u32,
    /// Index of its site in [`HeapProfile::sites`].
    pub site: usize,
    /// Frames from the site outward, innermost first, ending at `main` (inlined frames
    /// included).
    pub frames: Vec<FrameId>,
    /// Its counts.
    pub counts: HeapCounts,
    /// Whether a leak suppression matched its stack.
    pub suppressed: bool,
}

/// One allocation site: the code that called the allocator.
#[derive(Debug, Clone)]
pub struct SiteRow {
    /// The site's frame (innermost inlined function at the call).
    pub frame: FrameId,
    /// Counts summed over its traces; `peak_bytes` is the site's own maximum.
    pub counts: HeapCounts,
    /// Indices into [`HeapProfile::traces`], most allocations first.
    pub traces: Vec<usize>,
}

/// One of the largest single allocations.
#[derive(Debug, Clone)]
pub struct LargeAllocation {
    /// Requested size.
    pub size: u64,
    /// Board time.
    pub time: u64,
    /// Process id.
    pub pid: u32,
    /// Index into [`HeapProfile::traces`].
    pub trace: usize,
}

/// Oddities in the event stream, counted rather than trusted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct HeapAnomalies {
    /// Damage in the trace tree.
    #[serde(flatten)]
    pub tree: TreeAnomalies,
    /// Allocations whose stack id was 0 or unknown.
    pub unknown_stack_allocations: u64,
    /// Frees of addresses that were not live (double frees, blocks from before recording).
    pub unknown_frees: u64,
    /// Allocations at an address that was still live (a free was lost): the older block stays
    /// counted as live.
    pub reused_live_addresses: u64,
    /// Allocation records with a null address (ignored, as heaptrack does).
    pub null_allocations: u64,
}

/// The whole heap analysis.
pub struct HeapProfile {
    /// Frames referenced by ids below.
    pub table: FrameTable,
    /// Totals.
    pub totals: HeapTotals,
    /// Sites, most allocations first.
    pub sites: Vec<SiteRow>,
    /// Distinct stacks that allocated.
    pub traces: Vec<TraceRow>,
    /// The largest single allocations, largest first.
    pub largest: Vec<LargeAllocation>,
    /// Heap and RSS over time, gaps filled, from `timeline_start` in `timeline_width` steps.
    pub timeline: Vec<Bucket>,
    /// Board time of the first timeline bucket.
    pub timeline_start: u64,
    /// Width of a timeline bucket, ns.
    pub timeline_width: u64,
    /// Board time of the last event (the End record when there is one).
    pub end_time: u64,
    /// Heap events the board reported as dropped (`Lost { kind: "heap" }`).
    pub lost_events: u64,
    /// Address spaces (process images) that allocated.
    pub address_spaces: u64,
    /// What looked wrong.
    pub anomalies: HeapAnomalies,
}

#[derive(Default, Clone, Copy)]
struct TraceAcc {
    used: bool,
    pid: u32,
    site: u32,
    allocations: u64,
    temporary: u64,
    allocated: u64,
    live_bytes: u64,
    live_count: u64,
    /// Live bytes at the global peak, valid when `epoch` is the current peak epoch.
    snap: u64,
    epoch: u64,
}

struct SiteAcc {
    frame: FrameId,
    live: u64,
    max: u64,
}

/// An entry of the largest-allocations heap: size, then earlier sequence numbers first, then
/// time, pid and trace.
type Largest = (u64, Reverse<u64>, u64, u32, TraceId);

/// Streaming state of the analysis.
struct State<'a> {
    processes: &'a Processes,
    resolver: &'a Resolver,
    opts: HeapOptions,
    tree: TraceTree,
    table: FrameTable,
    spaces: HashMap<SpaceKey, SpaceHeap>,
    traces: Vec<TraceAcc>,
    /// Frames of each canonical node (index = trace id), resolved on demand.
    node_frames: Vec<Option<Vec<FrameId>>>,
    placed: HashMap<Placed, Vec<FrameId>>,
    sites: Vec<SiteAcc>,
    site_index: HashMap<FrameId, u32>,
    totals: HeapTotals,
    live: u64,
    epoch: u64,
    timeline: Timeline,
    rss: HashMap<u32, u64>,
    /// Min-heap of the largest allocations: (size, earlier first, time, pid, trace).
    largest: BinaryHeap<Reverse<Largest>>,
    seq: u64,
    lost: u64,
    end_time: Option<u64>,
    last_time: u64,
    anomalies: HeapAnomalies,
}

/// Streams the heap events of a recording and builds the profile. `start` is the recording's
/// start on the board clock (the header's `start_clock_ns`).
pub fn analyze(
    records: Pass<'_>,
    processes: &Processes,
    resolver: &Resolver,
    start: u64,
    opts: HeapOptions,
) -> HeapProfile {
    let mut st = State {
        processes,
        resolver,
        opts,
        tree: TraceTree::default(),
        table: FrameTable::default(),
        spaces: HashMap::new(),
        traces: Vec::new(),
        node_frames: Vec::new(),
        placed: HashMap::new(),
        sites: Vec::new(),
        site_index: HashMap::new(),
        totals: HeapTotals::default(),
        live: 0,
        epoch: 0,
        timeline: Timeline::new(start),
        rss: HashMap::new(),
        largest: BinaryHeap::new(),
        seq: 0,
        lost: 0,
        end_time: None,
        last_time: start,
        anomalies: HeapAnomalies::default(),
    };
    records(&mut |r| st.record(r));
    st.finish()
}

impl State<'_> {
    fn record(&mut self, r: Record) {
        match r {
            Record::StackNode(n) => self.tree.add_node(&n),
            Record::Alloc(a) => {
                self.last_time = self.last_time.max(a.time);
                if a.addr == 0 {
                    self.anomalies.null_allocations += 1;
                    return;
                }
                let space = self.space(a.pid, a.time);
                let trace = self.tree.trace(space, a.stack, self.processes);
                self.alloc(space, a.addr, a.size, trace, a.time);
            }
            Record::Free(f) => {
                self.last_time = self.last_time.max(f.time);
                if f.addr == 0 {
                    return;
                }
                let space = self.space(f.pid, f.time);
                self.free(space, f.addr, f.time);
            }
            Record::Rss(r) => {
                self.rss.insert(r.pid, r.bytes);
                let total: u64 = self.rss.values().fold(0, |a, &b| a.saturating_add(b));
                self.totals.peak_rss_bytes = self.totals.peak_rss_bytes.max(total);
                self.timeline.rss(r.time, total);
            }
            Record::Exit(t) if t.pid == t.tid => {
                self.rss.remove(&t.pid);
            }
            Record::Lost(l) if l.kind == "heap" => self.lost = self.lost.saturating_add(l.count),
            Record::End(e) => self.end_time = Some(e.time),
            _ => {}
        }
    }

    /// The address space (process image) a heap event of `pid` stamped `time` belongs to.
    fn space(&self, pid: u32, time: u64) -> SpaceKey {
        (
            pid,
            self.processes
                .generation(pid, time.saturating_add(HEAP_CLOCK_SLACK_NS)),
        )
    }

    fn trace_acc(&mut self, t: TraceId) -> &mut TraceAcc {
        let i = t as usize;
        if i >= self.traces.len() {
            self.traces.resize(i + 1, TraceAcc::default());
        }
        &mut self.traces[i]
    }

    /// Brings a trace's live-at-peak snapshot up to date before its live bytes change.
    fn before_change(&mut self, t: TraceId) {
        let epoch = self.epoch;
        let acc = self.trace_acc(t);
        if acc.epoch != epoch {
            acc.snap = acc.live_bytes;
            acc.epoch = epoch;
        }
    }

    fn alloc(&mut self, space: SpaceKey, addr: u64, size: u64, trace: TraceId, time: u64) {
        if trace == EMPTY_TRACE {
            self.anomalies.unknown_stack_allocations += 1;
        }
        if !self.trace_acc(trace).used {
            let site = self.site_of(trace);
            let acc = self.trace_acc(trace);
            acc.used = true;
            acc.site = site;
            acc.pid = space.0;
        }
        self.before_change(trace);
        let block = Block { size, trace };
        let heap = self.spaces.entry(space).or_default();
        if heap.alloc(addr, block).is_some() {
            // The older block is never released again: it stays live, as in heaptrack.
            self.anomalies.reused_live_addresses += 1;
        }
        let acc = self.trace_acc(trace);
        acc.allocations += 1;
        acc.allocated = acc.allocated.saturating_add(size);
        acc.live_bytes = acc.live_bytes.saturating_add(size);
        acc.live_count += 1;
        let site = &mut self.sites[self.traces[trace as usize].site as usize];
        site.live = site.live.saturating_add(size);
        site.max = site.max.max(site.live);

        self.totals.allocations += 1;
        self.totals.allocated_bytes = self.totals.allocated_bytes.saturating_add(size);
        self.live = self.live.saturating_add(size);
        if self.live > self.totals.peak_bytes {
            self.totals.peak_bytes = self.live;
            self.totals.peak_time = time;
            self.epoch += 1;
            let epoch = self.epoch;
            let acc = self.trace_acc(trace);
            acc.snap = acc.live_bytes;
            acc.epoch = epoch;
        }
        self.timeline.heap(time, self.live);

        if self.opts.largest > 0 {
            self.seq += 1;
            self.largest
                .push(Reverse((size, Reverse(self.seq), time, space.0, trace)));
            if self.largest.len() > self.opts.largest {
                self.largest.pop();
            }
        }
    }

    fn free(&mut self, space: SpaceKey, addr: u64, time: u64) {
        let Some(freed) = self.spaces.get_mut(&space).and_then(|h| h.free(addr)) else {
            self.anomalies.unknown_frees += 1;
            return;
        };
        let Block { size, trace } = freed.block;
        self.before_change(trace);
        let acc = self.trace_acc(trace);
        acc.live_bytes = acc.live_bytes.saturating_sub(size);
        acc.live_count = acc.live_count.saturating_sub(1);
        if freed.temporary {
            acc.temporary += 1;
        }
        let site = &mut self.sites[self.traces[trace as usize].site as usize];
        site.live = site.live.saturating_sub(size);
        if freed.temporary {
            self.totals.temporary += 1;
        }
        self.live = self.live.saturating_sub(size);
        self.timeline.heap(time, self.live);
    }

    /// Frames of one canonical node, resolving its address on first use.
    fn frames_of(&mut self, t: TraceId) -> &[FrameId] {
        let i = t as usize;
        if i >= self.node_frames.len() {
            self.node_frames.resize(i + 1, None);
        }
        if self.node_frames[i].is_none() {
            let frames = match self.tree.node(t).copied() {
                None => vec![self.table.intern(unknown_stack_frame())],
                Some(n) => {
                    let addr = n.ip.saturating_sub(1);
                    match self.processes.place(n.space, addr) {
                        Some(p) => match self.placed.get(&p) {
                            Some(ids) => ids.clone(),
                            None => {
                                let ids = self
                                    .resolver
                                    .resolve(vec![p], &mut self.table)
                                    .remove(&p)
                                    .unwrap_or_default();
                                self.placed.insert(p, ids.clone());
                                ids
                            }
                        },
                        None => vec![self.table.intern(unmapped_frame(n.ip))],
                    }
                }
            };
            self.node_frames[i] = Some(frames);
        }
        self.node_frames[i].as_deref().unwrap_or(&[])
    }

    /// The first node of a trace that is not `operator new` (heaptrack skips those), if any.
    fn site_node(&mut self, t: TraceId) -> Option<TraceId> {
        let chain: Vec<TraceId> = self.tree.chain(t).map(|(id, _)| id).collect();
        chain.into_iter().find(|&id| {
            let first = self.frames_of(id).first().copied();
            !first.is_some_and(|f| OPERATOR_NEW.contains(&self.table.get(f).function.as_str()))
        })
    }

    fn site_of(&mut self, t: TraceId) -> u32 {
        let frame = match self.site_node(t) {
            Some(id) => match self.frames_of(id).first().copied() {
                Some(f) => f,
                None => self.table.intern(unknown_stack_frame()),
            },
            None => self.table.intern(unknown_stack_frame()),
        };
        if let Some(&s) = self.site_index.get(&frame) {
            return s;
        }
        let s = self.sites.len() as u32;
        self.sites.push(SiteAcc {
            frame,
            live: 0,
            max: 0,
        });
        self.site_index.insert(frame, s);
        s
    }

    /// Resolves every node not symbolized yet, in one parallel batch.
    fn resolve_all(&mut self) {
        let n = self.tree.nodes().len();
        let mut missing: HashSet<Placed> = HashSet::new();
        for t in 1..=n as TraceId {
            if self
                .node_frames
                .get(t as usize)
                .is_some_and(|f| f.is_some())
            {
                continue;
            }
            if let Some(node) = self.tree.node(t) {
                if let Some(p) = self.processes.place(node.space, node.ip.saturating_sub(1)) {
                    if !self.placed.contains_key(&p) {
                        missing.insert(p);
                    }
                }
            }
        }
        let mut missing: Vec<Placed> = missing.into_iter().collect();
        missing.sort_unstable();
        let resolved = self.resolver.resolve(missing, &mut self.table);
        self.placed.extend(resolved);
        for t in 1..=n as TraceId {
            self.frames_of(t);
        }
    }

    fn finish(mut self) -> HeapProfile {
        self.resolve_all();
        let unknown = self.table.intern(unknown_stack_frame());
        let epoch = self.epoch;
        let mut suppressed_patterns: Vec<&str> = Vec::new();
        if self.opts.suppressions {
            suppressed_patterns.extend(BUILTIN_SUPPRESSIONS);
        }

        // Traces that allocated, in a deterministic order (by trace id: first use).
        let mut traces = Vec::new();
        let mut trace_row: HashMap<TraceId, usize> = HashMap::new();
        for (i, acc) in self.traces.iter().enumerate() {
            if !acc.used {
                continue;
            }
            let t = i as TraceId;
            let (frames, suppressed) = self.display_frames(t, &suppressed_patterns, unknown);
            let at_peak = if acc.epoch == epoch {
                acc.snap
            } else {
                acc.live_bytes
            };
            let (leaked_bytes, leaked_allocations) = if suppressed {
                let t = &mut self.totals;
                t.suppressed_leaked_bytes =
                    t.suppressed_leaked_bytes.saturating_add(acc.live_bytes);
                t.suppressed_leaked_allocations += acc.live_count;
                (0, 0)
            } else {
                (acc.live_bytes, acc.live_count)
            };
            self.totals.leaked_bytes = self.totals.leaked_bytes.saturating_add(leaked_bytes);
            self.totals.leaked_allocations += leaked_allocations;
            trace_row.insert(t, traces.len());
            traces.push(TraceRow {
                pid: acc.pid,
                site: acc.site as usize,
                frames,
                counts: HeapCounts {
                    allocations: acc.allocations,
                    temporary: acc.temporary,
                    allocated_bytes: acc.allocated,
                    peak_bytes: 0,
                    at_peak_bytes: at_peak,
                    leaked_bytes,
                    leaked_allocations,
                },
                suppressed,
            });
        }

        // Sites: sums over their traces, own maximum from the stream.
        let mut sites: Vec<SiteRow> = self
            .sites
            .iter()
            .map(|s| SiteRow {
                frame: s.frame,
                counts: HeapCounts {
                    peak_bytes: s.max,
                    ..HeapCounts::default()
                },
                traces: Vec::new(),
            })
            .collect();
        for (i, tr) in traces.iter().enumerate() {
            let s = &mut sites[tr.site];
            s.counts.allocations += tr.counts.allocations;
            s.counts.temporary += tr.counts.temporary;
            s.counts.allocated_bytes = s
                .counts
                .allocated_bytes
                .saturating_add(tr.counts.allocated_bytes);
            s.counts.at_peak_bytes = s
                .counts
                .at_peak_bytes
                .saturating_add(tr.counts.at_peak_bytes);
            s.counts.leaked_bytes = s.counts.leaked_bytes.saturating_add(tr.counts.leaked_bytes);
            s.counts.leaked_allocations += tr.counts.leaked_allocations;
            s.traces.push(i);
        }
        for s in &mut sites {
            s.traces.sort_by(|&a, &b| {
                traces[b]
                    .counts
                    .allocations
                    .cmp(&traces[a].counts.allocations)
                    .then(a.cmp(&b))
            });
        }
        // Sort sites, then renumber the traces' site indices.
        let mut order: Vec<usize> = (0..sites.len()).collect();
        let table = &self.table;
        order.sort_by(|&a, &b| {
            let (x, y) = (&sites[a].counts, &sites[b].counts);
            y.allocations
                .cmp(&x.allocations)
                .then(y.leaked_bytes.cmp(&x.leaked_bytes))
                .then(y.peak_bytes.cmp(&x.peak_bytes))
                .then_with(|| {
                    frame_key(table.get(sites[a].frame)).cmp(&frame_key(table.get(sites[b].frame)))
                })
        });
        let mut new_index = vec![0; sites.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new;
        }
        let mut slots: Vec<Option<SiteRow>> = sites.into_iter().map(Some).collect();
        let sites: Vec<SiteRow> = order.iter().filter_map(|&o| slots[o].take()).collect();
        for tr in &mut traces {
            tr.site = new_index[tr.site];
        }

        let mut largest: Vec<LargeAllocation> = self
            .largest
            .into_sorted_vec()
            .into_iter()
            .filter_map(|Reverse((size, _, time, pid, t))| {
                Some(LargeAllocation {
                    size,
                    time,
                    pid,
                    trace: *trace_row.get(&t)?,
                })
            })
            .collect();
        largest.truncate(self.opts.largest);

        let end_time = self.end_time.unwrap_or(self.last_time);
        let address_spaces = self.spaces.len() as u64;
        let mut anomalies = self.anomalies;
        anomalies.tree = self.tree.anomalies;
        HeapProfile {
            timeline: self.timeline.filled(end_time),
            timeline_start: self.timeline.start,
            timeline_width: self.timeline.width,
            table: self.table,
            totals: self.totals,
            sites,
            traces,
            largest,
            end_time,
            lost_events: self.lost,
            address_spaces,
            anomalies,
        }
    }

    /// The frames shown for a trace (from its site outward, up to a stop function) and whether a
    /// suppression pattern matches anywhere on its full stack.
    fn display_frames(
        &self,
        t: TraceId,
        patterns: &[&str],
        unknown: FrameId,
    ) -> (Vec<FrameId>, bool) {
        let frames_of = |id: TraceId| -> &[FrameId] {
            self.node_frames
                .get(id as usize)
                .and_then(|f| f.as_deref())
                .unwrap_or(&[])
        };
        let chain: Vec<TraceId> = self.tree.chain(t).map(|(id, _)| id).collect();
        let mut suppressed = false;
        for &id in &chain {
            for &f in frames_of(id) {
                let fr = self.table.get(f);
                if patterns.iter().any(|p| {
                    fr.function.contains(p)
                        || fr.module.contains(p)
                        || fr.file.as_deref().is_some_and(|file| file.contains(p))
                }) {
                    suppressed = true;
                }
            }
        }
        let skip = chain
            .iter()
            .position(|&id| {
                !frames_of(id)
                    .first()
                    .is_some_and(|&f| OPERATOR_NEW.contains(&self.table.get(f).function.as_str()))
            })
            .unwrap_or(chain.len());
        let mut out = Vec::new();
        for &id in &chain[skip..] {
            let fs = frames_of(id);
            out.extend_from_slice(fs);
            if fs
                .iter()
                .any(|&f| STOP_FUNCTIONS.contains(&self.table.get(f).function.as_str()))
            {
                break;
            }
        }
        if out.is_empty() {
            out.push(unknown);
        }
        (out, suppressed)
    }
}

fn frame_key(f: &Frame) -> (&str, Option<&str>, Option<u32>, &str) {
    (&f.function, f.file.as_deref(), f.line, &f.module)
}

fn unknown_stack_frame() -> Frame {
    Frame {
        function: UNKNOWN_STACK.into(),
        file: None,
        line: None,
        module: "[unknown]".into(),
        symbolized: false,
    }
}

/// A number read off a site's counts.
pub type Metric = fn(&HeapCounts) -> u64;

/// What a heap flame graph weighs stacks by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeapMetric {
    /// Bytes live at the global peak.
    Peak,
    /// Bytes live at the end (not suppressed).
    Leaked,
    /// Allocation calls.
    Allocations,
    /// Temporary allocations.
    Temporary,
}

impl HeapMetric {
    /// The metric's value in a set of counts.
    pub fn of(self, c: &HeapCounts) -> u64 {
        match self {
            HeapMetric::Peak => c.at_peak_bytes,
            HeapMetric::Leaked => c.leaked_bytes,
            HeapMetric::Allocations => c.allocations,
            HeapMetric::Temporary => c.temporary,
        }
    }

    /// What the values count, for a flame graph's legend.
    pub fn unit(self) -> &'static str {
        match self {
            HeapMetric::Peak | HeapMetric::Leaked => "bytes",
            HeapMetric::Allocations => "allocations",
            HeapMetric::Temporary => "temporary allocations",
        }
    }
}

impl HeapProfile {
    /// Stacks as folded lines (`process;main;...;site value`) weighted by `metric`, stacks with
    /// a zero value left out.
    pub fn folded(&self, processes: &Processes, metric: HeapMetric) -> Vec<String> {
        let mut folded = Folded::default();
        for t in &self.traces {
            let v = metric.of(&t.counts);
            if v == 0 {
                continue;
            }
            let frames = t
                .frames
                .iter()
                .rev()
                .map(|&id| self.table.get(id).function.as_str());
            folded.add(processes.name(t.pid, u64::MAX), frames, v);
        }
        folded.into_lines()
    }

    /// Indices of the sites to show: the union of the `top` sites by each of allocations,
    /// temporary, peak and leaked bytes, in the order of [`HeapProfile::sites`].
    pub fn top_sites(&self, top: usize) -> Vec<usize> {
        let mut keep = vec![false; self.sites.len()];
        let metrics: [Metric; 5] = [
            |c| c.allocations,
            |c| c.temporary,
            |c| c.peak_bytes,
            |c| c.leaked_bytes,
            |c| c.at_peak_bytes,
        ];
        for m in metrics {
            let mut idx: Vec<usize> = (0..self.sites.len())
                .filter(|&i| m(&self.sites[i].counts) > 0)
                .collect();
            idx.sort_by(|&a, &b| {
                m(&self.sites[b].counts)
                    .cmp(&m(&self.sites[a].counts))
                    .then(a.cmp(&b))
            });
            for i in idx.into_iter().take(top) {
                keep[i] = true;
            }
        }
        (0..self.sites.len()).filter(|&i| keep[i]).collect()
    }
}

#[cfg(test)]
#[path = "heap_tests.rs"]
mod tests;
