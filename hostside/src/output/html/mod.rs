//! `hostside html`: one self-contained interactive report (no network: the data, the script
//! and the style sheet are inside the file), for people who want hotspot's or heaptrack_gui's
//! views without installing a GUI on the machine that has the recording.
//!
//! The page shows a summary with the analysis' warnings, a per-thread timeline whose drag
//! selection filters every other view, a sortable function table, caller/callee lists with
//! file:line for the selected function, top-down and bottom-up trees, a flame graph with search
//! and zoom, and for heap recordings the heap over time, the sites by cost type and a flame
//! graph per cost type, and for off-CPU recordings when each thread ran and waited (on the
//! timeline, from the context switches) and where it waited (table and flame graph, of the
//! waits cut to the selection). Under a timeline selection (time range, thread) the heap
//! views count the allocations made in it, those freed in it that heaptrack counts temporary,
//! and the bytes still live at its end (from the heap analysis' allocation cells on the page's
//! slices); the peak of a selection, and one thread's temporary allocations (which depend on
//! the other threads'), are not known in the page (`hostside html --from/--to/--tid` computes
//! them).
//! The Rust side only gathers the data ([`data`]) from the
//! profiles and the [`ReportContext`], never the loader; `report.js` computes every view from
//! it in the browser, so a selection needs no round trip. `common.js` is what both pages
//! (this one and the comparison) start with.
//!
//! `hostside html OLD NEW` writes the comparison page instead ([`diff`]).
//!
//! Size: samples are stored per (time slice, stack) with a count, the timeline cut in at most
//! [`data::TIME_SLICES`] slices, so the file grows with the number of distinct stacks, not with
//! the recording's length.

use std::io::Write;

use anyhow::Result;

use crate::analysis::cpu::CpuProfile;
use crate::analysis::heap::slices::SliceGrid;
use crate::analysis::heap::HeapProfile;
use crate::analysis::off_cpu_profile::OffCpuProfile;
use crate::analysis::thread_timeline::{Grid, ThreadTimeline};
use crate::output::context::ReportContext;

pub mod data;
pub mod diff;

/// What both pages start with: reading the data block, building elements, formatting.
const COMMON: &str = include_str!("common.js");
const SCRIPT: &str = include_str!("report.js");
const STYLE: &str = include_str!("report.css");

/// The profiles one page shows, each made by its analysis before the page is written.
pub struct Profiles<'a> {
    /// The CPU profile (empty for a heap-only recording).
    pub cpu: &'a CpuProfile,
    /// The heap analysis, for `rec --heap` recordings.
    pub heap: Option<&'a HeapProfile>,
    /// Where threads waited, for `rec --off-cpu` recordings.
    pub off_cpu: Option<&'a OffCpuProfile>,
    /// When each thread ran and waited, on the slices of [`grid`].
    pub threads: Option<&'a ThreadTimeline>,
}

/// The page's time slices for a recording that started at `start` (board clock) and lasted
/// `duration_ns`: at most [`data::TIME_SLICES`] from its start to its end. A thread timeline
/// (see [`crate::analysis::thread_timeline::build_on`]) and the heap's allocation cells (see
/// [`heap_slices`]) built on them add up exactly over any selection.
pub fn grid(start: u64, duration_ns: u64) -> Grid {
    let slice_ns = data::slice_ns(duration_ns);
    let columns = duration_ns.div_ceil(slice_ns).max(1);
    Grid {
        start,
        slice_ns,
        columns: columns as usize,
        lo: start,
        hi: start.saturating_add(columns.saturating_mul(slice_ns)),
    }
}

/// The heap analysis' time slices for the page of `grid`.
pub fn heap_slices(grid: &Grid) -> SliceGrid {
    SliceGrid {
        start: grid.start,
        slice_ns: grid.slice_ns,
        count: grid.columns.min(data::TIME_SLICES as usize) as u32,
    }
}

/// Writes the report of `profiles` to `out`; `ctx` says what the recording is.
pub fn write(ctx: &ReportContext, profiles: &Profiles<'_>, out: &mut dyn Write) -> Result<()> {
    let d = data::gather(ctx, profiles);
    page(&d.title, &serde_json::to_string(&d)?, SCRIPT, out)
}

/// Writes one page: `json` as the data block, the shared script and `script` after it, the
/// shared style sheet.
fn page(title: &str, json: &str, script: &str, out: &mut dyn Write) -> Result<()> {
    // Inside a <script> element, "</" would end it: JSON allows "<\/" instead.
    let json = json.replace("</", "<\\/");
    let title = html_escape(title);
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>{title}</title><style>{STYLE}</style></head>\n<body>\
         <div id=\"app\"><p id=\"loading\">Loading…</p></div>\n\
         <script id=\"crossprof-data\" type=\"application/json\">{json}</script>\n\
         <script>{COMMON}\n{script}</script></body></html>\n"
    )?;
    out.flush()?;
    Ok(())
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
