//! Sleep timers (`--off-cpu` with wakeups): the `timer:hrtimer_start` tracepoint, sampled with
//! only its time, thread and the timer's `softexpires` (when it is due, on the monotonic clock
//! the samples are stamped with). A thread that sleeps until a time (`clock_nanosleep`,
//! `nanosleep`, a timed wait) arms such a timer just before it blocks; `hostside report
//! --latency` then measures its wakeup latency from when the timer was due, as cyclictest
//! does, so that a late timer interrupt counts too.

use super::call_graph::CallGraph;
use super::kind::Secondary;
use super::off_cpu;
use super::tracepoint;

/// The event's name in the recording's header.
pub const NAME: &str = "timer:hrtimer_start";

/// The timer event, or why this kernel cannot give it.
pub fn event(on_exec: bool, page_size: usize) -> Result<Secondary, String> {
    let tp = tracepoint::find("timer", "hrtimer_start", "softexpires")?;
    debug_assert_eq!(tp.name, NAME);
    Ok(Secondary {
        tracepoint: Some(tp),
        stackless: true,
        ..off_cpu::secondary(CallGraph::Fp, 0, on_exec, page_size)
    })
}
