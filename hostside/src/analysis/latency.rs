//! Scheduling latency: for each thread of a `rec --off-cpu` recording with wakeups, how long
//! it waited for a CPU after it was due to run, and for its worst wakeups, what ran on that
//! CPU instead.
//!
//! A wakeup's latency runs from when the thread was due to its next switch-in
//! ([`crate::analysis::off_cpu`] pairs them). A thread that slept until a time (it armed a
//! timer just before it blocked, and that timer woke it) was due when the timer was due
//! (`softexpires`), as cyclictest counts, so that a late timer interrupt is part of the
//! latency; any other wakeup is due at the `sched_waking` sample. What ran instead is the
//! recorded thread with the most CPU samples on the woken thread's CPU while it waited, shown
//! in its last one; a wait too short for a sample takes the thread that left that CPU at the
//! switch-in (the scheduler switches the two in one call, so that switch-out lies within
//! [`SAME_SWITCH_NS`] of the switch-in), shown in the stack it left with. A CPU that was idle
//! or ran a process outside the recording has neither, and the wakeup says so.
//!
//! cyclictest reads the clock after it returns to user space, which adds the return from the
//! system call (a few microseconds) to what is measured here. For a thread without real-time
//! priority the kernel may also fire its timer up to the timer slack (50 µs by default)
//! after it was due; both count here as they do for cyclictest.

use std::collections::HashMap;

use crate::analysis::off_cpu::Blocked;

/// One blocked thread's wakeup and its switch-in: the scheduling latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WakeupLatency {
    /// The woken thread's process id.
    pub pid: u32,
    /// The woken thread.
    pub tid: u32,
    /// When the thread was due to run: when the sleep timer it armed before blocking was due,
    /// if that timer woke it, else the wakeup (board clock, ns).
    pub due: u64,
    /// Whether `due` is a timer's expiry.
    pub timer: bool,
    /// When the wakeup was sampled (board clock, ns).
    pub woken: u64,
    /// When the thread entered a CPU after it.
    pub running: u64,
    /// The CPU it entered ([`crate::analysis::off_cpu::UNKNOWN_CPU`] when it never left one: its sleep's timer was
    /// already due when it armed it).
    pub cpu: u32,
}

impl WakeupLatency {
    /// A sleep of thread `(pid, tid)` ended by its timer, due at `due`, without a recorded
    /// wakeup: running again at `running` on `cpu`.
    pub(crate) fn by_timer((pid, tid): (u32, u32), due: u64, running: u64, cpu: u32) -> Self {
        WakeupLatency {
            pid,
            tid,
            due,
            timer: true,
            woken: due,
            running,
            cpu,
        }
    }
}

/// A thread leaving a CPU: who was running there until then, and where its wait is charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchOut {
    /// The CPU it left.
    pub cpu: u32,
    /// When (board clock, ns).
    pub time: u64,
    /// The thread and the sample its stack at that moment is found in.
    pub blocked: Blocked,
}

/// How far apart the switch-out of the thread that ran before and the switch-in of the woken
/// thread may be recorded to count as one context switch. perf stamps both in the same
/// scheduler call, microseconds apart.
pub const SAME_SWITCH_NS: u64 = 100_000;

/// The worst wakeups kept per thread.
pub const WORST_PER_THREAD: usize = 5;

/// One bucket of a latency histogram: wakeups whose latency is below `upto_ns` and at least
/// the previous bucket's bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// Exclusive upper bound, nanoseconds (powers of two times a microsecond).
    pub upto_ns: u64,
    /// Wakeups in it.
    pub count: u64,
}

/// What ran on the CPU while a woken thread waited for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instead {
    /// Its process id.
    pub pid: u32,
    /// Its thread id.
    pub tid: u32,
    /// The time of its last CPU sample on that CPU while the woken thread waited: the stack
    /// it ran in then, found in the CPU profile by thread and time.
    pub sample: Option<u64>,
    /// Its stack when it left the CPU, as an index into the off-CPU profile's stacks (none
    /// when the thread had never been sampled): shown when no CPU sample fell in the wait.
    pub stack: Option<u32>,
}

/// One of a thread's worst wakeups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Worst {
    /// When the wakeup was sampled (board clock, ns).
    pub woken: u64,
    /// When the thread was due (its timer's expiry, or the wakeup).
    pub due: u64,
    /// Whether it was due by a timer.
    pub timer: bool,
    /// Due to switch-in, nanoseconds.
    pub latency_ns: u64,
    /// The CPU the thread then ran on.
    pub cpu: u32,
    /// What ran on it until then, when the recording saw it.
    pub instead: Option<Instead>,
}

/// One thread's wakeup latencies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadLatency {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Wakeups of the thread from a blocked wait.
    pub wakeups: u64,
    /// Of them, those due by a sleep timer.
    pub timer_wakeups: u64,
    /// Mean latency, nanoseconds.
    pub mean_ns: u64,
    /// Median, nanoseconds (the lower of the two middle values).
    pub p50_ns: u64,
    /// 99th percentile (nearest rank), nanoseconds.
    pub p99_ns: u64,
    /// The largest, nanoseconds.
    pub max_ns: u64,
    /// Histogram, from below 1 µs up to the bucket holding the largest.
    pub histogram: Vec<Bucket>,
    /// The worst wakeups, worst first.
    pub worst: Vec<Worst>,
}

/// Every thread's latencies, most wakeups first.
pub type Latencies = Vec<ThreadLatency>;

/// Measures the latencies of `wakeups` and names, for each thread's worst, what ran instead
/// among `on_cpu` ((CPU, time, thread, process) of every CPU sample) or `switch_outs`. `stack_of` finds a switch-out's stack in the off-CPU profile.
pub fn measure(
    wakeups: Vec<WakeupLatency>,
    mut switch_outs: Vec<SwitchOut>,
    mut on_cpu: Vec<(u32, u64, u32, u32)>,
    stack_of: impl Fn(&Blocked) -> Option<u32>,
) -> Latencies {
    switch_outs.sort_unstable_by_key(|s| (s.cpu, s.time, s.blocked));
    on_cpu.sort_unstable();
    let mut by_thread: HashMap<(u32, u32), Vec<WakeupLatency>> = HashMap::new();
    for w in wakeups {
        by_thread.entry((w.pid, w.tid)).or_default().push(w);
    }
    let mut threads: Latencies = by_thread
        .into_iter()
        .map(|((pid, tid), mut ws)| {
            let ns = |w: &WakeupLatency| w.running.saturating_sub(w.due);
            ws.sort_unstable_by_key(|w| (ns(w), w.woken));
            let sorted: Vec<u64> = ws.iter().map(ns).collect();
            let worst = ws
                .iter()
                .rev()
                .take(WORST_PER_THREAD)
                .map(|w| Worst {
                    woken: w.woken,
                    due: w.due,
                    timer: w.timer,
                    latency_ns: ns(w),
                    cpu: w.cpu,
                    instead: sampled_instead(&on_cpu, w).or_else(|| {
                        switched_instead(&switch_outs, w).map(|s| Instead {
                            pid: s.blocked.0,
                            tid: s.blocked.1,
                            sample: None,
                            stack: stack_of(&s.blocked),
                        })
                    }),
                })
                .collect();
            let mut t = summarize(pid, tid, &sorted, worst);
            t.timer_wakeups = ws.iter().filter(|w| w.timer).count() as u64;
            t
        })
        .collect();
    threads.sort_by(|a, b| {
        b.wakeups
            .cmp(&a.wakeups)
            .then(a.pid.cmp(&b.pid))
            .then(a.tid.cmp(&b.tid))
    });
    threads
}

/// The statistics of one thread's latencies, `sorted` ascending (at least one).
fn summarize(pid: u32, tid: u32, sorted: &[u64], worst: Vec<Worst>) -> ThreadLatency {
    let n = sorted.len();
    let rank = |p: usize| sorted[(n * p).div_ceil(100).clamp(1, n) - 1];
    let max_ns = sorted.last().copied().unwrap_or(0);
    let mut histogram = Vec::new();
    let mut upto = 1_000u64;
    let mut i = 0;
    loop {
        let j = sorted.partition_point(|&v| v < upto);
        histogram.push(Bucket {
            upto_ns: upto,
            count: (j - i) as u64,
        });
        i = j;
        if i == n {
            break;
        }
        if upto == u64::MAX {
            // Latencies of u64::MAX (a damaged recording): the last bucket holds them.
            if let Some(last) = histogram.last_mut() {
                last.count += (n - i) as u64;
            }
            break;
        }
        upto = upto.saturating_mul(2);
    }
    ThreadLatency {
        pid,
        tid,
        wakeups: n as u64,
        timer_wakeups: 0,
        mean_ns: (sorted.iter().map(|&v| u128::from(v)).sum::<u128>() / n.max(1) as u128) as u64,
        p50_ns: rank(50),
        p99_ns: rank(99),
        max_ns,
        histogram,
        worst,
    }
}

/// The thread with the most CPU samples on `w`'s CPU while `w`'s thread waited (ties: the
/// one sampled last), with its last sample there.
fn sampled_instead(on_cpu: &[(u32, u64, u32, u32)], w: &WakeupLatency) -> Option<Instead> {
    let lo = on_cpu.partition_point(|&(c, t, _, _)| (c, t) < (w.cpu, w.due));
    let hi = on_cpu.partition_point(|&(c, t, _, _)| (c, t) <= (w.cpu, w.running));
    let during = on_cpu.get(lo..hi)?;
    let mut counts: HashMap<u32, (usize, u64, u32)> = HashMap::new();
    for &(_, t, tid, pid) in during.iter().filter(|s| s.2 != w.tid) {
        let e = counts.entry(tid).or_insert((0, t, pid));
        e.0 += 1;
        e.1 = t;
    }
    let (tid, (_, last, pid)) = counts
        .into_iter()
        .max_by_key(|&(tid, (n, last, _))| (n, last, tid))?;
    Some(Instead {
        pid,
        tid,
        sample: Some(last),
        stack: None,
    })
}

/// The thread that left `w`'s CPU as `w`'s thread entered it.
fn switched_instead<'a>(switch_outs: &'a [SwitchOut], w: &WakeupLatency) -> Option<&'a SwitchOut> {
    let latest = w.running.saturating_add(SAME_SWITCH_NS);
    let end = switch_outs.partition_point(|s| (s.cpu, s.time) <= (w.cpu, latest));
    switch_outs[..end]
        .iter()
        .rev()
        .take_while(|s| s.cpu == w.cpu && s.time.saturating_add(SAME_SWITCH_NS) >= w.running)
        .find(|s| s.blocked.1 != w.tid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::off_cpu::Provider;

    fn wakeup(tid: u32, woken: u64, running: u64, cpu: u32) -> WakeupLatency {
        WakeupLatency {
            pid: 1,
            tid,
            due: woken,
            timer: false,
            woken,
            running,
            cpu,
        }
    }

    fn out(tid: u32, time: u64, cpu: u32) -> SwitchOut {
        SwitchOut {
            cpu,
            time,
            blocked: (1, tid, Provider::Blocking(time - 1)),
        }
    }

    #[test]
    fn percentiles_histogram_and_worst() {
        // 100 wakeups of thread 2: latencies 1..=100 µs.
        let ws = (1..=100u64)
            .map(|k| wakeup(2, k * 10_000_000, k * 10_000_000 + k * 1000, 0))
            .collect();
        let t = &measure(ws, Vec::new(), Vec::new(), |_| None)[0];
        assert_eq!((t.wakeups, t.max_ns), (100, 100_000));
        assert_eq!((t.p50_ns, t.p99_ns), (50_000, 99_000));
        assert_eq!(t.mean_ns, 50_500);
        // Below 1 µs: none; [1, 2) µs: 1; [2, 4): 2; ... [64, 128): 37.
        let counts: Vec<u64> = t.histogram.iter().map(|b| b.count).collect();
        assert_eq!(counts, vec![0, 1, 2, 4, 8, 16, 32, 37]);
        assert_eq!(t.histogram.last().map(|b| b.upto_ns), Some(128_000));
        let worst: Vec<u64> = t.worst.iter().map(|w| w.latency_ns).collect();
        assert_eq!(worst, vec![100_000, 99_000, 98_000, 97_000, 96_000]);
    }

    #[test]
    fn extreme_times_end() {
        let ws = vec![wakeup(2, 0, u64::MAX, u32::MAX), wakeup(2, 5, 6, 0)];
        let t = &measure(
            ws,
            vec![out(9, u64::MAX, 0)],
            vec![(0, u64::MAX, 9, 1)],
            |_| None,
        )[0];
        assert_eq!((t.wakeups, t.max_ns), (2, u64::MAX));
        assert_eq!(t.histogram.iter().map(|b| b.count).sum::<u64>(), 2);
    }

    #[test]
    fn what_ran_instead_is_what_held_that_cpu_while_it_waited() {
        let ws = vec![
            // Thread 2 woken at 1000, entered CPU 1 at 50_000: the hog (thread 9) left CPU 1
            // at 49_990.
            wakeup(2, 1_000, 50_000, 1),
            // Woken at 200_000, entered CPU 0 at 210_000: nothing recorded left CPU 0 then
            // (thread 9's switch-out on CPU 0 is long before).
            wakeup(2, 200_000, 210_000, 0),
        ];
        let outs = vec![
            out(9, 49_990, 1),
            out(8, 49_995, 0),
            out(2, 40_000, 1),
            out(9, 5_000, 0),
        ];
        let t = &measure(ws.clone(), outs.clone(), Vec::new(), |b| Some(b.1 * 10))[0];
        assert_eq!(t.worst.len(), 2);
        assert_eq!(
            t.worst[0].instead,
            Some(Instead {
                pid: 1,
                tid: 9,
                sample: None,
                stack: Some(90)
            })
        );
        // With CPU samples on CPU 1 while thread 2 waited (1_000..50_000): thread 7 twice,
        // thread 9 once; before the wakeup and on CPU 0 they do not count.
        let samples = vec![
            (1, 500, 9, 1),
            (1, 20_000, 7, 3),
            (1, 30_000, 7, 3),
            (1, 40_000, 9, 1),
            (0, 30_000, 9, 1),
        ];
        let t = &measure(ws, outs, samples, |b| Some(b.1 * 10))[0];
        assert_eq!(
            t.worst[0].instead,
            Some(Instead {
                pid: 3,
                tid: 7,
                sample: Some(30_000),
                stack: None
            })
        );
        assert_eq!(t.worst[0].latency_ns, 49_000);
        assert_eq!(t.worst[1].instead, None);
    }
}
