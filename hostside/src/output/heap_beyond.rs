//! Memory beyond malloc in `report --heap`: the program's own anonymous mappings by stack
//! (text section and the `heap.mmap` JSON object) and RSS by kind of mapping over time (text
//! table and the `heap.rss_split` JSON array). Both JSON fields were added to the heap section
//! and are only ever extended.

use std::io::{self, Write};

use serde::Serialize;

use crate::analysis::heap::mapped::MappingCounts;
use crate::analysis::heap::{HeapProfile, MappingRow};
use crate::frames::FrameTable;
use crate::output::heap_text::bytes;
use crate::output::text::{frame_label, location, short};

/// The `heap.mmap` object.
#[derive(Serialize)]
pub struct MmapJson {
    /// `mmap` calls of private anonymous memory (and remaps that moved such memory).
    pub mappings: u64,
    /// Bytes they mapped, pages rounded up.
    pub bytes: u64,
    /// Highest mapped bytes live at once.
    pub peak_bytes: u64,
    /// Bytes still mapped at the end.
    pub leaked_bytes: u64,
    /// Mappings with pages still mapped at the end.
    pub leaked_mappings: u64,
    /// Bytes unmapped that no recorded mapping held (file mappings and the like).
    pub unmapped_elsewhere_bytes: u64,
    /// By calling stack, in the order of their first mapping.
    pub sites: Vec<MmapSiteJson>,
}

/// The mappings of one stack.
#[derive(Serialize)]
pub struct MmapSiteJson {
    /// The function that called `mmap` (innermost, inlined), demangled.
    pub function: String,
    /// Its source file.
    pub file: Option<String>,
    /// Line of the call.
    pub line: Option<u32>,
    /// Module path on the board.
    pub module: String,
    /// Process id.
    pub pid: u32,
    /// Mappings made.
    pub mappings: u64,
    /// Bytes mapped, pages rounded up.
    pub bytes: u64,
    /// The stack's own maximum of mapped bytes.
    pub peak_bytes: u64,
    /// Bytes still mapped at the end.
    pub leaked_bytes: u64,
    /// Mappings with pages still mapped at the end.
    pub leaked_mappings: u64,
    /// Mappings unmapped to their last page, whose lifetimes follow.
    pub unmapped: u64,
    /// Shortest time from map to the unmap of the last page, ns.
    pub lifetime_min_ns: u64,
    /// Longest such time, ns.
    pub lifetime_max_ns: u64,
    /// Mean of those times, ns.
    pub lifetime_mean_ns: u64,
    /// When the stack first mapped, ns after the recording's start.
    pub first_time_ns: u64,
    /// Function names from the caller of `mmap` out to `main`.
    pub stack: Vec<String>,
}

/// One `heap.rss_split` point: a process's resident memory by kind of mapping.
#[derive(Serialize)]
pub struct RssSplitJson {
    /// When, ns after the recording's start.
    pub time_ns: u64,
    /// Process id.
    pub pid: u32,
    /// Resident bytes, the kinds' sum.
    pub rss_bytes: u64,
    /// In `[heap]` and the allocator's arenas.
    pub heap_bytes: u64,
    /// In the main and the threads' stacks.
    pub stack_bytes: u64,
    /// In other private anonymous memory (the program's mappings among it).
    pub anonymous_bytes: u64,
    /// In file-backed and shared mappings.
    pub file_bytes: u64,
}

fn mean(c: &MappingCounts) -> u64 {
    c.lifetime_total_ns.checked_div(c.ended).unwrap_or(0)
}

fn stack(table: &FrameTable, r: &MappingRow) -> Vec<String> {
    r.frames
        .iter()
        .map(|&f| table.get(f).function.clone())
        .collect()
}

/// The `heap.mmap` object; `start` is the recording's start on the board clock.
pub fn mmap_json(p: &HeapProfile, start: u64) -> MmapJson {
    let t = &p.mapping_totals;
    MmapJson {
        mappings: t.counts.mappings,
        bytes: t.counts.bytes,
        peak_bytes: t.counts.peak_bytes,
        leaked_bytes: t.counts.leaked_bytes,
        leaked_mappings: t.counts.leaked_mappings,
        unmapped_elsewhere_bytes: t.unmapped_elsewhere_bytes,
        sites: p
            .mappings
            .iter()
            .map(|r| {
                let f = r.frames.first().map(|&f| p.table.get(f));
                let c = &r.counts;
                MmapSiteJson {
                    function: f.map(|f| f.function.clone()).unwrap_or_default(),
                    file: f.and_then(|f| f.file.clone()),
                    line: f.and_then(|f| f.line),
                    module: f.map(|f| f.module.clone()).unwrap_or_default(),
                    pid: r.pid,
                    mappings: c.mappings,
                    bytes: c.bytes,
                    peak_bytes: c.peak_bytes,
                    leaked_bytes: c.leaked_bytes,
                    leaked_mappings: c.leaked_mappings,
                    unmapped: c.ended,
                    lifetime_min_ns: c.lifetime_min_ns,
                    lifetime_max_ns: c.lifetime_max_ns,
                    lifetime_mean_ns: mean(c),
                    first_time_ns: c.first_time.saturating_sub(start),
                    stack: stack(&p.table, r),
                }
            })
            .collect(),
    }
}

/// The `heap.rss_split` array.
pub fn rss_split_json(p: &HeapProfile, start: u64) -> Vec<RssSplitJson> {
    p.rss_split
        .iter()
        .map(|s| RssSplitJson {
            time_ns: s.time.saturating_sub(start),
            pid: s.pid,
            rss_bytes: s.rss,
            heap_bytes: s.heap,
            stack_bytes: s.stacks,
            anonymous_bytes: s.anonymous,
            file_bytes: s.file,
        })
        .collect()
}

fn ms(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

/// The text sections: mappings by stack (the `top` largest by bytes), then RSS by kind at up
/// to `top.max(10)` ticks spread over the run (and the tick of the highest RSS).
pub fn text(out: &mut dyn Write, p: &HeapProfile, top: usize, start: u64) -> io::Result<()> {
    let t = &p.mapping_totals.counts;
    if t.mappings > 0 {
        writeln!(
            out,
            "\nMemory beyond malloc: the program's own anonymous mappings"
        )?;
        writeln!(
            out,
            "  {} mappings, {} mapped, peak {}, still mapped at the end {} in {} mappings",
            t.mappings,
            bytes(t.bytes),
            bytes(t.peak_bytes),
            bytes(t.leaked_bytes),
            t.leaked_mappings
        )?;
        writeln!(
            out,
            "{:>8} {:>10} {:>10} {:>10}  {:<28} {:<32} location",
            "mappings", "mapped", "peak", "leaked", "lifetime min/mean/max", "function"
        )?;
        let mut rows: Vec<&MappingRow> = p.mappings.iter().collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.counts.bytes));
        for r in rows.into_iter().take(top) {
            let c = &r.counts;
            let life = if c.ended > 0 {
                format!(
                    "{}/{}/{}",
                    ms(c.lifetime_min_ns),
                    ms(mean(c)),
                    ms(c.lifetime_max_ns)
                )
            } else {
                "never unmapped".into()
            };
            let (name, loc) = match r.frames.first().map(|&f| p.table.get(f)) {
                Some(f) => (
                    f.function.clone(),
                    format!("{} ({})", location(f), short(&f.module)),
                ),
                None => (String::new(), String::new()),
            };
            writeln!(
                out,
                "{:>8} {:>10} {:>10} {:>10}  {:<28} {:<32} {}",
                c.mappings,
                bytes(c.bytes),
                bytes(c.peak_bytes),
                bytes(c.leaked_bytes),
                life,
                name,
                loc
            )?;
            let chain: Vec<String> = r
                .frames
                .iter()
                .skip(1)
                .take(8)
                .map(|&f| frame_label(p.table.get(f)))
                .collect();
            if !chain.is_empty() {
                writeln!(out, "{:>42}<- {}", "", chain.join(" <- "))?;
            }
        }
    }
    if p.rss_split.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\nRSS by kind of mapping (from smaps, {} ticks)",
        p.rss_split.len()
    )?;
    writeln!(
        out,
        "{:>10} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "time", "pid", "rss", "heap", "stacks", "anonymous", "file"
    )?;
    let n = p.rss_split.len();
    let rows = top.max(10);
    let peak = (0..n).max_by_key(|&i| (p.rss_split[i].rss, std::cmp::Reverse(i)));
    let mut picked: Vec<usize> = (0..rows.min(n)).map(|k| k * n / rows.min(n)).collect();
    picked.extend(peak);
    picked.sort_unstable();
    picked.dedup();
    for i in picked {
        let s = &p.rss_split[i];
        writeln!(
            out,
            "{:>8.2} s {:>7} {:>10} {:>10} {:>10} {:>10} {:>10}{}",
            s.time.saturating_sub(start) as f64 / 1e9,
            s.pid,
            bytes(s.rss),
            bytes(s.heap),
            bytes(s.stacks),
            bytes(s.anonymous),
            bytes(s.file),
            if Some(i) == peak { "  (highest)" } else { "" }
        )?;
    }
    Ok(())
}
