//! System calls (`rec -e syscalls`): the `raw_syscalls:sys_enter` tracepoint sampled at every
//! call with the caller's stack and the call's number, and `raw_syscalls:sys_exit` with only
//! its time and return value. The host pairs them per thread: the exit's stack is its entry's,
//! so exits carry none, and a call costs one stack copy (at most `--off-cpu-stack` bytes in
//! `dwarf` mode: the system call wrapper and its callers).
//!
//! Numbers are the board architecture's own; `hostside` names them from the recording's
//! architecture. Both tracepoints need tracefs and the right to read raw tracepoint data
//! (root or CAP_PERFMON).

use super::call_graph::CallGraph;
use super::kind::Secondary;
use super::off_cpu;
use super::tracepoint;

/// The entry event's name in the recording's header.
pub const ENTER: &str = "raw_syscalls:sys_enter";
/// The exit event's name in the recording's header.
pub const EXIT: &str = "raw_syscalls:sys_exit";

/// The entry and exit events, sampled at every call, or why this kernel cannot give them.
pub fn events(
    call_graph: CallGraph,
    stack_bytes: u32,
    on_exec: bool,
    page_size: usize,
) -> Result<[Secondary; 2], String> {
    let enter = tracepoint::find("raw_syscalls", "sys_enter", "id")?;
    let exit = tracepoint::find("raw_syscalls", "sys_exit", "ret")?;
    debug_assert_eq!((enter.name.as_str(), exit.name.as_str()), (ENTER, EXIT));
    let base = || off_cpu::secondary(call_graph, stack_bytes, on_exec, page_size);
    Ok([
        Secondary {
            tracepoint: Some(enter),
            ..base()
        },
        Secondary {
            tracepoint: Some(exit),
            stackless: true,
            ..base()
        },
    ])
}
