//! `hostside html OLD NEW`: one self-contained page comparing two recordings, with the numbers
//! of `hostside diff OLD NEW --json` (the same [`DiffRow`]s and [`HeapDiff`], not recomputed):
//! per function the old and new self samples and time, the self and total shares and their
//! change, sorted by the size of the change and coloured by its sign, with the rows whose
//! change exceeds the sampling noise marked and the statistic stated under the table; a differential flame graph (the new profile's shape,
//! each frame red where its share grew and blue where it shrank, as Brendan Gregg's
//! difffolded.pl draws them, switchable to the old profile's shape so that vanished paths
//! show); and for heap recordings the per-site changes in allocations, temporary
//! allocations, peak and leaked bytes. `diff.js` renders it, like `report.js` the single view.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use crate::analysis::cpu::CpuProfile;
use crate::analysis::diff::DiffRow;
use crate::analysis::heap::diff::HeapDiff;
use crate::output::context::ReportContext;
use crate::output::html::data::{cpu_tables, warnings, Tables, Warning};

const SCRIPT: &str = include_str!("diff.js");

/// One recording of the comparison: what an output needs, no loader.
pub struct DiffSide<'a> {
    /// The recording file.
    pub file: &'a Path,
    /// Its report context (header, diagnostics, selection).
    pub ctx: &'a ReportContext,
    /// Its CPU profile.
    pub cpu: &'a CpuProfile,
}

/// One side as the page reads it.
#[derive(Serialize)]
struct SideData {
    file: String,
    command: String,
    samples: u64,
    duration_ns: u64,
    filter: String,
    warnings: Vec<Warning>,
    /// Its stacks, for the differential flame graph.
    tables: Tables,
    /// Samples per stack of `tables`.
    weights: Vec<u64>,
}

impl SideData {
    fn of(s: &DiffSide<'_>) -> SideData {
        SideData {
            file: s.file.display().to_string(),
            command: s.ctx.header.command.join(" "),
            samples: s.cpu.samples,
            duration_ns: s.ctx.duration_ns,
            filter: s.ctx.window.describe().unwrap_or_default(),
            warnings: warnings(s.ctx, s.cpu.samples),
            tables: cpu_tables(s.cpu, &HashMap::new()),
            weights: s.cpu.stacks.iter().map(|st| st.count).collect(),
        }
    }
}

/// Everything the page shows.
#[derive(Serialize)]
struct DiffData<'a> {
    title: String,
    old: SideData,
    new: SideData,
    /// Every function of either side, largest change of self share first.
    functions: &'a [DiffRow],
    /// The heap comparison, when either side recorded the heap.
    heap: Option<&'a HeapDiff>,
    /// How rows are marked significant, for the legend.
    statistic: &'static str,
}

/// Writes the comparison page of `old` and `new` (`rows` and `heap` as `hostside diff`
/// computes them) to `out`.
pub fn write(
    old: &DiffSide<'_>,
    new: &DiffSide<'_>,
    rows: &[DiffRow],
    heap: Option<&HeapDiff>,
    out: &mut dyn Write,
) -> Result<()> {
    let d = DiffData {
        title: format!(
            "crossprof diff: {} → {}",
            old.file.display(),
            new.file.display()
        ),
        old: SideData::of(old),
        new: SideData::of(new),
        functions: rows,
        heap,
        statistic: crate::output::diff::CPU_STATISTIC,
    };
    super::page(&d.title, &serde_json::to_string(&d)?, SCRIPT, out)
}
