//! `hostside diff`: the CPU comparison as text or JSON, and the heap comparison's JSON (its
//! table lives with the heap report in [`crate::output::heap_text`]). Each row shows the
//! absolute cost beside the shares and whether its change exceeds the sampling noise; the
//! legend names the statistic; a side with few samples carries the `few-samples` warning.

use std::io::{self, Write};
use std::path::Path;

use crate::analysis::diff::DiffRow;
use crate::analysis::heap::diff::HeapDiff;
use crate::filter::Window;
use crate::output::heap_text;
use crate::output::html::data::{few_samples, Warning};
use crate::output::json::FilterJson;

/// How CPU rows are marked, as the text legend, the JSON's `statistic` and the HTML page
/// state it.
pub const CPU_STATISTIC: &str = "a row is significant when its self samples changed beyond \
    sampling noise both in absolute cost (samples at each side's samples per ns) and as a \
    share of its recording: exact conditional binomial tests (Poisson counts), the larger \
    p-value of the two, Benjamini-Hochberg at a 1% false-discovery rate across all rows, and \
    only when the change is at least 3% of the longer recording's cost; samples are treated \
    as independent, so compare recordings of the same work or of like \
    windows";

/// One side of a diff: the file, its CPU sample count and the part of it compared.
pub struct Side<'a> {
    /// The recording.
    pub file: &'a Path,
    /// Its CPU samples (inside the window).
    pub samples: u64,
    /// The samples' periods summed, nanoseconds, when the event counts time.
    pub cost_ns: Option<u64>,
    /// The time window, process and thread compared (`--from/--to/--pid/--tid`).
    pub window: &'a Window,
}

/// The `diff --json` document: both sides, the `top` functions by change and the heap diff.
pub fn json(
    old: &Side<'_>,
    new: &Side<'_>,
    rows: &[DiffRow],
    heap: Option<&HeapDiff>,
    top: usize,
) -> serde_json::Value {
    let heap = heap.map(|h| {
        let mut h = h.clone();
        h.sites.truncate(top);
        h
    });
    serde_json::json!({
        "old": side(old),
        "new": side(new),
        "statistic": CPU_STATISTIC,
        "functions": rows.iter().take(top).collect::<Vec<_>>(),
        "heap": heap,
    })
}

/// A side's object: `file`, `samples`, `cost_ns`, `filter` (as `report --json` has it under
/// `recording.filter`, null without a filter) and `warnings` (`few-samples`).
fn side(s: &Side<'_>) -> serde_json::Value {
    serde_json::json!({
        "file": s.file.display().to_string(),
        "samples": s.samples,
        "cost_ns": s.cost_ns,
        "filter": FilterJson::of(s.window),
        "warnings": few_samples(s.samples).into_iter().collect::<Vec<Warning>>(),
    })
}

/// The `hostside diff` text: the CPU comparison when `with_cpu`, then the heap comparison
/// when there is one.
pub fn text(
    out: &mut dyn Write,
    old: &Side<'_>,
    new: &Side<'_>,
    rows: &[DiffRow],
    heap: Option<&HeapDiff>,
    with_cpu: bool,
    top: usize,
) -> io::Result<()> {
    if with_cpu {
        cpu_text(out, old, new, rows, top)?;
    }
    if let Some(h) = heap {
        if with_cpu {
            writeln!(out)?;
        }
        writeln!(out, "{} -> {}", old.file.display(), new.file.display())?;
        if let (false, Some(w)) = (with_cpu, old.window.describe()) {
            writeln!(out, "selected in both: {w}")?;
        }
        heap_text::heap_diff(out, h, top)?;
    }
    Ok(())
}

/// Milliseconds of `ns`, or `-` when the event does not count time.
fn ms(ns: Option<u64>) -> String {
    ns.map_or_else(|| "-".to_string(), |ns| format!("{:.1}", ns as f64 / 1e6))
}

/// A p-value in few characters.
pub fn p_text(p: f64) -> String {
    if p >= 0.001 {
        format!("{p:.3}")
    } else {
        format!("{p:.0e}")
    }
}

/// Each side's `few-samples` warning, as text lines.
pub fn warnings_text(out: &mut dyn Write, sides: [(&str, u64); 2]) -> io::Result<()> {
    for (label, samples) in sides {
        if let Some(w) = few_samples(samples) {
            writeln!(out, "warning: {label}: {}: {}", w.kind, w.message)?;
        }
    }
    Ok(())
}

/// The CPU diff as text: each function's self samples, time and share before and after,
/// biggest change of share first, `*` where the change exceeds the noise; then the legend.
pub fn cpu_text(
    out: &mut dyn Write,
    old: &Side<'_>,
    new: &Side<'_>,
    rows: &[DiffRow],
    top: usize,
) -> io::Result<()> {
    let cost = |s: &Side<'_>| match s.cost_ns {
        Some(ns) => format!("{} samples, {} ms", s.samples, ms(Some(ns))),
        None => format!("{} samples", s.samples),
    };
    writeln!(
        out,
        "CPU diff: {} ({}) -> {} ({})",
        old.file.display(),
        cost(old),
        new.file.display(),
        cost(new)
    )?;
    if let Some(w) = old.window.describe() {
        writeln!(out, "selected in both: {w}")?;
    }
    warnings_text(out, [("old", old.samples), ("new", new.samples)])?;
    writeln!(
        out,
        "{:>9} {:>9} {:>10} {:>10} {:>7} {:>7} {:>7} {:>7}    function",
        "old self", "new self", "old ms", "new ms", "old%", "new%", "delta", "p"
    )?;
    for r in rows.iter().take(top) {
        writeln!(
            out,
            "{:>9} {:>9} {:>10} {:>10} {:>6.1}% {:>6.1}% {:>+7.1} {:>7} {} {}",
            r.old_self_samples,
            r.new_self_samples,
            ms(r.old_self_ns),
            ms(r.new_self_ns),
            r.old_self_pct,
            r.new_self_pct,
            r.delta_self(),
            p_text(r.p_value),
            if r.significant { " *" } else { "  " },
            r.function
        )?;
    }
    let marked = rows.iter().filter(|r| r.significant).count();
    writeln!(
        out,
        "* {marked} of {} rows changed beyond noise: {CPU_STATISTIC}",
        rows.len()
    )?;
    Ok(())
}
