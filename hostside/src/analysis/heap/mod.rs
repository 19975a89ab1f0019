//! Heap profile: every allocation and free of a `rec --heap` recording, counted with heaptrack's
//! definitions and attributed to symbolized sites.
//!
//! One streaming pass ([`stream`], while another thread decodes the file),
//! then the summing up ([`finish`]). Allocation stacks are canonicalized
//! by [`trace_tree::TraceTree`]; per address space,
//! [`rules::SpaceHeap`] applies heaptrack's rules (which free releases what, which allocation is
//! temporary). Counts are kept per canonical stack ("trace") and per *site*, the location that
//! called the allocator: the innermost frame of the first stack entry that is not one of the
//! `operator new` overloads heaptrack skips. A trace's site is symbolized the first time it
//! allocates (a handful of addresses per distinct stack), so per-site peaks can be tracked while
//! streaming; the remaining frames are resolved at the end, in parallel.
//!
//! Definitions (see DESIGN.md, and [`rules`] for the counting rules):
//! - `peak_bytes` of the whole heap is the maximum of live bytes, summed over processes, reached
//!   first at `peak_time`; a site's `peak_bytes` is the maximum of its own live bytes, and its
//!   `at_peak_bytes` what it held at the moment of the global peak (heaptrack_print's per-site
//!   "peak"; these add up to the global peak).
//! - `leaked` is what was still live at the end, minus allocations whose stack matches one of
//!   heaptrack's built-in leak suppressions (reported as `suppressed`).
//!
//! Memory: about 4 bytes per live block ([`live`]), one small record per
//! distinct (size, stack) pair, stack node and site; nothing grows with the number of events.
//! Symbolization is limited to the sites (as they first allocate) and, at the end, the frames
//! of the stacks that allocated.
//!
//! The parts, in the order data flows through them: [`stream`] (the pass over the events),
//! [`trace_tree`] (canonical stacks), [`rules`] and [`live`] (heaptrack's counting rules over
//! the live blocks of one address space), [`timeline`] (heap and RSS over time), [`slices`] (allocations by time slice, on request), [`finish`]
//! (sites, traces and totals) into a [`HeapProfile`] ([`profile`]); [`diff`] compares two.
//! Memory beyond malloc: [`mapped`] counts the program's own anonymous mappings by stack, and
//! [`rss_split`] keeps RSS by kind of mapping over time.
//! On request, [`events`] logs allocations and frees at their times (bounded, sampled by a
//! stated rule) for the exports that show each one.

pub mod diff;
pub mod events;
pub mod finish;
pub mod live;
pub mod mapped;
pub mod profile;
pub mod rss_split;
pub mod rules;
pub mod sampled;
pub mod slices;
pub mod sparse;
pub mod stream;
pub mod timeline;
pub mod trace_tree;

pub use events::{EventSampling, HeapEvent, HeapEvents};
pub use profile::{
    HeapAnomalies, HeapCounts, HeapCutShort, HeapMetric, HeapProfile, HeapTotals, LargeAllocation,
    MappingRow, Metric, SiteRow, TraceRow,
};

use crossprof_format::{Item, Record};

use crate::analysis::heap::stream::State;
use crate::filter::Window;
use crate::processes::Processes;
use crate::recording::Pass;
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
    /// Only allocations inside this window, of its process and thread, count; frees inside
    /// it release them (see [`crate::filter`] for the rules).
    pub window: Window,
    /// Which allocations to log with their times for [`HeapProfile::events`] (none by
    /// default; see [`events`]).
    pub events: EventSampling,
    /// Also cut the allocations in these time slices ([`HeapProfile::slices`]), for views
    /// that select a time range afterwards.
    pub slices: Option<slices::SliceGrid>,
    /// The recording's `heap_sample_bytes` (0: exact): a sampled recording's counts are
    /// estimates ([`sampled`]).
    pub sample_mean: u64,
    /// The board's page size, which mappings are rounded to ([`mapped`]).
    pub page_size: u64,
    /// The recording's heap stacks are ARMv7 registers and stack words to unwind here
    /// ([`sparse`]; the header's `heap_stacks`), in this byte order (`Some(big_endian)`);
    /// `None`: return addresses.
    pub sparse_arm: Option<bool>,
}

impl Default for HeapOptions {
    fn default() -> Self {
        HeapOptions {
            largest: 20,
            suppressions: true,
            window: Window::default(),
            events: EventSampling::OFF,
            slices: None,
            sample_mean: 0,
            page_size: 4096,
            sparse_arm: None,
        }
    }
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

/// The heap analysis while the pass over the recording runs: the pass hands it every item
/// that is not a sample ([`HeapBuilder::item`]), then takes the profile
/// ([`HeapBuilder::finish`]).
pub struct HeapBuilder<'a>(State<'a>);

impl<'a> HeapBuilder<'a> {
    /// Empty, for a recording that started at `start` on the board clock (the header's
    /// `start_clock_ns`).
    pub fn new(
        processes: &'a Processes,
        resolver: &'a Resolver,
        start: u64,
        opts: HeapOptions,
    ) -> HeapBuilder<'a> {
        HeapBuilder(State::new(processes, resolver, start, opts))
    }

    /// Counts one heap event or record.
    pub fn item(&mut self, item: Item) {
        self.0.item(item)
    }

    /// Whether the analysis reads `r`, a record of the recording's metadata (a process's
    /// RSS, its end, heap events lost, the recording's end). The pass over the bulk records
    /// does not see these: the metadata pass keeps them, and they are handed to
    /// [`HeapBuilder::item`] before the heap events. They count the same there as among the
    /// events: each is placed by its own time, and in their own order.
    pub fn reads_metadata(r: &Record) -> bool {
        State::reads_metadata(r)
    }

    /// The profile, once the pass is over.
    pub fn finish(self) -> HeapProfile {
        self.0.finish()
    }
}

#[cfg(test)]
mod tests;
