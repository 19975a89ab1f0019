//! System calls (`rec -e syscalls`): the `raw_syscalls:sys_enter` tracepoint sampled at every
//! call with the caller's stack and the call's number, and `raw_syscalls:sys_exit` with only
//! its time and return value. The host pairs them per thread: the exit's stack is its entry's,
//! so exits carry none, and a call costs one stack copy (`--syscall-stack` bytes in `dwarf`
//! mode: the system call wrapper and its callers) and no kernel frames (the entry path, the
//! same for every call).
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

/// Stack bytes copied per call unless `--syscall-stack` says otherwise: the wrapper and the few
/// frames above it that say where a call was made. A program that lists a directory tree
/// (`find /usr`) makes 500,000 calls a second, each copy read, encoded and compressed by rec:
/// on a loaded 2-core machine single runs lost 15% of the calls with 2 KiB copies, 4% with
/// 1 KiB, about 1% with 512 bytes (bench/RESULTS.md has interleaved runs against perf, which
/// loses as many recording the same tracepoints without any stack).
pub const DEFAULT_STACK: u32 = 512;

/// Samples one entry ring holds per CPU: 8,192 at the default copy is an 8 MiB ring (a power of
/// two), 15 ms of a CPU making 500,000 calls a second.
const RING_SAMPLES: usize = 8192;
/// A sample besides its stack copy: header, ids, time, registers.
const RECORD_OVERHEAD: usize = 256;

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
    let entry = base();
    let ring = RING_SAMPLES * (entry.stack_bytes as usize + RECORD_OVERHEAD);
    let pages = ring.div_ceil(page_size.max(1)).next_power_of_two().max(2);
    Ok([
        Secondary {
            tracepoint: Some(enter),
            no_kernel_chain: true,
            ring_bytes: pages * page_size,
            ..entry
        },
        Secondary {
            tracepoint: Some(exit),
            stackless: true,
            ..base()
        },
    ])
}
