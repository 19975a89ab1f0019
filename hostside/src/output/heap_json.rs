//! The `heap` section of `report --json`. The first fields of [`HeapJson`] and [`SiteJson`] are
//! the contract in DESIGN.md; everything after them was added and may be relied on as well
//! (fields are only ever added).

use serde::Serialize;

use crate::analysis::heap::sampled::StdErrors;
use crate::analysis::heap::{HeapAnomalies, HeapProfile, TraceRow};
use crate::frames::{Frame, FrameTable};
use crate::output::heap_beyond::{mmap_json, rss_split_json, MmapJson, RssSplitJson};

/// The heap section.
#[derive(Serialize)]
pub struct HeapJson {
    /// Calls to allocation functions (heaptrack_print's "calls to allocation functions").
    pub allocations: u64,
    /// Temporary allocations (heaptrack_print's "temporary memory allocations").
    pub temporary: u64,
    /// Highest live heap bytes ("peak heap memory consumption").
    pub peak_bytes: u64,
    /// Bytes live at the end, built-in suppressions excluded ("total memory leaked").
    pub leaked_bytes: u64,
    /// Blocks live at the end, built-in suppressions excluded.
    pub leaked_allocations: u64,
    /// Sites: the union of the top N by allocations, temporary, peak and leaked bytes, most
    /// allocations first.
    pub sites: Vec<SiteJson>,
    /// Bytes requested over the run.
    pub allocated_bytes: u64,
    /// When the peak was first reached, ns after the recording's start.
    pub peak_time_ns: u64,
    /// Live bytes at the end matched by heaptrack's built-in leak suppressions.
    pub suppressed_leaked_bytes: u64,
    /// Live blocks at the end matched by those suppressions.
    pub suppressed_leaked_allocations: u64,
    /// Highest RSS sampled (summed over processes), 0 when none was recorded.
    pub peak_rss_bytes: u64,
    /// Heap events the board dropped; when not 0 the counts are lower bounds.
    pub lost_events: u64,
    /// Process images that allocated.
    pub address_spaces: u64,
    /// With `--from/--to/--pid/--tid`: frees inside the selection of blocks allocated outside
    /// it, which are not counted (0 without a filter).
    pub frees_outside: u64,
    /// Oddities in the event stream.
    pub anomalies: HeapAnomalies,
    /// The largest single allocations, largest first.
    pub largest: Vec<LargestJson>,
    /// Heap and RSS over time.
    pub timeline: TimelineJson,
    /// Only in a sampled recording (`rec --heap-sample`), where every count and byte figure
    /// above is an estimate: the sampling's mean and the totals' standard errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled: Option<SampledJson>,
    /// The program's own anonymous mappings (memory beyond malloc).
    pub mmap: MmapJson,
    /// RSS by kind of mapping at the ticks `rec` took it (empty in older recordings).
    pub rss_split: Vec<RssSplitJson>,
}

/// How a sampled recording was sampled, and the standard errors of the totals.
#[derive(Serialize)]
pub struct SampledJson {
    /// Mean bytes between sampled allocations (`--heap-sample`).
    pub mean_bytes: u64,
    /// Allocations recorded.
    pub samples: u64,
    /// Standard errors of the totals.
    #[serde(flatten)]
    pub stderr: StderrJson,
}

/// Standard errors of a sampled recording's estimates (Horvitz-Thompson, see the README):
/// the true value lies within two of them of the estimate about 95% of the time. There is
/// none for peaks (a maximum of an estimate).
#[derive(Serialize)]
pub struct StderrJson {
    /// Of `allocations`.
    pub allocations_stderr: f64,
    /// Of `temporary` (itself an upper estimate: see the README).
    pub temporary_stderr: f64,
    /// Of `allocated_bytes`.
    pub allocated_bytes_stderr: f64,
    /// Of `leaked_bytes`.
    pub leaked_bytes_stderr: f64,
    /// Of `leaked_allocations`.
    pub leaked_allocations_stderr: f64,
}

fn stderr_json(e: &StdErrors) -> StderrJson {
    let r = |x: f64| (x * 10.0).round() / 10.0;
    StderrJson {
        allocations_stderr: r(e.allocations),
        temporary_stderr: r(e.temporary),
        allocated_bytes_stderr: r(e.allocated_bytes),
        leaked_bytes_stderr: r(e.leaked_bytes),
        leaked_allocations_stderr: r(e.leaked_allocations),
    }
}

/// One site.
#[derive(Serialize)]
pub struct SiteJson {
    /// Innermost (inlined) function at the call of the allocator, demangled.
    pub function: String,
    /// Its source file.
    pub file: Option<String>,
    /// Line of the call.
    pub line: Option<u32>,
    /// Module path on the board.
    pub module: String,
    /// Allocation calls.
    pub allocations: u64,
    /// Temporary allocations.
    pub temporary: u64,
    /// The site's own maximum of live bytes.
    pub peak_bytes: u64,
    /// Bytes still live at the end.
    pub leaked_bytes: u64,
    /// Blocks still live at the end.
    pub leaked_allocations: u64,
    /// Function names of the site's most frequent stack, from the site out to `main`.
    pub stack: Vec<String>,
    /// Bytes requested.
    pub allocated_bytes: u64,
    /// Live bytes at the moment of the global peak (heaptrack_print's per-site "peak").
    pub at_peak_bytes: u64,
    /// Distinct stacks merged into this site.
    pub traces: usize,
    /// The frames of `stack` with their locations.
    pub frames: Vec<FrameJson>,
    /// For a site no symbol names, which is named `module+0xSTART` by the start of its
    /// function: the module offsets of the allocator calls it groups. Absent otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub call_offsets: Vec<u64>,
    /// In a sampled recording: the standard errors of the estimates above (absent when exact).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<StderrJson>,
}

/// A frame with its location.
#[derive(Serialize)]
pub struct FrameJson {
    /// Function name.
    pub function: String,
    /// Source file.
    pub file: Option<String>,
    /// Source line.
    pub line: Option<u32>,
    /// Module path on the board.
    pub module: String,
}

/// One large allocation.
#[derive(Serialize)]
pub struct LargestJson {
    /// Requested bytes.
    pub size: u64,
    /// When, ns after the recording's start.
    pub time_ns: u64,
    /// Process id.
    pub pid: u32,
    /// Allocating function.
    pub function: String,
    /// Its source file.
    pub file: Option<String>,
    /// Line of the call.
    pub line: Option<u32>,
    /// Module path.
    pub module: String,
    /// Stack from the site out to `main`.
    pub stack: Vec<String>,
}

/// Heap consumption over time, in equal slices.
#[derive(Serialize)]
pub struct TimelineJson {
    /// Start of the first slice, ns after the recording's start.
    pub start_ns: u64,
    /// Width of a slice, ns.
    pub interval_ns: u64,
    /// Highest live heap bytes in each slice.
    pub heap_bytes: Vec<u64>,
    /// Highest RSS in each slice (null before the first sample).
    pub rss_bytes: Vec<Option<u64>>,
}

fn frame_json(f: &Frame) -> FrameJson {
    FrameJson {
        function: f.function.clone(),
        file: f.file.clone(),
        line: f.line,
        module: f.module.clone(),
    }
}

fn stack(table: &FrameTable, t: &TraceRow) -> Vec<String> {
    t.frames
        .iter()
        .map(|&f| table.get(f).function.clone())
        .collect()
}

/// Builds the section; `start` is the recording's start on the board clock.
pub fn heap_json(p: &HeapProfile, top: usize, start: u64) -> HeapJson {
    let t = &p.totals;
    let sites = p
        .top_sites(top)
        .into_iter()
        .map(|i| {
            let s = &p.sites[i];
            let f = p.table.get(s.frame);
            let main = s.traces.first().map(|&i| &p.traces[i]);
            SiteJson {
                function: f.function.clone(),
                file: f.file.clone(),
                line: f.line,
                module: f.module.clone(),
                allocations: s.counts.allocations,
                temporary: s.counts.temporary,
                peak_bytes: s.counts.peak_bytes,
                leaked_bytes: s.counts.leaked_bytes,
                leaked_allocations: s.counts.leaked_allocations,
                stack: main.map(|t| stack(&p.table, t)).unwrap_or_default(),
                allocated_bytes: s.counts.allocated_bytes,
                at_peak_bytes: s.counts.at_peak_bytes,
                traces: s.traces.len(),
                frames: main
                    .map(|t| {
                        t.frames
                            .iter()
                            .map(|&f| frame_json(p.table.get(f)))
                            .collect()
                    })
                    .unwrap_or_default(),
                call_offsets: s.call_offsets.clone(),
                stderr: s.stderr.as_ref().map(stderr_json),
            }
        })
        .collect();
    let largest = p
        .largest
        .iter()
        .map(|l| {
            let tr = &p.traces[l.trace];
            let f = p.table.get(p.sites[tr.site].frame);
            LargestJson {
                size: l.size,
                time_ns: l.time.saturating_sub(start),
                pid: l.pid,
                function: f.function.clone(),
                file: f.file.clone(),
                line: f.line,
                module: f.module.clone(),
                stack: stack(&p.table, tr),
            }
        })
        .collect();
    HeapJson {
        allocations: t.allocations,
        temporary: t.temporary,
        peak_bytes: t.peak_bytes,
        leaked_bytes: t.leaked_bytes,
        leaked_allocations: t.leaked_allocations,
        sites,
        allocated_bytes: t.allocated_bytes,
        peak_time_ns: t.peak_time.saturating_sub(start),
        suppressed_leaked_bytes: t.suppressed_leaked_bytes,
        suppressed_leaked_allocations: t.suppressed_leaked_allocations,
        peak_rss_bytes: t.peak_rss_bytes,
        lost_events: p.lost_events,
        address_spaces: p.address_spaces,
        frees_outside: p.frees_outside,
        anomalies: p.anomalies,
        largest,
        timeline: TimelineJson {
            start_ns: p.timeline_start.saturating_sub(start),
            interval_ns: p.timeline_width,
            heap_bytes: p.timeline.iter().map(|b| b.heap_max.unwrap_or(0)).collect(),
            rss_bytes: p.timeline.iter().map(|b| b.rss_max).collect(),
        },
        sampled: p.sampled.map(|s| SampledJson {
            mean_bytes: s.mean_bytes,
            samples: s.samples,
            stderr: stderr_json(&s.totals),
        }),
        mmap: mmap_json(p, start),
        rss_split: rss_split_json(p, start),
    }
}
