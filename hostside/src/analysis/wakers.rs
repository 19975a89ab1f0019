//! Who woke whom: for each blocked stack of the off-CPU profile, the stacks of the threads
//! whose wakeups ended its waits, weighted by the time those waits lasted.
//!
//! `rec --off-cpu` samples the scheduler's `sched_waking` tracepoint in the waker's context
//! (its stack) and names the woken thread; [`crate::analysis::off_cpu`] gives each blocked
//! wait the wakeup that ended it. The wakers' samples are symbolized like CPU samples (the one
//! pass over the stacks hands this profile only the wakeups that ended a wait) and paired
//! here with the blocked stacks they ended. Samples are told apart by their thread and time, which
//! name one record of the file.

use std::collections::HashMap;

use crate::analysis::cpu::CpuProfile;
use crate::analysis::off_cpu::{Blocked, WakerKey};

/// The header's names of wakeup events, as rec records them.
pub const WAKEUP_EVENTS: [&str; 2] = ["sched:sched_waking", "sched:sched_wakeup"];

/// One blocked stack and one waker stack that ended its waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WakePair {
    /// Index into the off-CPU profile's stacks.
    pub blocked: u32,
    /// Index into [`Wakers::profile`]'s stacks.
    pub waker: u32,
    /// Nanoseconds of the waits these wakeups ended.
    pub ns: u64,
    /// How many wakeups.
    pub count: u64,
}

/// Who woke whom in a recording.
pub struct Wakers {
    /// The wakeup event's name (`sched:sched_waking`).
    pub event: String,
    /// The wakers' stacks; counts are nanoseconds of the waits they ended.
    pub profile: CpuProfile,
    /// Blocked stack and waker stack pairs, most time first.
    pub pairs: Vec<WakePair>,
    /// Blocked time whose wakeup is known.
    pub woken_ns: u64,
    /// Blocked time with no wakeup recorded.
    pub unwoken_ns: u64,
}

/// The index of the recording's wakeup event, if it has one.
pub fn event_index(events: &[String]) -> Option<u32> {
    let i = events
        .iter()
        .position(|e| WAKEUP_EVENTS.contains(&e.as_str()))?;
    (i > 0).then_some(i as u32)
}

/// Each stack's index by (thread, sample time): the samples fed to a profile, found again.
pub fn stacks_by_sample(p: &CpuProfile) -> HashMap<(u32, u64), u32> {
    p.timeline
        .iter()
        .filter_map(|s| Some(((p.stacks.get(s.stack as usize)?.tid, s.time), s.stack)))
        .collect()
}

/// Pairs the wakers' profile (the wakeups that ended a blocked wait, weighted by the wait,
/// see `OffCpuBuilder::waker_weight`) with the blocked stacks they ended: `wakers` names each
/// wakeup's wait and `blocked_stack` finds a wait's stack in the off-CPU profile.
pub fn pair(
    profile: CpuProfile,
    event: String,
    wakers: &HashMap<WakerKey, (Blocked, u64)>,
    blocked_stack: impl Fn(&Blocked) -> Option<u32>,
    (woken_ns, unwoken_ns): (u64, u64),
) -> Wakers {
    let waker_stack = stacks_by_sample(&profile);
    let mut pairs: HashMap<(u32, u32), (u64, u64)> = HashMap::new();
    for (key, (blocked, ns)) in wakers {
        let (Some(b), Some(&w)) = (
            blocked_stack(blocked),
            waker_stack.get(&(key.tid, key.time)),
        ) else {
            continue;
        };
        let p = pairs.entry((b, w)).or_default();
        p.0 += ns;
        p.1 += 1;
    }
    let mut pairs: Vec<WakePair> = pairs
        .into_iter()
        .map(|((blocked, waker), (ns, count))| WakePair {
            blocked,
            waker,
            ns,
            count,
        })
        .collect();
    pairs.sort_by(|a, b| {
        b.ns.cmp(&a.ns)
            .then(a.blocked.cmp(&b.blocked))
            .then(a.waker.cmp(&b.waker))
    });
    Wakers {
        event,
        profile,
        pairs,
        woken_ns,
        unwoken_ns,
    }
}
