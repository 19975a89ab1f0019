//! The human-readable heap report: heaptrack's summary numbers, a chart of heap consumption over
//! time, the top sites by allocations, temporary allocations, peak and leaks with their stacks,
//! and the largest single allocations; plus the text form of a heap diff.

use std::io::{self, Write};

use crate::analysis::heap::diff::HeapDiff;
use crate::analysis::heap::timeline::Bucket;
use crate::analysis::heap::{HeapProfile, Metric};
use crate::output::context::ReportContext;
use crate::output::text::{frame_label, header, location, pct, short};

/// Columns of the chart.
pub const CHART_COLUMNS: usize = 60;
/// Rows of the chart.
pub const CHART_ROWS: usize = 6;

/// Bytes in heaptrack's style (powers of 1000, two decimals above 1000 B).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    if n < 1000 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1000.0 && i < UNITS.len() - 1 {
        v /= 1000.0;
        i += 1;
    }
    format!("{v:.2} {}", UNITS[i])
}

/// Signed bytes, for diffs.
pub fn signed_bytes(n: i64) -> String {
    let s = bytes(n.unsigned_abs());
    match n.signum() {
        1 => format!("+{s}"),
        -1 => format!("-{s}"),
        _ => s,
    }
}

fn seconds(ns: u64) -> String {
    format!("{:.2} s", ns as f64 / 1e9)
}

/// Writes the heap report.
pub fn heap_report(
    out: &mut dyn Write,
    ctx: &ReportContext,
    p: &HeapProfile,
    top: usize,
) -> io::Result<()> {
    let start = ctx.header.start_clock_ns;
    let t = &p.totals;
    header(
        out,
        ctx,
        &format!(
            "{} allocations, {} heap events lost",
            t.allocations, p.lost_events
        ),
    )?;
    let secs = (p.end_time.saturating_sub(start) as f64 / 1e9).max(1e-9);
    writeln!(out, "\nHeap (counted as heaptrack_print counts)")?;
    if let Some(sm) = &p.sampled {
        let e = &sm.totals;
        writeln!(
            out,
            "  ESTIMATES from a sampled recording (rec --heap-sample {}: one sample per {} \
             allocated on average, {} allocations recorded); \u{b1} is one standard error\n  \
             calls {} \u{b1} {:.0}, bytes allocated {} \u{b1} {}, leaked {} \u{b1} {} in {} \
             \u{b1} {:.0} blocks; temporary counts only recorded allocations (an upper \
             estimate); peaks are of estimated live bytes",
            sm.mean_bytes,
            bytes(sm.mean_bytes),
            sm.samples,
            t.allocations,
            e.allocations,
            bytes(t.allocated_bytes),
            bytes(e.allocated_bytes as u64),
            bytes(t.leaked_bytes),
            bytes(e.leaked_bytes as u64),
            t.leaked_allocations,
            e.leaked_allocations
        )?;
    }
    if ctx.window.is_active() {
        writeln!(
            out,
            "  only allocations made in the selection count ({} frees in it of blocks \
             allocated outside it ignored); the peak is of those allocations, \"leaked\" is \
             what of them was still live at the selection's end",
            p.frees_outside
        )?;
    }
    writeln!(
        out,
        "  calls to allocation functions  {} ({:.0}/s)",
        t.allocations,
        t.allocations as f64 / secs
    )?;
    writeln!(
        out,
        "  temporary memory allocations   {} ({:.1}% of calls)",
        t.temporary,
        pct(t.temporary, t.allocations)
    )?;
    writeln!(
        out,
        "  bytes allocated in total       {}",
        bytes(t.allocated_bytes)
    )?;
    writeln!(
        out,
        "  peak heap memory consumption   {} at {}",
        bytes(t.peak_bytes),
        seconds(t.peak_time.saturating_sub(start))
    )?;
    if t.peak_rss_bytes > 0 {
        writeln!(
            out,
            "  peak RSS                       {}",
            bytes(t.peak_rss_bytes)
        )?;
    }
    writeln!(
        out,
        "  total memory leaked            {} in {} blocks",
        bytes(t.leaked_bytes),
        t.leaked_allocations
    )?;
    if t.suppressed_leaked_allocations > 0 {
        writeln!(
            out,
            "  suppressed leaks               {} in {} blocks (heaptrack's built-in suppressions)",
            bytes(t.suppressed_leaked_bytes),
            t.suppressed_leaked_allocations
        )?;
    }
    if p.lost_events > 0 {
        writeln!(
            out,
            "  WARNING: the board dropped {} heap events; counts are lower bounds",
            p.lost_events
        )?;
    }
    let a = &p.anomalies;
    let odd = [
        (
            a.unknown_stack_allocations,
            "allocations with an unknown stack",
        ),
        (
            a.reused_live_addresses,
            "allocations at a still-live address",
        ),
        (a.tree.truncated, "stacks cut (cycle or too deep)"),
        (a.tree.unknown_ids, "stacks referring to unknown nodes"),
    ];
    for (n, what) in odd {
        if n > 0 {
            writeln!(out, "  note: {n} {what}")?;
        }
    }
    if t.allocations == 0 {
        writeln!(out, "\nNo heap allocations in this recording.")?;
        return crate::output::heap_beyond::text(out, p, top, start);
    }

    chart(out, p, start)?;

    let sections: [(&str, Metric); 4] = [
        ("Most calls to allocation functions", |c| c.allocations),
        ("Most temporary allocations", |c| c.temporary),
        ("Peak memory consumers (each site's own maximum)", |c| {
            c.peak_bytes
        }),
        ("Memory leaked", |c| c.leaked_bytes),
    ];
    for (title, metric) in sections {
        let mut idx: Vec<usize> = (0..p.sites.len())
            .filter(|&i| metric(&p.sites[i].counts) > 0)
            .collect();
        if idx.is_empty() {
            continue;
        }
        idx.sort_by(|&a, &b| {
            metric(&p.sites[b].counts)
                .cmp(&metric(&p.sites[a].counts))
                .then(a.cmp(&b))
        });
        writeln!(out, "\n{title}")?;
        writeln!(
            out,
            "{:>10} {:>10} {:>10} {:>10} {:>8}  {:<32} location",
            "calls", "temporary", "peak", "leaked", "blocks", "function"
        )?;
        for &i in idx.iter().take(top) {
            let s = &p.sites[i];
            let f = p.table.get(s.frame);
            writeln!(
                out,
                "{:>10} {:>10} {:>10} {:>10} {:>8}  {:<32} {} ({})",
                s.counts.allocations,
                s.counts.temporary,
                bytes(s.counts.peak_bytes),
                bytes(s.counts.leaked_bytes),
                s.counts.leaked_allocations,
                f.function,
                location(f),
                short(&f.module)
            )?;
            if let Some(&tr) = s.traces.first() {
                let chain: Vec<String> = p.traces[tr]
                    .frames
                    .iter()
                    .skip(1)
                    .take(8)
                    .map(|&id| frame_label(p.table.get(id)))
                    .collect();
                if !chain.is_empty() {
                    let more = if s.traces.len() > 1 {
                        format!("  [+{} other stacks]", s.traces.len() - 1)
                    } else {
                        String::new()
                    };
                    writeln!(out, "{:>46}<- {}{more}", "", chain.join(" <- "))?;
                }
            }
            if let Some(e) = &s.stderr {
                writeln!(
                    out,
                    "{:>46}\u{b1} {:.0} calls, {} allocated \u{b1} {}, leaked \u{b1} {}",
                    "",
                    e.allocations,
                    bytes(s.counts.allocated_bytes),
                    bytes(e.allocated_bytes as u64),
                    bytes(e.leaked_bytes as u64)
                )?;
            }
        }
    }

    if !p.largest.is_empty() {
        writeln!(out, "\nLargest single allocations")?;
        for l in p.largest.iter().take(top) {
            let tr = &p.traces[l.trace];
            let f = p.table.get(p.sites[tr.site].frame);
            writeln!(
                out,
                "{:>10}  at {:>9}  pid {:<7} {} {}",
                bytes(l.size),
                seconds(l.time.saturating_sub(start)),
                l.pid,
                f.function,
                location(f)
            )?;
        }
    }
    crate::output::heap_beyond::text(out, p, top, start)?;
    crate::output::text::diagnostics(out, &ctx.diagnostics)
}

/// The columns of the chart: the highest value of the buckets each column covers.
pub fn columns(buckets: &[Bucket], n: usize, value: fn(&Bucket) -> Option<u64>) -> Vec<u64> {
    if buckets.is_empty() {
        return vec![0; n];
    }
    (0..n)
        .map(|c| {
            let a = c * buckets.len() / n;
            let b = ((c + 1) * buckets.len() / n).max(a + 1).min(buckets.len());
            buckets[a..b].iter().filter_map(value).max().unwrap_or(0)
        })
        .collect()
}

/// Renders values as a bar chart of `rows` text rows, top row first, using eighth blocks.
pub fn bars(values: &[u64], max: u64, rows: usize) -> Vec<String> {
    const PARTS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = max.max(1) as u128;
    let eighths: Vec<u128> = values
        .iter()
        .map(|&v| {
            let e = (v as u128 * rows as u128 * 8).div_ceil(max);
            // Anything above zero shows at least a sliver.
            if v > 0 {
                e.max(1)
            } else {
                0
            }
        })
        .collect();
    (0..rows)
        .rev()
        .map(|r| {
            let base = r as u128 * 8;
            eighths
                .iter()
                .map(|&e| PARTS[e.saturating_sub(base).min(8) as usize])
                .collect()
        })
        .collect()
}

fn chart(out: &mut dyn Write, p: &HeapProfile, start: u64) -> io::Result<()> {
    let heap = columns(&p.timeline, CHART_COLUMNS, |b| b.heap_max);
    let max = heap.iter().copied().max().unwrap_or(0);
    // The series ends with the recording, or with the window when one was selected.
    let chart_end = p.end_time.min(
        p.timeline_start
            .saturating_add((p.timeline.len() as u64).saturating_mul(p.timeline_width)),
    );
    let span = chart_end.saturating_sub(p.timeline_start);
    writeln!(
        out,
        "\nHeap over time (peak {} at {}; each column {})",
        bytes(p.totals.peak_bytes),
        seconds(p.totals.peak_time.saturating_sub(start)),
        seconds(span / CHART_COLUMNS as u64)
    )?;
    let rows = bars(&heap, max, CHART_ROWS);
    let top_label = bytes(max);
    let w = top_label.len().max(3);
    for (i, row) in rows.iter().enumerate() {
        let label = if i == 0 {
            top_label.clone()
        } else if i + 1 == rows.len() {
            "0 B".into()
        } else {
            String::new()
        };
        writeln!(out, "  {label:>w$} │{row}")?;
    }
    if p.timeline.iter().any(|b| b.rss_max.is_some()) {
        let rss = columns(&p.timeline, CHART_COLUMNS, |b| b.rss_max);
        let rmax = rss.iter().copied().max().unwrap_or(0);
        writeln!(out, "  {:>w$} │{}", "RSS", bars(&rss, rmax, 1)[0])?;
        writeln!(out, "  {:>w$} │(RSS scale: {} full)", "", bytes(rmax))?;
    }
    writeln!(out, "  {:>w$} └{}", "", "─".repeat(CHART_COLUMNS))?;
    let t0 = seconds(p.timeline_start.saturating_sub(start));
    let t1 = seconds(p.timeline_start.saturating_sub(start) + span / 2);
    let t2 = seconds(chart_end.saturating_sub(start));
    let half = CHART_COLUMNS / 2;
    let axis = format!(
        "{t0:<half$}{t1:<rest$}{t2}",
        rest = (CHART_COLUMNS - half).saturating_sub(t2.len()).max(1)
    );
    writeln!(out, "  {:>w$}  {axis}", "")
}

/// Writes a heap diff.
pub fn heap_diff(out: &mut dyn Write, d: &HeapDiff, top: usize) -> io::Result<()> {
    writeln!(out, "Heap diff (new - old)")?;
    let rows = [
        (
            "calls to allocation functions",
            d.old.allocations,
            d.new.allocations,
            false,
        ),
        (
            "temporary memory allocations",
            d.old.temporary,
            d.new.temporary,
            false,
        ),
        (
            "peak heap memory consumption",
            d.old.peak_bytes,
            d.new.peak_bytes,
            true,
        ),
        (
            "total memory leaked",
            d.old.leaked_bytes,
            d.new.leaked_bytes,
            true,
        ),
        (
            "leaked blocks",
            d.old.leaked_allocations,
            d.new.leaked_allocations,
            false,
        ),
        (
            "bytes allocated in total",
            d.old.allocated_bytes,
            d.new.allocated_bytes,
            true,
        ),
    ];
    for (what, o, n, is_bytes) in rows {
        let delta = n as i128 - o as i128;
        let delta = delta.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        if is_bytes {
            writeln!(
                out,
                "  {what:<30} {:>12} -> {:>12}  ({})",
                bytes(o),
                bytes(n),
                signed_bytes(delta)
            )?;
        } else {
            writeln!(out, "  {what:<30} {o:>12} -> {n:>12}  ({delta:+})")?;
        }
    }
    if d.sites.is_empty() {
        writeln!(out, "\nNo site changed.")?;
        return Ok(());
    }
    writeln!(out, "\nSites that changed")?;
    writeln!(
        out,
        "{:>12} {:>12} {:>12} {:>12}  {:<32} location",
        "calls", "temporary", "peak", "leaked", "function"
    )?;
    for s in d.sites.iter().take(top) {
        let loc = match (&s.file, s.line) {
            (Some(f), Some(l)) => format!("{}:{l}", short(f)),
            (Some(f), None) => short(f).to_string(),
            _ => String::new(),
        };
        writeln!(
            out,
            "{:>+12} {:>+12} {:>12} {:>12}  {:<32} {loc}",
            s.delta.allocations,
            s.delta.temporary,
            signed_bytes(s.delta.peak_bytes),
            signed_bytes(s.delta.leaked_bytes),
            s.function
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_like_heaptrack() {
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(2_000_000), "2.00 MB");
        assert_eq!(bytes(1_234_567), "1.23 MB");
        assert_eq!(signed_bytes(-1500), "-1.50 KB");
    }

    #[test]
    fn bars_scale_to_rows() {
        let rows = bars(&[0, 4, 8, 16], 16, 2);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0], "   █");
        assert_eq!(rows[1], " ▄██");
        // Values never overflow the chart.
        let rows = bars(&[u64::MAX], u64::MAX, 6);
        assert!(rows.iter().all(|r| r == "█"));
    }

    #[test]
    fn columns_take_maxima_and_stretch() {
        let b = |v: u64| Bucket {
            heap_max: Some(v),
            heap_last: Some(v),
            rss_max: None,
        };
        let bs = [b(1), b(5), b(2), b(3)];
        assert_eq!(columns(&bs, 2, |b| b.heap_max), vec![5, 3]);
        assert_eq!(columns(&bs[..1], 3, |b| b.heap_max), vec![1, 1, 1]);
        assert_eq!(columns(&[], 2, |b| b.heap_max), vec![0, 0]);
    }
}
