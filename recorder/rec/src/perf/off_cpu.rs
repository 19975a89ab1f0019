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

use super::call_graph::CallGraph;
use super::kind::{Kind, Secondary};

/// Stack bytes copied per blocking stack unless `--off-cpu-stack` says otherwise: a quarter of
/// perf's 8 KiB. A thread blocks in a system call wrapper, so the copy holds the wrapper and
/// its callers' frames, and every context switch copies it: a switch-heavy program switches
/// 200,000 times a second, and at 8 KiB the kernel's copies, rec's reading and compressing
/// them made rec lose a quarter of its blocking stacks where 2 KiB lost none or few
/// (bench/RESULTS.md). 1 KiB already reaches `_start` and `clone3` from the benchmark's pipe
/// reads and the tests' condition-variable, mutex and sleep waits on x86_64.
pub const DEFAULT_STACK: u32 = 2048;

/// Ring bytes per CPU for blocking stacks: room for this many samples, and at least
/// [`MIN_MAIN_RING`]. 2,048 samples at the default 2 KiB copy is an 8 MiB ring: 20 ms of a
/// CPU switching 100,000 times a second, the time rec may wait for a CPU on a busy board.
const RING_SAMPLES: usize = 2048;
/// The smallest ring per CPU for the main event when switches are recorded: a switch-heavy
/// program (100,000 switches a second) writes two 32-byte switch records per switch, 6 MB a
/// second; 1 MiB holds 160 ms of them, for the moments rec waits for a CPU.
pub const MIN_MAIN_RING: usize = 1 << 20;
/// A sample record besides its stack copy: header, ids, time, registers, kernel frames.
const RECORD_OVERHEAD: usize = 512;

/// The stack copy size of blocking stacks for this call-graph mode and `--off-cpu-stack`
/// size (0 for `fp`).
pub fn stack_bytes(call_graph: CallGraph, requested: u32) -> u32 {
    match call_graph {
        CallGraph::Fp => 0,
        CallGraph::Dwarf(_) => requested,
    }
}

/// Data pages of one blocking-stack ring (a power of two, at least two).
pub fn ring_pages(stack_bytes: u32, page_size: usize) -> usize {
    let bytes = (RING_SAMPLES * (stack_bytes as usize + RECORD_OVERHEAD)).max(MIN_MAIN_RING);
    bytes.div_ceil(page_size.max(1)).next_power_of_two().max(2)
}

/// The `context-switches` sampling event, copying `requested` stack bytes in `dwarf` mode. It
/// reports no side-band records (the main event does), and the same sample fields as the main
/// event so one decoder reads both.
pub fn secondary(
    call_graph: CallGraph,
    requested: u32,
    on_exec: bool,
    page_size: usize,
) -> Secondary {
    let stack_bytes = stack_bytes(call_graph, requested);
    Secondary {
        kind: Kind::ContextSwitches,
        freq: 0,
        call_graph,
        stack_bytes,
        on_exec,
        kernel: true,
        ring_bytes: ring_pages(stack_bytes, page_size) * page_size,
        tracepoint: None,
        stackless: false,
        no_kernel_chain: false,
    }
}

/// The wakeup tracepoint, sampled like blocking stacks (the waker's stack, at every wakeup),
/// when this kernel has one (see [`super::wakeup`]).
pub fn waking(
    call_graph: CallGraph,
    requested: u32,
    on_exec: bool,
    page_size: usize,
) -> Option<Secondary> {
    let tp = super::wakeup::find().ok()?;
    Some(Secondary {
        tracepoint: Some(tp),
        ..secondary(call_graph, requested, on_exec, page_size)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocking_stacks_copy_what_off_cpu_stack_asks_for() {
        assert_eq!(
            stack_bytes(CallGraph::Dwarf(24576), DEFAULT_STACK),
            DEFAULT_STACK
        );
        assert_eq!(stack_bytes(CallGraph::Dwarf(4096), 16384), 16384);
        assert_eq!(stack_bytes(CallGraph::Fp, 4096), 0);
        assert_eq!(ring_pages(0, 4096), 256);
        assert_eq!(ring_pages(DEFAULT_STACK, 4096), 2048);
        use crate::perf::attr::flag;
        let a = secondary(CallGraph::Dwarf(24576), 4096, true, 4096).attr();
        assert_eq!(a.sample_stack_user, 4096);
        assert_eq!(a.sample_period_or_freq, 1);
        assert_eq!(a.config, 3);
        assert_eq!(a.flags & flag::FREQ, 0);
        assert_eq!(a.flags & (flag::MMAP | flag::COMM | flag::TASK), 0);
    }
}
