//! `hostside html`: one self-contained interactive report (no network: the data, the script
//! and the style sheet are inside the file), for people who want hotspot's or heaptrack_gui's
//! views without installing a GUI on the machine that has the recording.
//!
//! The page shows a summary with the analysis' warnings, a per-thread timeline whose drag
//! selection filters every other view, a sortable function table, caller/callee lists with
//! file:line for the selected function, top-down and bottom-up trees, a flame graph with search
//! and zoom, and for heap recordings the heap over time, the sites by cost type and a flame
//! graph per cost type, and for off-CPU recordings where threads waited (table and flame graph). The Rust side only gathers the data ([`data`]); `report.js` computes
//! every view from it in the browser, so a time selection needs no round trip.
//!
//! `hostside html OLD NEW` writes the comparison page instead ([`diff`]).
//!
//! Size: samples are stored per (time slice, stack) with a count, the timeline cut in at most
//! [`data::TIME_SLICES`] slices, so the file grows with the number of distinct stacks, not with
//! the recording's length.

use std::io::Write;

use anyhow::Result;

use crate::analysis::heap::HeapProfile;
use crate::analysis::off_cpu_profile::OffCpuProfile;
use crate::pipeline::Loaded;

pub mod data;
pub mod diff;

const SCRIPT: &str = include_str!("report.js");
const STYLE: &str = include_str!("report.css");

/// Writes the report of `l` (and of its heap and off-CPU analyses, when given) to `out`.
pub fn write(
    l: &Loaded,
    heap: Option<&HeapProfile>,
    off_cpu: Option<&OffCpuProfile>,
    out: &mut dyn Write,
) -> Result<()> {
    let d = data::gather(l, heap, off_cpu);
    page(&d.title, &serde_json::to_string(&d)?, SCRIPT, out)
}

/// Writes one page: `json` as the data block, `script` after it, the shared style sheet.
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
         <script>{script}</script></body></html>\n"
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
