//! The message `report --fail-on-leak` prints when a run leaked more than allowed: written for
//! a CI log, where the reader needs to see at once how much leaked and which code allocated
//! it, without opening the full report.

use std::io::{self, Write};

use crate::analysis::heap::HeapProfile;
use crate::output::heap_text::bytes;
use crate::output::text::{frame_label, location, short};

/// Frames of each leak site's stack shown below it.
const STACK_FRAMES: usize = 8;

/// A byte count as the report prints it, with the exact number when that rounds.
fn exact(n: u64) -> String {
    let shown = bytes(n);
    if n < 1000 {
        shown
    } else {
        format!("{shown} ({n} B)")
    }
}

/// Writes the verdict and the `top` sites with the most leaked bytes, each with the stack of
/// its trace that leaked most.
pub fn report(out: &mut dyn Write, p: &HeapProfile, limit: u64, top: usize) -> io::Result<()> {
    let t = &p.totals;
    writeln!(
        out,
        "hostside: {} leaked in {} blocks, more than the {} that --fail-on-leak allows",
        exact(t.leaked_bytes),
        t.leaked_allocations,
        exact(limit),
    )?;
    let mut sites: Vec<usize> = (0..p.sites.len())
        .filter(|&i| p.sites[i].counts.leaked_bytes > 0)
        .collect();
    sites.sort_by(|&a, &b| {
        let (x, y) = (&p.sites[a].counts, &p.sites[b].counts);
        y.leaked_bytes.cmp(&x.leaked_bytes).then(a.cmp(&b))
    });
    let shown = sites.len().min(top);
    writeln!(
        out,
        "top leak sites ({shown} of {}):\n{:>12} {:>8}  function",
        sites.len(),
        "leaked",
        "blocks"
    )?;
    for &i in &sites[..shown] {
        let s = &p.sites[i];
        let f = p.table.get(s.frame);
        writeln!(
            out,
            "{:>12} {:>8}  {} {} ({})",
            bytes(s.counts.leaked_bytes),
            s.counts.leaked_allocations,
            f.function,
            location(f),
            short(&f.module)
        )?;
        let worst = s
            .traces
            .iter()
            .copied()
            .max_by_key(|&tr| (p.traces[tr].counts.leaked_bytes, std::cmp::Reverse(tr)));
        if let Some(tr) = worst {
            for &id in p.traces[tr].frames.iter().skip(1).take(STACK_FRAMES) {
                writeln!(out, "{:>23}<- {}", "", frame_label(p.table.get(id)))?;
            }
        }
    }
    Ok(())
}
