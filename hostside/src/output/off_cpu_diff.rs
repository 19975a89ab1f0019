//! `hostside diff --off-cpu`: the comparison of two off-CPU recordings, per function and per
//! thread, as text or JSON ([`crate::analysis::off_cpu_diff`] computes it).

use std::io::{self, Write};
use std::path::Path;

use crate::analysis::off_cpu_diff::{OffCpuDiff, WaitDiffRow};
use crate::filter::Window;
use crate::output::diff::p_text;
use crate::output::json::FilterJson;

/// How off-CPU rows are marked, as the text legend and the JSON's `statistic` state it.
pub const OFF_CPU_STATISTIC: &str = "a row is significant when its blocked waits got longer \
    or shorter (Mann-Whitney U test on the individual waits' durations) or more or less \
    frequent (exact conditional binomial test on their number, the recordings taken to do \
    the same work), the smaller p-value doubled, Benjamini-Hochberg at a 1% false-discovery \
    rate across the rows of each table, and only when the wait time changed by at least 25%; \
    preemptions count in the time shown but are not \
    tested; waits are treated as independent";

/// The `diff --off-cpu --json` document: both files, the `top` functions and every thread.
pub fn json(
    files: (&Path, &Path),
    window: &Window,
    d: &OffCpuDiff,
    top: usize,
) -> serde_json::Value {
    let side = |file: &Path, wait_ns: u64| {
        serde_json::json!({
            "file": file.display().to_string(),
            "wait_ns": wait_ns,
            "filter": FilterJson::of(window),
        })
    };
    serde_json::json!({
        "old": side(files.0, d.old_wait_ns),
        "new": side(files.1, d.new_wait_ns),
        "statistic": OFF_CPU_STATISTIC,
        "off_cpu": {
            "functions": d.functions.iter().take(top).collect::<Vec<_>>(),
            "threads": d.threads,
        },
    })
}

fn ms(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e6)
}

/// One table of rows, `what` naming its kind.
fn table(out: &mut dyn Write, what: &str, rows: &[WaitDiffRow], top: usize) -> io::Result<()> {
    writeln!(
        out,
        "{:>10} {:>10} {:>6} {:>6} {:>6} {:>6} {:>8} {:>8} {:>7}    {what}",
        "old ms", "new ms", "old%", "new%", "old n", "new n", "old avg", "new avg", "p"
    )?;
    for r in rows.iter().take(top) {
        writeln!(
            out,
            "{:>10} {:>10} {:>5.1}% {:>5.1}% {:>6} {:>6} {:>8} {:>8} {:>7} {} {}",
            ms(r.old.wait_ns),
            ms(r.new.wait_ns),
            r.old.wait_pct,
            r.new.wait_pct,
            r.old.waits,
            r.new.waits,
            ms(r.old.mean_wait_ns),
            ms(r.new.mean_wait_ns),
            p_text(r.p_value),
            if r.significant { " *" } else { "  " },
            match r.tids {
                Some((a, b)) => format!("{} (tid {a} -> {b})", r.name),
                None => r.name.clone(),
            }
        )?;
    }
    Ok(())
}

/// The off-CPU diff as text: functions (time with the function anywhere on the blocked
/// stack), then threads, each with the time, share of all waiting, blocked waits and their
/// mean before and after; `*` where the change exceeds the noise; then the legend.
pub fn text(
    out: &mut dyn Write,
    files: (&Path, &Path),
    window: &Window,
    d: &OffCpuDiff,
    top: usize,
) -> io::Result<()> {
    writeln!(
        out,
        "Off-CPU diff: {} ({} ms off-CPU) -> {} ({} ms off-CPU)",
        files.0.display(),
        ms(d.old_wait_ns),
        files.1.display(),
        ms(d.new_wait_ns)
    )?;
    if let Some(w) = window.describe() {
        writeln!(out, "selected in both: {w}")?;
    }
    writeln!(out, "\nFunctions (off-CPU time with the function on the stack; n: blocked waits, avg: their mean ms)")?;
    table(out, "function", &d.functions, top)?;
    writeln!(out, "\nThreads (matched by name)")?;
    table(out, "thread", &d.threads, usize::MAX)?;
    let marked = d
        .functions
        .iter()
        .chain(&d.threads)
        .filter(|r| r.significant)
        .count();
    writeln!(
        out,
        "* {marked} rows changed beyond noise: {OFF_CPU_STATISTIC}"
    )?;
    Ok(())
}
