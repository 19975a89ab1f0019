//! `--off-cpu`: what the kernel is asked for so that the host can tell where and for how long
//! each thread waited.
//!
//! Two sources, as perf uses them (`perf record --switch-events -e cs`):
//! - SWITCH records (the `context_switch` attribute of the main event): the exact times a
//!   thread leaves and re-enters a CPU, and whether it left while still runnable (preempted).
//!   Allowed for any user who may sample the task.
//! - a `context-switches` software event sampled at every switch (period 1): its user
//!   registers and stack copy (or user call chain with `fp`) are the stack the thread blocked
//!   in. The kernel takes this sample inside the scheduler and drops it for events that
//!   exclude the kernel, so it is only opened where kernel profiling is allowed; elsewhere
//!   the host falls back to the thread's last CPU sample and says so.

use super::kind::{Kind, Secondary};
use crate::cli::CallGraph;

/// Stack bytes copied per blocking stack: a thread blocks in a system call wrapper, so the
/// stack above it is the caller's. At most the main samples' size; capped at perf's default
/// because every context switch copies it, and switch-heavy programs switch 100,000 times a
/// second (measured in bench/RESULTS.md).
pub const MAX_STACK: u32 = 8192;

/// Ring bytes per CPU for blocking stacks: room for this many samples, and at least
/// [`MIN_MAIN_RING`].
const RING_SAMPLES: usize = 200;
/// The smallest ring per CPU for the main event when switches are recorded: a switch-heavy
/// program (100,000 switches a second) writes two 32-byte switch records per switch, 6 MB a
/// second; 1 MiB holds 160 ms of them, for the moments rec waits for a CPU.
pub const MIN_MAIN_RING: usize = 1 << 20;
/// A sample record besides its stack copy: header, ids, time, registers, kernel frames.
const RECORD_OVERHEAD: usize = 512;

/// The stack copy size of blocking stacks for this call-graph mode (0 for `fp`).
pub fn stack_bytes(call_graph: CallGraph) -> u32 {
    match call_graph {
        CallGraph::Fp => 0,
        CallGraph::Dwarf(n) => n.min(MAX_STACK),
    }
}

/// Data pages of one blocking-stack ring (a power of two, at least two).
pub fn ring_pages(call_graph: CallGraph, page_size: usize) -> usize {
    let bytes =
        (RING_SAMPLES * (stack_bytes(call_graph) as usize + RECORD_OVERHEAD)).max(MIN_MAIN_RING);
    bytes.div_ceil(page_size.max(1)).next_power_of_two().max(2)
}

/// The `context-switches` sampling event. It reports no side-band records (the main event
/// does), and the same sample fields as the main event so one decoder reads both.
pub fn secondary(call_graph: CallGraph, on_exec: bool, page_size: usize) -> Secondary {
    Secondary {
        kind: Kind::ContextSwitches,
        freq: 0,
        call_graph,
        stack_bytes: stack_bytes(call_graph),
        on_exec,
        kernel: true,
        ring_bytes: ring_pages(call_graph, page_size) * page_size,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocking_stacks_copy_at_most_perfs_default() {
        assert_eq!(stack_bytes(CallGraph::Dwarf(24576)), 8192);
        assert_eq!(stack_bytes(CallGraph::Dwarf(4096)), 4096);
        assert_eq!(stack_bytes(CallGraph::Fp), 0);
        assert_eq!(ring_pages(CallGraph::Dwarf(24576), 4096), 512);
        assert_eq!(ring_pages(CallGraph::Fp, 4096), 256);
        use crate::perf::attr::flag;
        let a = secondary(CallGraph::Dwarf(24576), true, 4096).attr();
        assert_eq!(a.sample_stack_user, 8192);
        assert_eq!(a.sample_period_or_freq, 1);
        assert_eq!(a.config, 3);
        assert_eq!(a.flags & flag::FREQ, 0);
        assert_eq!(a.flags & (flag::MMAP | flag::COMM | flag::TASK), 0);
    }
}
