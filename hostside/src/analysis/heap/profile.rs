//! What the heap analysis produces: totals, sites, distinct stacks, the largest allocations and
//! the timeline, and the metrics reports and flame graphs weigh them by.

use crossprof_heap_wire::cut_short;

use crate::analysis::cpu::StackAddress;
use crate::analysis::heap::events::HeapEvents;
use crate::analysis::heap::mapped::{MappingCounts, MappingTotals};
use crate::analysis::heap::sampled::{Sampled, StdErrors};
use crate::analysis::heap::timeline::Bucket;
use crate::analysis::heap::trace_tree::TreeAnomalies;
use crate::frames::{FrameId, FrameTable};
use crate::processes::SpaceKey;

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
    /// Blocks a `rec --max-size` segment carried in as live (allocated in an earlier
    /// segment): counted live, never as allocations; several per block when read across
    /// segments.
    pub carried_blocks: u64,
}

/// The mappings one stack made (see [`crate::analysis::heap::mapped`]).
#[derive(Debug, Clone)]
pub struct MappingRow {
    /// Process id.
    pub pid: u32,
    /// Frames from the caller of `mmap` outward, innermost first (inlined frames included).
    pub frames: Vec<FrameId>,
    /// Its counts.
    pub counts: MappingCounts,
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
    /// The return addresses behind `frames`, in the same order, each with how many of the
    /// frames it became (as a CPU [`crate::analysis::cpu::Stack`] has them), in
    /// [`TraceRow::space`]: exports that carry addresses (pprof locations) need them. Empty
    /// when the stack is unknown.
    pub addresses: Vec<StackAddress>,
    /// The address space (process image) the addresses belong to.
    pub space: SpaceKey,
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
    /// For a site no symbol names (it is named by its function's start): the module offsets
    /// of the allocator calls it groups, sorted, so that a site can still be told apart from
    /// the other calls of its function and matched with a tool that lists addresses.
    pub call_offsets: Vec<u64>,
    /// In a sampled recording: the standard errors of `counts` (see [`crate::analysis::heap::sampled`]).
    pub stderr: Option<StdErrors>,
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
    /// Allocations whose stack the interposer's unwinder cut short, by the reason it
    /// recorded.
    pub cut_short_allocations: HeapCutShort,
}

/// Allocations whose stack stopped before its outermost frame, by the reason the interposer
/// recorded with the stack (a `crossprof_heap_wire::cut_short` marker; the JSON keys are the
/// markers' names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct HeapCutShort {
    /// More frames than the interposer keeps (`crossprof_heap_wire::MAX_FRAMES`); in a
    /// recording older than the reasons, every stack that reached that many frames.
    pub too_deep: u64,
    /// The unwinder never reached the allocation site (code without unwind tables): the stack
    /// is the site alone.
    pub no_unwind_info: u64,
    /// An unwind rule led nowhere.
    pub bad_frame: u64,
    /// A rule asked for a word outside the thread's stack.
    pub stack_unreadable: u64,
}

impl HeapCutShort {
    /// Counts `allocations` under the reason `marker` stands for (a `cut_short` marker; any
    /// other value counts nowhere).
    pub fn add(&mut self, marker: u64, allocations: u64) {
        let slot = match marker {
            cut_short::TOO_DEEP => &mut self.too_deep,
            cut_short::NO_UNWIND_INFO => &mut self.no_unwind_info,
            cut_short::BAD_FRAME => &mut self.bad_frame,
            cut_short::STACK_UNREADABLE => &mut self.stack_unreadable,
            _ => return,
        };
        *slot += allocations;
    }

    /// Every reason's marker with its count, in a fixed order.
    pub fn by_reason(&self) -> [(u64, u64); 4] {
        [
            (cut_short::TOO_DEEP, self.too_deep),
            (cut_short::NO_UNWIND_INFO, self.no_unwind_info),
            (cut_short::BAD_FRAME, self.bad_frame),
            (cut_short::STACK_UNREADABLE, self.stack_unreadable),
        ]
    }

    /// All of them.
    pub fn total(&self) -> u64 {
        self.by_reason().iter().map(|(_, n)| n).sum()
    }
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
    /// The allocations by time slice, when [`crate::analysis::heap::HeapOptions::slices`]
    /// asked for them (empty otherwise).
    pub slices: Vec<crate::analysis::heap::slices::SliceCell>,
    /// Board time of the last event (the End record when there is one).
    pub end_time: u64,
    /// Heap events the board reported as dropped (`Lost { kind: "heap" }`).
    pub lost_events: u64,
    /// Address spaces (process images) that allocated.
    pub address_spaces: u64,
    /// What looked wrong.
    pub anomalies: HeapAnomalies,
    /// With a time or thread filter: frees inside the selection of blocks allocated outside
    /// it (before the window, or by another process or thread), which are not counted.
    pub frees_outside: u64,
    /// Allocations and frees at their times, when the analysis was asked for them
    /// ([`crate::analysis::heap::HeapOptions::events`]).
    pub events: Option<HeapEvents>,
    /// The program's own anonymous mappings by stack ([`crate::analysis::heap::mapped`]), in
    /// the order of their first mapping.
    pub mappings: Vec<MappingRow>,
    /// Their totals.
    pub mapping_totals: MappingTotals,
    /// RSS by kind of mapping at the ticks `rec` took it, in time order (thinned on long runs,
    /// see [`crate::analysis::heap::rss_split`]).
    pub rss_split: Vec<crossprof_format::RssSplit>,
    /// Set when the recording was sampled (`rec --heap-sample`): every count and byte
    /// figure is then an estimate ([`crate::analysis::heap::sampled`]).
    pub sampled: Option<Sampled>,
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
