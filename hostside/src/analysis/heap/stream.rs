//! The streaming half of the heap analysis ([`crate::analysis::heap`]): one pass over the
//! records that applies heaptrack's rules per address space and keeps per-trace and per-site
//! counters, symbolizing each allocation site the first time it allocates. The summing up
//! after the pass is in [`crate::analysis::heap::finish`].

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use crossprof_format::{Alloc, Free, Item, Record};
use rustc_hash::FxHashMap;

use crate::analysis::heap::events::EventLog;
use crate::analysis::heap::mapped::Mappings;
use crate::analysis::heap::rss_split::SplitLog;
use crate::analysis::heap::rules::{Block, SpaceHeap};
use crate::analysis::heap::sampled::{Estimate, Weights};
use crate::analysis::heap::slices::SliceLog;
use crate::analysis::heap::sparse::SparseStacks;
use crate::analysis::heap::timeline::Timeline;
use crate::analysis::heap::trace_tree::{TraceId, TraceTree, EMPTY_TRACE};
use crate::analysis::heap::{
    HeapAnomalies, HeapOptions, HeapTotals, HEAP_CLOCK_SLACK_NS, OPERATOR_NEW, UNKNOWN_STACK,
};
use crate::frames::{Frame, FrameId, FrameTable};
use crate::processes::{Placed, Processes, SpaceKey};
use crate::resolve::{unmapped_frame, Resolver};

#[derive(Default, Clone, Copy)]
pub(super) struct TraceAcc {
    pub(super) used: bool,
    pub(super) pid: u32,
    pub(super) site: u32,
    pub(super) allocations: u64,
    pub(super) temporary: u64,
    pub(super) allocated: u64,
    pub(super) live_bytes: u64,
    pub(super) live_count: u64,
    /// Live bytes at the global peak, valid when `epoch` is the current peak epoch.
    pub(super) snap: u64,
    pub(super) epoch: u64,
    /// Estimates of a sampled recording (untouched otherwise).
    pub(super) est: Estimate,
}

pub(super) struct SiteAcc {
    pub(super) frame: FrameId,
    pub(super) live: u64,
    pub(super) max: u64,
    /// For a site no symbol names: the module offsets of the calls it groups (see
    /// [`SiteRow::call_offsets`](super::profile::SiteRow::call_offsets)).
    pub(super) call_offsets: Vec<u64>,
}

/// The most call offsets kept for one unsymbolized site: enough for any function's calls of
/// the allocator, and a bound on what a hostile recording can make the analysis hold.
const MAX_CALL_OFFSETS: usize = 64;

/// An entry of the largest-allocations heap: size, then earlier sequence numbers first, then
/// time, pid and trace.
pub(super) type Largest = (u64, Reverse<u64>, u64, u32, TraceId);

/// Streaming state of the analysis.
pub(super) struct State<'a> {
    pub(super) processes: &'a Processes,
    pub(super) resolver: &'a Resolver,
    pub(super) opts: HeapOptions,
    pub(super) tree: TraceTree,
    pub(super) table: FrameTable,
    /// Heaps by address space, with an index and the last one used (events come in runs of
    /// one process).
    pub(super) spaces: Vec<SpaceHeap>,
    pub(super) space_index: FxHashMap<SpaceKey, usize>,
    pub(super) last_space: Option<(SpaceKey, usize)>,
    /// The last process an event came from, and its exec times.
    pub(super) last_execs: Option<(u32, &'a [u64])>,
    pub(super) traces: Vec<TraceAcc>,
    /// Frames of each canonical node (index = trace id), resolved on demand.
    pub(super) node_frames: Vec<Option<Vec<FrameId>>>,
    pub(super) placed: HashMap<Placed, Vec<FrameId>>,
    pub(super) sites: Vec<SiteAcc>,
    pub(super) site_index: HashMap<FrameId, u32>,
    pub(super) totals: HeapTotals,
    pub(super) live: u64,
    pub(super) epoch: u64,
    pub(super) timeline: Timeline,
    pub(super) rss: HashMap<u32, u64>,
    /// Min-heap of the largest allocations: (size, earlier first, time, pid, trace).
    pub(super) largest: BinaryHeap<Reverse<Largest>>,
    pub(super) seq: u64,
    pub(super) lost: u64,
    pub(super) end_time: Option<u64>,
    pub(super) last_time: u64,
    pub(super) anomalies: HeapAnomalies,
    /// Frees, inside the window, of blocks allocated outside it (only with a filter).
    pub(super) frees_outside: u64,
    /// Allocations and frees at their times, when [`HeapOptions::events`] asks for them.
    pub(super) log: Option<EventLog>,
    /// Allocations by time slice, when asked for.
    pub(super) slices: Option<SliceLog>,
    /// How recorded allocations are weighed, in a sampled recording (`None`: exact).
    pub(super) weights: Option<Weights>,
    /// The program's own anonymous mappings.
    pub(super) mappings: Mappings,
    /// RSS by kind of mapping over time.
    pub(super) rss_split: SplitLog,
    /// The unwinder of ARMv7's sparse stacks, for a recording of them.
    pub(super) sparse: Option<SparseStacks<'a>>,
}

impl<'a> State<'a> {
    /// An empty analysis of a recording that started at `start` (board clock).
    pub(super) fn new(
        processes: &'a Processes,
        resolver: &'a Resolver,
        start: u64,
        opts: HeapOptions,
    ) -> Self {
        State {
            processes,
            resolver,
            opts,
            tree: TraceTree::default(),
            table: FrameTable::default(),
            spaces: Vec::new(),
            space_index: FxHashMap::default(),
            last_space: None,
            last_execs: None,
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
            frees_outside: 0,
            log: EventLog::new(opts.events),
            slices: opts.slices.map(SliceLog::new),
            weights: Weights::of(opts.sample_mean),
            mappings: Mappings::new(opts.page_size),
            rss_split: SplitLog::default(),
            sparse: SparseStacks::of(processes, resolver, opts.sparse_arm),
        }
    }
}

impl State<'_> {
    /// Counts one item of the stream.
    pub(super) fn item(&mut self, item: Item) {
        match item {
            Item::Alloc(a) => self.alloc_event(&a, false),
            Item::Carried(a) => self.alloc_event(&a, true),
            Item::Free(f) => self.free_event(&f),
            Item::CarryStart { pid, time } => self.carry_start(pid, time),
            Item::Other(r) => self.record(*r),
        }
    }

    /// A segment's carried live set of `pid` starts: the blocks held for the process were
    /// carried into it (or lost at the boundary, see `rec`'s `Lost` records), so they are
    /// dropped without counting a free; the carried blocks that follow take their place.
    fn carry_start(&mut self, pid: u32, time: u64) {
        if !self.opts.window.keeps_process(time, pid) {
            return;
        }
        let space = self.space(pid, time);
        let Some(blocks) = self.existing_heap(space).map(|h| h.take_live()) else {
            return;
        };
        for Block { size, trace } in blocks {
            self.before_change(trace);
            let acc = self.trace_acc(trace);
            acc.live_bytes = acc.live_bytes.saturating_sub(size);
            acc.live_count = acc.live_count.saturating_sub(1);
            let site = &mut self.sites[self.traces[trace as usize].site as usize];
            site.live = site.live.saturating_sub(size);
            self.live = self.live.saturating_sub(size);
        }
    }

    /// An allocation, or with `carried` a block live since before this segment (live, but
    /// not counted as an allocation).
    fn alloc_event(&mut self, a: &Alloc, carried: bool) {
        self.last_time = self.last_time.max(a.time);
        if !self.opts.window.keeps(a.time, a.pid, a.tid) {
            return;
        }
        if a.addr == 0 {
            self.anomalies.null_allocations += 1;
            return;
        }
        let space = self.space(a.pid, a.time);
        let trace = self.trace(space, a.stack);
        self.alloc(space, a.addr, a.size, trace, a.time, carried);
        if carried {
            self.totals.carried_blocks += 1;
            return;
        }
        if let Some(cells) = &mut self.slices {
            cells.alloc(space, a.addr, (a.size, trace), a.time, a.tid);
        }
    }

    fn free_event(&mut self, f: &Free) {
        self.last_time = self.last_time.max(f.time);
        // Any thread may free a selected allocation: only the time and process matter here.
        if !self.opts.window.keeps_process(f.time, f.pid) {
            return;
        }
        if f.addr == 0 {
            return;
        }
        let space = self.space(f.pid, f.time);
        self.free(space, f.addr, f.time);
    }

    /// Whether [`State::record`] reads `r` though it is no heap event or trace-tree node.
    pub(super) fn reads_metadata(r: &Record) -> bool {
        match r {
            Record::Rss(_) | Record::End(_) | Record::AnonMap(_) | Record::RssSplit(_) => true,
            Record::Exit(t) => t.pid == t.tid,
            Record::Lost(l) => l.kind == "heap",
            _ => false,
        }
    }

    /// Counts one record of the stream.
    pub(super) fn record(&mut self, r: Record) {
        match r {
            Record::StackNode(n) => self.tree.add_node(&n),
            Record::Alloc(a) => self.alloc_event(&a, false),
            Record::Free(f) => self.free_event(&f),
            // RSS belongs to a process: a thread filter keeps its process's.
            Record::Rss(r) if self.opts.window.keeps_process(r.time, r.pid) => {
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
            Record::AnonMap(m) => self.anon_map(&m),
            Record::RssSplit(r) if self.opts.window.keeps_process(r.time, r.pid) => {
                self.rss_split.push(r)
            }
            _ => {}
        }
    }

    /// One of the program's `mmap`, `munmap` or `mremap` calls ([`Mappings`]): a map counts
    /// when the selection keeps its thread, an unmap when it keeps its process.
    fn anon_map(&mut self, m: &crossprof_format::AnonMap) {
        use crossprof_format::MapOp;
        let keeps = match m.op {
            MapOp::Unmap => self.opts.window.keeps_process(m.time, m.pid),
            _ => self.opts.window.keeps(m.time, m.pid, m.tid),
        };
        if !keeps {
            return;
        }
        let space = self.space(m.pid, m.time);
        let stack = (space, m.stack);
        match m.op {
            MapOp::Map => self.mappings.map(space, m.addr, m.len, stack, m.time),
            MapOp::Unmap => {
                self.mappings.unmap(space, m.addr, m.len, m.time);
            }
            MapOp::Remap => {
                let (old, old_len) = (m.old_addr, m.old_len);
                self.mappings
                    .remap(space, old, old_len, m.addr, m.len, stack, m.time)
            }
            MapOp::Unknown(_) => {}
        }
    }

    /// The address space (process image) a heap event of `pid` stamped `time` belongs to.
    fn space(&mut self, pid: u32, time: u64) -> SpaceKey {
        // Events come in runs of one process: its exec times are looked up once per run.
        let execs = match self.last_execs {
            Some((p, execs)) if p == pid => execs,
            _ => {
                let execs = self.processes.exec_times(pid);
                self.last_execs = Some((pid, execs));
                execs
            }
        };
        let t = time.saturating_add(HEAP_CLOCK_SLACK_NS);
        (pid, execs.partition_point(|&e| e <= t) as u32)
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

    /// The bytes a recorded block of `size` bytes stands for: itself, unless sampled.
    fn weighed(&self, size: u64) -> u64 {
        self.weights.map_or(size, |w| w.bytes(size))
    }

    fn alloc(
        &mut self,
        space: SpaceKey,
        addr: u64,
        real: u64,
        trace: TraceId,
        time: u64,
        carried: bool,
    ) {
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
        let block = Block { size: real, trace };
        let size = self.weighed(real);
        let heap = self.heap_of(space);
        let replaced = if carried {
            heap.carry(addr, block)
        } else {
            heap.alloc(addr, block)
        };
        if replaced.is_some() {
            // The older block is never released again: it stays live, as in heaptrack.
            self.anomalies.reused_live_addresses += 1;
        }
        if let (Some(log), false) = (&mut self.log, carried) {
            log.alloc(space, addr, size, trace, time);
        }
        let weights = self.weights;
        let acc = self.trace_acc(trace);
        if !carried {
            if let Some(w) = &weights {
                acc.est.alloc(w, real);
            }
            acc.allocations += 1;
            acc.allocated = acc.allocated.saturating_add(size);
        }
        acc.live_bytes = acc.live_bytes.saturating_add(size);
        acc.live_count += 1;
        let site = &mut self.sites[self.traces[trace as usize].site as usize];
        site.live = site.live.saturating_add(size);
        site.max = site.max.max(site.live);

        if !carried {
            self.totals.allocations += 1;
            self.totals.allocated_bytes = self.totals.allocated_bytes.saturating_add(size);
        }
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

        if self.opts.largest > 0 && !carried {
            self.seq += 1;
            // Most allocations are smaller than the smallest kept: skip the heap for them.
            let full = self.largest.len() >= self.opts.largest;
            if !full || self.largest.peek().is_some_and(|m| real > m.0 .0) {
                self.largest
                    .push(Reverse((real, Reverse(self.seq), time, space.0, trace)));
                if full {
                    self.largest.pop();
                }
            }
        }
    }

    /// The heap of `space`, created on first use.
    fn heap_of(&mut self, space: SpaceKey) -> &mut SpaceHeap {
        let i = match self.last_space {
            Some((k, i)) if k == space => i,
            _ => {
                let next = self.spaces.len();
                let i = *self.space_index.entry(space).or_insert(next);
                if i == next {
                    self.spaces.push(SpaceHeap::default());
                }
                self.last_space = Some((space, i));
                i
            }
        };
        &mut self.spaces[i]
    }

    /// The heap of `space` if it allocated.
    fn existing_heap(&mut self, space: SpaceKey) -> Option<&mut SpaceHeap> {
        let i = match self.last_space {
            Some((k, i)) if k == space => i,
            _ => {
                let i = *self.space_index.get(&space)?;
                self.last_space = Some((space, i));
                i
            }
        };
        self.spaces.get_mut(i)
    }

    fn free(&mut self, space: SpaceKey, addr: u64, time: u64) {
        let Some(freed) = self.existing_heap(space).and_then(|h| h.free(addr)) else {
            if self.opts.window.is_active() {
                self.frees_outside += 1;
            } else {
                self.anomalies.unknown_frees += 1;
            }
            return;
        };
        let Block { size: real, trace } = freed.block;
        let size = self.weighed(real);
        if let Some(log) = &mut self.log {
            log.free(space, addr, time);
        }
        if let Some(cells) = &mut self.slices {
            cells.free(space, addr, (real, trace), time, freed.temporary);
        }
        self.before_change(trace);
        let weights = self.weights;
        let acc = self.trace_acc(trace);
        if let Some(w) = &weights {
            acc.est.free(w, real, freed.temporary);
        }
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
        let node = self.site_node(t);
        let frame = match node {
            Some(id) => match self.frames_of(id).first().copied() {
                Some(f) => f,
                None => self.table.intern(unknown_stack_frame()),
            },
            None => self.table.intern(unknown_stack_frame()),
        };
        let s = match self.site_index.get(&frame) {
            Some(&s) => s,
            None => {
                let s = self.sites.len() as u32;
                self.sites.push(SiteAcc {
                    frame,
                    live: 0,
                    max: 0,
                    call_offsets: Vec::new(),
                });
                self.site_index.insert(frame, s);
                s
            }
        };
        if !self.table.get(frame).symbolized {
            if let Some(offset) = node.and_then(|id| self.call_offset(id)) {
                let offsets = &mut self.sites[s as usize].call_offsets;
                if !offsets.contains(&offset) && offsets.len() < MAX_CALL_OFFSETS {
                    offsets.push(offset);
                }
            }
        }
        s
    }

    /// The module offset of a node's call instruction, when its address lies in a module.
    fn call_offset(&self, t: TraceId) -> Option<u64> {
        let n = self.tree.node(t)?;
        let p = self.processes.place(n.space, n.ip.saturating_sub(1))?;
        Some(p.file_offset)
    }

    /// Resolves every node not symbolized yet, in one parallel batch.
    pub(super) fn resolve_all(&mut self) {
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
}

/// The frame of allocations whose stack is unknown.
pub(super) fn unknown_stack_frame() -> Frame {
    Frame {
        function: UNKNOWN_STACK.into(),
        file: None,
        line: None,
        module: "[unknown]".into(),
        symbolized: false,
    }
}
