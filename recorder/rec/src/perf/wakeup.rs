//! Who woke whom (`--off-cpu`): the scheduler's `sched_waking` tracepoint (`sched_wakeup` on
//! kernels before 4.3, which lack it), sampled at every hit. The kernel fires it in the
//! waker's context, so the sample's thread, kernel chain and user stack are the waker's; the
//! woken thread's id comes from the tracepoint's own data (its `pid` field, found in the
//! event's `format` file) and is stored as the sample's `addr`.
//!
//! Tracepoints need tracefs (to learn the event's id and layout) and the right to read raw
//! tracepoint data (root or CAP_PERFMON; `perf_event_paranoid` -1 otherwise): where either is
//! missing, rec records no wakeups and `rec --check` says why. A wakeup from an interrupt
//! (a timer ending a sleep) names whatever ran on that CPU when the interrupt came: the
//! kernel chain shows the interrupt, and a waker outside the recorded processes is not seen.

use super::tracepoint::{self, Tracepoint};

/// The tracepoints that fire in the waker's context, preferred first.
const EVENTS: [&str; 2] = ["sched_waking", "sched_wakeup"];

/// Finds the wakeup tracepoint, with the woken thread's `pid` field, or says why there is
/// none.
pub fn find() -> Result<Tracepoint, String> {
    let Some(root) = tracepoint::root() else {
        return Err("tracefs is not mounted or not readable for this user".into());
    };
    let mut why = None;
    for event in EVENTS {
        match tracepoint::find("sched", event, "pid") {
            Ok(tp) if tp.field.size == 4 => return Ok(tp),
            Ok(tp) => why = Some(format!("{}: its pid field is not 4 bytes", tp.name)),
            Err(e) => why = why.or(Some(e)),
        }
    }
    Err(why.unwrap_or_else(|| {
        format!("{root}/events/sched/ has neither sched_waking nor sched_wakeup readable")
    }))
}
