//! Heap profile: every allocation and free of a `rec --heap` recording, counted with heaptrack's
//! definitions and attributed to symbolized sites.
//!
//! One streaming pass ([`crate::analysis::heap_stream`], while another thread decodes the file),
//! then the summing up ([`crate::analysis::heap_finish`]). Allocation stacks are canonicalized
//! by [`crate::analysis::trace_tree::TraceTree`]; per address space,
//! [`crate::analysis::heap_rules::SpaceHeap`] applies heaptrack's rules (which free releases what, which allocation is
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
//! Memory: about 4 bytes per live block ([`crate::analysis::heap_live`]), one small record per
//! distinct (size, stack) pair, stack node and site; nothing grows with the number of events.
//! Symbolization is limited to the sites (as they first allocate) and, at the end, the frames
//! of the stacks that allocated.

use crate::analysis::heap_stream::State;
use crate::analysis::heap_timeline::Bucket;
use crate::analysis::trace_tree::TreeAnomalies;
use crate::folded::Folded;
use crate::frames::{FrameId, FrameTable};
use crate::processes::Processes;
use crate::recording::{Pass, Recording};
use crate::resolve::Resolver;

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

/// Streams the heap events of a recording and builds the profile. `start` is the recording's
/// start on the board clock (the header's `start_clock_ns`).
pub fn analyze(
    records: Pass<'_>,
    processes: &Processes,
    resolver: &Resolver,
    start: u64,
    opts: HeapOptions,
) -> HeapProfile {
    let mut st = State::new(processes, resolver, start, opts);
    records(&mut |r| st.record(r));
    st.finish()
}

/// [`analyze`] on a whole recording, decoded on another thread while this one counts.
pub fn analyze_recording(
    recording: &Recording,
    processes: &Processes,
    resolver: &Resolver,
    opts: HeapOptions,
) -> HeapProfile {
    let mut st = State::new(processes, resolver, recording.header().start_clock_ns, opts);
    recording.for_each_item_in_background(|item| st.item(item));
    st.finish()
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
