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
    let s = unsafe { state() }.memo.stats;
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
    line.push(b"\n");
    line.write(2);
}
