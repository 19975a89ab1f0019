//! `hostside diff`: the CPU comparison as text or JSON, and the heap comparison's JSON (its
//! text lives with the heap report in [`crate::output::heap_text`]).

use std::io::{self, Write};
use std::path::Path;

use crate::analysis::diff::DiffRow;
use crate::analysis::heap::diff::HeapDiff;

/// One side of a diff: the file and its CPU sample count.
pub struct Side<'a> {
    /// The recording.
    pub file: &'a Path,
    /// Its CPU samples.
    pub samples: u64,
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
        "old": {"file": old.file.display().to_string(), "samples": old.samples},
        "new": {"file": new.file.display().to_string(), "samples": new.samples},
        "functions": rows.iter().take(top).collect::<Vec<_>>(),
        "heap": heap,
    })
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
