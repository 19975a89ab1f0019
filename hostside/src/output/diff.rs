//! `hostside diff`: the CPU comparison as text or JSON, and the heap comparison's JSON (its
//! table lives with the heap report in [`crate::output::heap_text`]).

use std::io::{self, Write};
use std::path::Path;

use crate::analysis::diff::DiffRow;
use crate::analysis::heap::diff::HeapDiff;
use crate::filter::Window;
use crate::output::heap_text;
use crate::output::json::FilterJson;

/// One side of a diff: the file, its CPU sample count and the part of it compared.
pub struct Side<'a> {
    /// The recording.
    pub file: &'a Path,
    /// Its CPU samples (inside the window).
    pub samples: u64,
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
        "functions": rows.iter().take(top).collect::<Vec<_>>(),
        "heap": heap,
    })
}

/// A side's object: `file`, `samples` and `filter` (as `report --json` has it under
/// `recording.filter`, null without a filter).
fn side(s: &Side<'_>) -> serde_json::Value {
    serde_json::json!({
        "file": s.file.display().to_string(),
        "samples": s.samples,
        "filter": FilterJson::of(s.window),
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

/// The CPU diff as text: each function's self share before and after, biggest change first.
pub fn cpu_text(
    out: &mut dyn Write,
    old: &Side<'_>,
    new: &Side<'_>,
    rows: &[DiffRow],
    top: usize,
) -> io::Result<()> {
    writeln!(
        out,
        "CPU diff: {} ({} samples) -> {} ({} samples)",
        old.file.display(),
        old.samples,
        new.file.display(),
        new.samples
    )?;
    if let Some(w) = old.window.describe() {
        writeln!(out, "selected in both: {w}")?;
    }
    writeln!(out, "{:>8} {:>8} {:>8}  function", "old%", "new%", "delta")?;
    for r in rows.iter().take(top) {
        writeln!(
            out,
            "{:>7.1}% {:>7.1}% {:>+7.1}  {}",
            r.old_self_pct,
            r.new_self_pct,
            r.delta_self(),
            r.function
        )?;
    }
    Ok(())
}
