//! Off-CPU time: from each thread's context switches, how long it was away from a CPU, and
//! which recorded stack each wait is charged to.
//!
//! A wait runs from a switch-out to the thread's next switch-in. Its stack is, in `exact`
//! recordings, the `context-switches` sample the kernel took as the thread left the CPU (at
//! most [`MATCH_WINDOW_NS`] before the switch-out, after the previous switch-in); otherwise
//! (`approximate` recordings, or that sample lost) the thread's last CPU sample before the
//! switch-out, which shows where the thread ran last, not where it blocked. The report says
//! how much time each way covers.
//!
//! Where the recording has wakeups (`sched:sched_waking` samples: the waker's stack, naming
//! the woken thread), each blocked wait is also given the wakeup that ended it: the last one
//! of that thread between its switch-out and its switch-in.
//!
//! Where the recording has wakeups, the same pass measures each wakeup's scheduling latency
//! (from the wakeup to the woken thread's switch-in) and keeps every switch-out with its CPU,
//! so that [`crate::analysis::latency`] can name what ran instead.
//!
//! Events are collected per thread and sorted, because the kernel's per-CPU rings are drained
//! one after another: a thread that left one CPU and entered another can appear in the file
//! in either order. Memory is 16 bytes per event; stacks are not held, only the time of the
//! sample that names them (see [`Assignment`]).

use std::collections::HashMap;

use crate::analysis::latency::{SwitchOut, WakeupLatency};
use crate::filter::Window;

/// How far before a switch-out its context-switch sample may be taken. The kernel takes both
/// in the same scheduler call, microseconds apart.
pub const MATCH_WINDOW_NS: u64 = 2_000_000;

/// One thing that happened to a thread, as far as off-CPU analysis cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Event {
    /// The thread was created (a FORK record).
    Start,
    /// A CPU sample of the thread.
    OnCpu,
    /// A context-switch sample: the stack the thread is leaving the CPU with.
    Blocking,
    /// It left its CPU; `true` when still runnable (preempted).
    Out(bool),
    /// It entered a CPU.
    In,
    /// It ended (an EXIT record).
    End,
}

/// Which stack a wait is charged to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Provider {
    /// The context-switch sample of this thread at this time (exact).
    Blocking(u64),
    /// The CPU sample of this thread at this time (approximate).
    OnCpu(u64),
    /// No sample at all: the thread had not been sampled before it waited.
    Unknown,
}

/// One wakeup sample: the waker's process, thread and the sample's time (which names the
/// sample in the recording).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WakerKey {
    /// The waker's process id.
    pub pid: u32,
    /// The waker's thread id.
    pub tid: u32,
    /// When it woke the thread.
    pub time: u64,
}

/// A wait's stack: the thread and the sample its time is charged to.
pub type Blocked = (u32, u32, Provider);

/// A CPU for events whose CPU is not known (tests, and records that carry none).
pub const UNKNOWN_CPU: u32 = u32::MAX;

/// Per-thread times, nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadTimes {
    /// From the thread's first event (its creation, or the first record about it) to its end
    /// (its exit, or the end of the recording).
    pub wall_ns: u64,
    /// Off-CPU while waiting (switched out while not runnable: sleeping, blocked on a lock,
    /// on I/O).
    pub blocked_ns: u64,
    /// Off-CPU while runnable (preempted, waiting for a CPU).
    pub runnable_ns: u64,
}

impl ThreadTimes {
    /// All off-CPU time.
    pub fn off_cpu_ns(&self) -> u64 {
        self.blocked_ns + self.runnable_ns
    }

    /// Time on a CPU: the rest of the wall time.
    pub fn on_cpu_ns(&self) -> u64 {
        self.wall_ns.saturating_sub(self.off_cpu_ns())
    }
}

/// Off-CPU time charged to stacks, and how well the stacks are known.
#[derive(Debug, Default)]
pub struct Assignment {
    /// Nanoseconds per (pid, tid, provider).
    pub charged: HashMap<(u32, u32, Provider), u64>,
    /// Per-thread totals, keyed by (pid, tid).
    pub threads: HashMap<(u32, u32), ThreadTimes>,
    /// Off-CPU time whose stack came from a context-switch sample.
    pub exact_ns: u64,
    /// Off-CPU time charged to the thread's last CPU sample instead.
    pub approximate_ns: u64,
    /// Off-CPU time of threads never sampled before they waited.
    pub unknown_ns: u64,
    /// The wakeup that ended each blocked wait, with the wait's stack and length (only
    /// where the recording has wakeups).
    pub wakers: HashMap<WakerKey, (Blocked, u64)>,
    /// Blocked time whose wakeup is known.
    pub woken_ns: u64,
    /// Blocked time with no wakeup recorded (woken from outside the recorded processes, or
    /// from an interrupt while none of them ran; or the wakeup was lost).
    pub unwoken_ns: u64,
    /// Every wait, cut to the window: its stack, start and end (board clock, ns, end
    /// exclusive) and whether the thread was preempted (runnable) rather than blocked, in no
    /// particular order. What time-sliced views (the HTML report's timeline selection) add
    /// up, and what diffs compare wait by wait; 40 bytes per wait.
    pub waits: Vec<(Blocked, u64, u64, bool)>,
    /// Each blocked wait's wakeup and switch-in, for the waits in the window (only where the
    /// recording has wakeups).
    pub latencies: Vec<WakeupLatency>,
    /// Every switch-out (only where the recording has wakeups), in no particular order.
    pub switch_outs: Vec<SwitchOut>,
    /// Every CPU sample as (CPU, time, thread, process) (only where the recording has
    /// wakeups): what ran on a CPU while a woken thread waited for it.
    pub on_cpu: Vec<(u32, u64, u32, u32)>,
}

/// One event of a thread: its time, what happened and the CPU it happened on.
type TimedEvent = (u64, Event, u32);

/// Collects events per thread; [`Timeline::assign`] turns them into waits.
#[derive(Debug, Default, Clone)]
pub struct Timeline {
    threads: HashMap<(u32, u32), Vec<TimedEvent>>,
    /// Wakeups by the woken thread's id.
    wakeups: HashMap<u32, Vec<WakerKey>>,
    /// Timers armed, by the arming thread's id: (when, when due).
    timers: HashMap<u32, Vec<(u64, u64)>>,
}

impl Timeline {
    /// Adds one event of thread `tid` of process `pid` at `time`, on no known CPU.
    pub fn push(&mut self, pid: u32, tid: u32, time: u64, event: Event) {
        self.push_on(pid, tid, time, UNKNOWN_CPU, event);
    }

    /// Adds one event of thread `tid` of process `pid` at `time` on `cpu`.
    pub fn push_on(&mut self, pid: u32, tid: u32, time: u64, cpu: u32, event: Event) {
        self.threads
            .entry((pid, tid))
            .or_default()
            .push((time, event, cpu));
    }

    /// Adds a timer armed by thread `tid` at `time`, due at `due` (a sleep's timer, when it
    /// is the last one armed before the thread blocks).
    pub fn timer(&mut self, tid: u32, time: u64, due: u64) {
        self.timers.entry(tid).or_default().push((time, due));
    }

    /// Adds a wakeup of thread `wakee` by the sample `waker`.
    pub fn wakeup(&mut self, waker: WakerKey, wakee: u32) {
        self.wakeups.entry(wakee).or_default().push(waker);
    }

    /// Whether any switch was seen.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// Measures every wait and charges it to a stack. `end` is when the recording ended: a
    /// thread still waiting then waited until it.
    pub fn assign(self, end: u64) -> Assignment {
        self.assign_within(end, &Window::default())
    }

    /// [`Timeline::assign`] counting only what lies inside `window`: each wait and each
    /// thread's wall time is cut to it (a thread asleep through the whole window waited the
    /// window's length), threads it does not select or that did not exist in it are left
    /// out. Which stack a wait is charged to does not change: a wait that began before the
    /// window keeps the stack it began with.
    pub fn assign_within(self, end: u64, window: &Window) -> Assignment {
        let mut a = Assignment::default();
        let Timeline {
            threads,
            mut wakeups,
            mut timers,
        } = self;
        let any_wakeups = !wakeups.is_empty();
        // Thread by thread in a fixed order: what is filled here (waits, wakers, latencies)
        // must not depend on a hash map's order.
        let mut threads: Vec<_> = threads.into_iter().collect();
        threads.sort_unstable_by_key(|(task, _)| *task);
        for ((pid, tid), mut events) in threads {
            if !window.keeps_task(pid, tid) {
                continue;
            }
            let mut woken_by = wakeups.remove(&tid).unwrap_or_default();
            woken_by.sort_unstable_by_key(|w| (w.time, w.tid));
            let mut armed = timers.remove(&tid).unwrap_or_default();
            armed.sort_unstable();
            // Samples sort before the switch at the same instant (the enum's order).
            events.sort_unstable();
            let mut times = ThreadTimes::default();
            let first = events.first().map_or(end, |e| e.0);
            let mut last_in: Option<u64> = None;
            let mut last_blocking: Option<u64> = None;
            let mut last_on_cpu: Option<u64> = None;
            // The switch-out of the wait in progress: when, whether preempted, its stack, and
            // the switch-in before it.
            let mut open: Option<(u64, bool, Provider, Option<u64>)> = None;
            let mut ended: Option<u64> = None;
            for &(time, ev, cpu) in &events {
                match ev {
                    Event::Start => {}
                    Event::OnCpu => {
                        last_on_cpu = Some(time);
                        if any_wakeups {
                            a.on_cpu.push((cpu, time, tid, pid));
                        }
                    }
                    Event::Blocking => last_blocking = Some(time),
                    Event::Out(preempt) => {
                        let fresh =
                            |t: u64| time - t <= MATCH_WINDOW_NS && last_in.is_none_or(|i| t >= i);
                        let provider = match (last_blocking.filter(|&t| fresh(t)), last_on_cpu) {
                            (Some(t), _) => Provider::Blocking(t),
                            (None, Some(t)) => Provider::OnCpu(t),
                            (None, None) => Provider::Unknown,
                        };
                        open = Some((time, preempt, provider, last_in));
                        if any_wakeups {
                            a.switch_outs.push(SwitchOut {
                                cpu,
                                time,
                                blocked: (pid, tid, provider),
                            });
                        }
                    }
                    Event::In => {
                        last_in = Some(time);
                        if let Some((out, preempt, provider, ran_from)) = open.take() {
                            charge(
                                &mut a,
                                &mut times,
                                (pid, tid, provider),
                                window,
                                (out, time),
                                preempt,
                            );
                            let ns = window.overlap(out, time);
                            if !preempt && any_wakeups && ns > 0 {
                                // The last wakeup before the switch-in, if it came after
                                // the switch-out.
                                let i = woken_by.partition_point(|w| w.time <= time);
                                match i.checked_sub(1).map(|i| woken_by[i]) {
                                    Some(w) if w.time >= out => {
                                        a.wakers.insert(w, ((pid, tid, provider), ns));
                                        a.woken_ns += ns;
                                        let due = sleep_timer(&armed, ran_from, out)
                                            .filter(|&due| due <= w.time);
                                        a.latencies.push(WakeupLatency {
                                            pid,
                                            tid,
                                            due: due.unwrap_or(w.time),
                                            timer: due.is_some(),
                                            woken: w.time,
                                            running: time,
                                            cpu,
                                        });
                                    }
                                    _ => {
                                        a.unwoken_ns += ns;
                                        // Woken while no recorded thread ran (an idle CPU,
                                        // another process): a sleep whose timer was due by
                                        // the switch-in was ended by it.
                                        let due = sleep_timer(&armed, ran_from, out)
                                            .filter(|&due| due >= out && due <= time);
                                        if let Some(due) = due {
                                            a.latencies.push(WakeupLatency::by_timer(
                                                (pid, tid),
                                                due,
                                                time,
                                                cpu,
                                            ));
                                        }
                                    }
                                }
                            }
                        }
                    }
                    Event::End => ended = Some(time),
                }
            }
            // A sleep's timer armed when it was already due: the thread did not block, and
            // was running that late (cyclictest counts such a cycle, from its clock read).
            for &(time, due) in armed.iter().filter(|&&(t, d)| d < t) {
                if window.keeps_time(time) {
                    let late = WakeupLatency::by_timer((pid, tid), due, time, UNKNOWN_CPU);
                    a.latencies.push(late);
                }
            }
            let stop = ended.unwrap_or(end).max(first);
            // Still away when the recording ended (not after the thread's exit: a dead
            // thread's last switch-out starts no wait).
            if let (Some((out, preempt, provider, _)), None) = (open, ended) {
                if stop > out {
                    charge(
                        &mut a,
                        &mut times,
                        (pid, tid, provider),
                        window,
                        (out, stop),
                        preempt,
                    );
                }
            }
            times.wall_ns = window.overlap(first, stop);
            if times.wall_ns > 0 || !window.is_active() {
                a.threads.insert((pid, tid), times);
            }
        }
        a
    }
}

/// When the last timer that `armed` (sorted) holds between the switch-in `ran_from` and the
/// switch-out `out` was due: a sleep arms its timer just before it blocks.
fn sleep_timer(armed: &[(u64, u64)], ran_from: Option<u64>, out: u64) -> Option<u64> {
    let end = armed.partition_point(|&(t, _)| t <= out);
    let &(time, due) = armed[..end].last()?;
    ran_from.is_none_or(|i| time >= i).then_some(due)
}

/// Charges the wait from `out` to `back`, cut to `window`, to its stack.
fn charge(
    a: &mut Assignment,
    times: &mut ThreadTimes,
    (pid, tid, provider): Blocked,
    window: &Window,
    (out, back): (u64, u64),
    preempt: bool,
) {
    let ns = window.overlap(out, back);
    // A wait outside the window: nothing to charge (and no empty stack to show).
    if ns == 0 {
        return;
    }
    a.waits.push((
        (pid, tid, provider),
        out.max(window.lo),
        back.min(window.hi),
        preempt,
    ));
    if preempt {
        times.runnable_ns += ns;
    } else {
        times.blocked_ns += ns;
    }
    match provider {
        Provider::Blocking(_) => a.exact_ns += ns,
        Provider::OnCpu(_) => a.approximate_ns += ns,
        Provider::Unknown => a.unknown_ns += ns,
    }
    *a.charged.entry((pid, tid, provider)).or_default() += ns;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_are_charged_to_the_blocking_sample_taken_with_the_switch() {
        let mut t = Timeline::default();
        // Thread 2: starts at 100, runs, blocks at 1000 for 3000 ns, blocks at 5000 until
        // the end (9000). The first switch-out has its sample; the second's was lost.
        t.push(1, 2, 100, Event::Start);
        t.push(1, 2, 400, Event::OnCpu);
        // The rings hand events over out of order.
        t.push(1, 2, 4000, Event::In);
        t.push(1, 2, 1000, Event::Out(false));
        t.push(1, 2, 999, Event::Blocking);
        t.push(1, 2, 4500, Event::OnCpu);
        t.push(1, 2, 5000, Event::Out(false));
        let a = t.assign(9000);
        assert_eq!(a.charged[&(1, 2, Provider::Blocking(999))], 3000);
        assert_eq!(a.charged[&(1, 2, Provider::OnCpu(4500))], 4000);
        assert_eq!(
            (a.exact_ns, a.approximate_ns, a.unknown_ns),
            (3000, 4000, 0)
        );
        let mut waits = a.waits.clone();
        waits.sort_unstable();
        assert_eq!(
            waits,
            vec![
                ((1, 2, Provider::Blocking(999)), 1000, 4000, false),
                ((1, 2, Provider::OnCpu(4500)), 5000, 9000, false)
            ]
        );
        let th = a.threads[&(1, 2)];
        assert_eq!(th.wall_ns, 8900);
        assert_eq!(th.blocked_ns, 7000);
        assert_eq!(th.on_cpu_ns(), 1900);
    }

    #[test]
    fn preemption_is_runnable_time_and_an_exit_ends_the_thread() {
        let mut t = Timeline::default();
        t.push(1, 3, 0, Event::Out(true));
        t.push(1, 3, 10, Event::In);
        t.push(1, 3, 50, Event::End);
        // The dead thread's last switch-out is no wait.
        t.push(1, 3, 60, Event::Out(false));
        let a = t.assign(1000);
        let th = a.threads[&(1, 3)];
        assert_eq!((th.runnable_ns, th.blocked_ns, th.wall_ns), (10, 0, 50));
        assert_eq!(a.charged[&(1, 3, Provider::Unknown)], 10);
        assert_eq!(a.unknown_ns, 10);
    }

    #[test]
    fn each_blocked_wait_is_given_the_wakeup_that_ended_it() {
        let mut t = Timeline::default();
        let waker = |time| WakerKey {
            pid: 1,
            tid: 9,
            time,
        };
        // Thread 2 blocks 100..200 and 300..400, is preempted 500..600 and blocks 700..800.
        for (out, inn, preempt) in [(100, 200, false), (300, 400, false), (500, 600, true)] {
            t.push(1, 2, out - 1, Event::Blocking);
            t.push(1, 2, out, Event::Out(preempt));
            t.push(1, 2, inn, Event::In);
        }
        t.push(1, 2, 700, Event::Out(false));
        t.push(1, 2, 800, Event::In);
        // Two wakeups in the first wait (the second one ended it), one in the second, one
        // while it ran, one in the preemption; none in the last wait. Another thread's wakeup
        // is not thread 2's.
        for time in [120, 190, 350, 450, 550] {
            t.wakeup(waker(time), 2);
        }
        t.wakeup(waker(750), 3);
        let a = t.assign(1000);
        assert_eq!(a.wakers.len(), 2, "{:?}", a.wakers);
        assert_eq!(a.wakers[&waker(190)], ((1, 2, Provider::Blocking(99)), 100));
        assert_eq!(
            a.wakers[&waker(350)],
            ((1, 2, Provider::Blocking(299)), 100)
        );
        assert_eq!((a.woken_ns, a.unwoken_ns), (200, 100));
    }

    #[test]
    fn a_wakeup_is_due_when_the_sleep_timer_armed_before_the_wait_was() {
        let mut t = Timeline::default();
        let waker = |time| WakerKey {
            pid: 1,
            tid: 9,
            time,
        };
        // Thread 2 sleeps 1000..2100 on a timer due at 2000 (armed at 900), woken at 2050 on
        // CPU 1; then waits 3000..4100 with a timeout due at 9000 (armed at 2950) but is woken
        // at 4000, before it: due at the wakeup. A timer armed during an earlier run (at
        // 500, before the switch-in at 600) is not this wait's.
        t.push_on(1, 2, 600, 0, Event::In);
        t.timer(2, 500, 1500);
        t.timer(2, 900, 2000);
        t.push_on(1, 2, 1000, 0, Event::Out(false));
        t.wakeup(waker(2050), 2);
        t.push_on(1, 2, 2100, 1, Event::In);
        t.timer(2, 2950, 9000);
        t.push_on(1, 2, 3000, 1, Event::Out(false));
        t.wakeup(waker(4000), 2);
        t.push_on(1, 2, 4100, 0, Event::In);
        // A sleep whose wakeup was not recorded (the CPU ran another process): due at 6000,
        // running at 6300. A wait whose timer was not yet due when it ran again is no sleep.
        t.timer(2, 4900, 6000);
        t.push_on(1, 2, 5000, 0, Event::Out(false));
        t.push_on(1, 2, 6300, 0, Event::In);
        t.timer(2, 6900, 9999);
        t.push_on(1, 2, 7000, 0, Event::Out(false));
        t.push_on(1, 2, 7100, 0, Event::In);
        // Already late when it armed its next sleep's timer (due 7150, armed at 7400): no wait.
        t.timer(2, 7400, 7150);
        let mut a = t.assign(10_000);
        a.latencies.sort_unstable_by_key(|l| l.woken);
        let got: Vec<(u64, bool, u64, u32)> = a
            .latencies
            .iter()
            .map(|l| (l.due, l.timer, l.running - l.due, l.cpu))
            .collect();
        assert_eq!(
            got,
            vec![
                (2000, true, 100, 1),
                (4000, false, 100, 0),
                (6000, true, 300, 0),
                (7150, true, 250, UNKNOWN_CPU)
            ]
        );
        assert_eq!(a.switch_outs.len(), 4);
        assert!(a.switch_outs.iter().all(|s| s.blocked.1 == 2));
        assert_eq!(sleep_timer(&[(500, 1500)], Some(600), 1000), None);
    }

    #[test]
    fn a_blocking_sample_from_an_earlier_run_is_not_reused() {
        let mut t = Timeline::default();
        t.push(1, 4, 10, Event::Blocking);
        t.push(1, 4, 11, Event::Out(false));
        t.push(1, 4, 20, Event::In);
        // This switch-out's own sample is missing: the one at 10 belongs to the first wait.
        t.push(1, 4, 30, Event::Out(false));
        t.push(1, 4, 40, Event::In);
        let a = t.assign(100);
        assert_eq!(a.charged[&(1, 4, Provider::Blocking(10))], 9);
        assert_eq!(a.charged[&(1, 4, Provider::Unknown)], 10);
        // Far from its switch-out, a sample is not taken for its stack either.
        let mut t = Timeline::default();
        t.push(1, 5, 0, Event::Blocking);
        t.push(1, 5, MATCH_WINDOW_NS + 1, Event::Out(false));
        t.push(1, 5, MATCH_WINDOW_NS + 2, Event::In);
        assert_eq!(t.assign(u64::MAX).charged[&(1, 5, Provider::Unknown)], 1);
    }

    #[test]
    fn a_window_cuts_waits_and_wall_time() {
        let mut t = Timeline::default();
        // Thread 2 blocks from 100 to 900; thread 3 runs from 0 to 1000 without waiting.
        t.push(1, 2, 0, Event::Start);
        t.push(1, 2, 50, Event::OnCpu);
        t.push(1, 2, 100, Event::Out(false));
        t.push(1, 2, 900, Event::In);
        t.push(1, 3, 0, Event::Start);
        let w = crate::filter::Window {
            lo: 300,
            hi: 500,
            ..Default::default()
        };
        let a = t.assign_within(1000, &w);
        assert_eq!(a.charged[&(1, 2, Provider::OnCpu(50))], 200);
        let th = a.threads[&(1, 2)];
        assert_eq!((th.wall_ns, th.blocked_ns), (200, 200));
        assert_eq!(
            a.waits,
            vec![((1, 2, Provider::OnCpu(50)), 300, 500, false)]
        );
        assert_eq!(a.threads[&(1, 3)].wall_ns, 200);
        assert_eq!(a.approximate_ns, 200);
    }
}
