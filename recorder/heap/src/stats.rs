//! The interposer's own counters, printed at exit on request: how often the unwind memo
//! spared an unwind (`CROSSPROF_HEAP_STATS`, for the benchmarks in bench/RESULTS.md).

use crate::record::{state, LOCK};
use crate::{sys, thread};

/// With `CROSSPROF_HEAP_STATS` in the environment, writes the unwind memo's counters to
/// stderr (one line, at exit): how often a stack was reused instead of unwound.
pub fn print_stats() {
    if sys::env("CROSSPROF_HEAP_STATS").is_none() {
        return;
    }
    let tid = thread::tid();
    LOCK.lock(tid);
    // SAFETY: LOCK is held.
    let st = unsafe { state() };
    let s = st.memo.stats;
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    let unwind = st.modules.as_ref().map(|m| (m.stats, m.rule_cache_stats()));
    LOCK.unlock();
    let mut line = sys::Line::new();
    line.push(b"crossprof-heap: unwind memo hits ");
    line.num(s.hits);
    line.push(b" misses ");
    line.num(s.misses);
    line.push(b" unstorable ");
    line.num(s.unstorable);
    line.push(b" loose ");
    line.num(s.loose);
    line.push(b" unlearned ");
    line.num(s.unlearned);
    line.push(b" skipped ");
    line.num(s.skipped);
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    if let Some((u, (hits, misses))) = unwind {
        line.push(b"; frames unwound ");
        line.num(u.unwound);
        line.push(b" (by plan ");
        line.num(u.planned);
        line.push(b")");
        line.push(b" spliced unwinds ");
        line.num(u.spliced);
        line.push(b" frames ");
        line.num(u.spliced_frames);
        line.push(b" words checked ");
        line.num(u.checked);
        line.push(b" rule cache hits ");
        line.num(hits);
        line.push(b" misses ");
        line.num(misses);
    }
    line.push(b"\n");
    line.write(2);
}
