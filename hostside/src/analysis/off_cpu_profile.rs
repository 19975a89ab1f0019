//! The off-CPU profile of a recording made with `rec --off-cpu`: every wait measured from the
//! context switches ([`crate::analysis::off_cpu`]), charged to its stack, and the stacks
//! symbolized like CPU samples, weighted by the nanoseconds waited.
//!
//! The switch and sample times come from the recording's metadata pass ([`OffCpuEvents`], kept
//! by the pipeline), which measures the waits before the pass over the stacks
//! ([`OffCpuBuilder`]); that pass, shared with every other profile, hands it only the samples
//! that name a wait, each once with the sum of its waits as its weight. Memory is the
//! per-thread event lists, not the stacks.

use crossprof_format::{Record, Sample};

use crate::analysis::cpu::{Accumulator, CpuProfile, Unwound};
use crate::analysis::latency::{self, Latencies};
use crate::analysis::off_cpu::{
    Assignment, Blocked, Event, Provider, ThreadTimes, Timeline, WakerKey,
};
use crate::analysis::wakers::{self, Wakers};
use crate::filter::Window;
use crate::processes::Processes;
use crate::resolve::Resolver;
use crate::unwinding::StackUnwinder;

/// The header's name of the event whose samples are blocking stacks.
pub const BLOCKING_EVENT: &str = "context-switches";

/// The header's name of the event whose samples are timers armed, due at their `addr`.
pub const TIMER_EVENT: &str = "timer:hrtimer_start";

/// One thread's wall time, split.
pub struct OffCpuThread {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Thread name (the last one seen).
    pub comm: String,
    /// Its times.
    pub times: ThreadTimes,
}

/// One wait, cut to the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    /// Thread id.
    pub tid: u32,
    /// Process id.
    pub pid: u32,
    /// When it began (board clock, ns).
    pub from: u64,
    /// When it ended (board clock, ns, exclusive).
    pub to: u64,
    /// Its stack: an index into the profile's stacks.
    pub stack: u32,
    /// Whether the thread was preempted (runnable, waiting for a CPU) rather than blocked.
    pub preempt: bool,
}

/// The whole off-CPU analysis.
pub struct OffCpuProfile {
    /// Stacks and functions; every count is nanoseconds off-CPU.
    pub profile: CpuProfile,
    /// All off-CPU time, nanoseconds.
    pub wait_ns: u64,
    /// How the recording captured stacks: `exact` or `approximate` (the header's word).
    pub stacks: String,
    /// Off-CPU time charged to the stack the thread blocked in.
    pub exact_ns: u64,
    /// Off-CPU time charged to the thread's last CPU sample (approximate).
    pub approximate_ns: u64,
    /// Off-CPU time of threads with no sample before they waited (no stack).
    pub unknown_ns: u64,
    /// Threads by off-CPU time, most first.
    pub threads: Vec<OffCpuThread>,
    /// Who woke the blocked threads, where the recording has wakeups.
    pub wakers: Option<Wakers>,
    /// Every wait with its stack, by start time: what views cut in time slices add up.
    pub waits: Vec<Wait>,
    /// Each thread's scheduling latency after its wakeups, where the recording has wakeups.
    pub latency: Option<Latencies>,
}

impl OffCpuProfile {
    /// The profile with the name its stack diagnostics carry (see
    /// `Loaded::context`, which lists each profile's stack diagnostics).
    pub fn named(&self) -> (&'static str, &CpuProfile) {
        ("off-cpu", &self.profile)
    }
}

/// What the off-CPU analysis reads of the recording besides the stacks: every switch, sample
/// time, blocking sample and wakeup per thread, gathered as a metadata pass goes by
/// ([`OffCpuEvents::observe`]), so that the analysis reads the file once more, for the
/// stacks, instead of twice. About 24 bytes per switch and per sample.
#[derive(Debug, Clone)]
pub struct OffCpuEvents {
    timeline: Timeline,
    /// The latest `End` record's time (at least the start given to [`OffCpuEvents::new`]).
    end: u64,
    /// The event index of the blocking stacks (`context-switches`), if sampled.
    blocking: Option<u32>,
    /// The event index of the wakeups, if sampled.
    waking: Option<u32>,
    /// The event index of the armed timers, if sampled.
    timers: Option<u32>,
}

impl OffCpuEvents {
    /// Empty, for a recording with `header`, whose duration so far is `duration_ns`.
    pub fn new(header: &crossprof_format::Header, duration_ns: u64) -> OffCpuEvents {
        OffCpuEvents {
            timeline: Timeline::default(),
            end: header.start_clock_ns.saturating_add(duration_ns),
            blocking: header
                .events
                .iter()
                .position(|e| e == BLOCKING_EVENT)
                .map(|i| i as u32),
            waking: wakers::event_index(&header.events),
            timers: header
                .events
                .iter()
                .position(|e| e == TIMER_EVENT)
                .map(|i| i as u32),
        }
    }

    /// Keeps what `r` tells of a thread's switches, samples and wakeups.
    pub fn observe(&mut self, r: &Record) {
        let (blocking, waking, timers) = (self.blocking, self.waking, self.timers);
        match r {
            Record::Switch(s) => {
                let ev = if s.out {
                    Event::Out(s.preempt)
                } else {
                    Event::In
                };
                self.timeline.push_on(s.pid, s.tid, s.time, s.cpu, ev);
            }
            Record::Sample(s) => self
                .timeline
                .push_on(s.pid, s.tid, s.time, s.cpu, Event::OnCpu),
            Record::EventSample(e) if Some(e.event) == blocking && e.event != 0 => {
                let s = &e.sample;
                self.timeline
                    .push_on(s.pid, s.tid, s.time, s.cpu, Event::Blocking)
            }
            // A wakeup: the sample is the waker's, its `addr` the woken thread.
            Record::EventSample(e) if Some(e.event) == waking => self.timeline.wakeup(
                WakerKey {
                    pid: e.sample.pid,
                    tid: e.sample.tid,
                    time: e.sample.time,
                },
                e.sample.addr as u32,
            ),
            // A timer armed: the sample's `addr` is when it is due.
            Record::EventSample(e) if Some(e.event) == timers => {
                self.timeline
                    .timer(e.sample.tid, e.sample.time, e.sample.addr)
            }
            Record::Fork(t) => self.timeline.push(t.pid, t.tid, t.time, Event::Start),
            Record::Exit(t) => self.timeline.push(t.pid, t.tid, t.time, Event::End),
            Record::End(e) => self.end = self.end.max(e.time),
            _ => {}
        }
    }
}

/// The off-CPU analysis while the pass over the stacks runs. Made from the metadata pass's
/// [`OffCpuEvents`] before it, so that it knows which samples name a wait and with what
/// weight ([`OffCpuBuilder::wait_weight`]) and which wakeups ended one
/// ([`OffCpuBuilder::waker_weight`]); the pass pushes those samples' stacks into
/// [`OffCpuBuilder::waits`] and [`OffCpuBuilder::wakers`].
pub struct OffCpuBuilder {
    assignment: Assignment,
    end: u64,
    blocking: Option<u32>,
    waking: Option<u32>,
    stacks: String,
    waker_event: String,
    /// The blocked stacks, weighted by the nanoseconds waited.
    pub waits: Accumulator,
    /// The wakers' stacks, weighted by the waits they ended; when the recording has wakeups.
    pub wakers: Option<Accumulator>,
}

impl OffCpuBuilder {
    /// Measures every wait of `events`, cut to `window`, in a recording with `header` that
    /// lasted `duration_ns`.
    pub fn new(
        events: OffCpuEvents,
        header: &crossprof_format::Header,
        duration_ns: u64,
        window: &Window,
    ) -> OffCpuBuilder {
        let OffCpuEvents {
            timeline,
            end,
            blocking,
            waking,
            ..
        } = events;
        let end = end.max(header.start_clock_ns.saturating_add(duration_ns));
        OffCpuBuilder {
            assignment: timeline.assign_within(end, window),
            end,
            blocking,
            waking,
            stacks: header.off_cpu.clone(),
            waker_event: waking
                .and_then(|i| header.events.get(i as usize).cloned())
                .unwrap_or_default(),
            waits: Accumulator::new(true),
            wakers: waking.map(|_| Accumulator::new(true)),
        }
    }

    /// The nanoseconds of waits charged to this sample, if any: a CPU sample
    /// (`event` `None`) or a blocking one. Each sample is charged once.
    pub fn wait_weight(&mut self, s: &Sample, event: Option<u32>) -> Option<u64> {
        let provider = match event {
            None => Provider::OnCpu(s.time),
            Some(e) if Some(e) == self.blocking && e != 0 => Provider::Blocking(s.time),
            Some(_) => return None,
        };
        self.assignment.charged.remove(&(s.pid, s.tid, provider))
    }

    /// The nanoseconds of the wait this wakeup sample ended, if it ended one.
    pub fn waker_weight(&self, s: &Sample, event: Option<u32>) -> Option<u64> {
        if event.is_none() || event != self.waking {
            return None;
        }
        let key = WakerKey {
            pid: s.pid,
            tid: s.tid,
            time: s.time,
        };
        self.assignment.wakers.get(&key).map(|&(_, ns)| ns)
    }

    /// The profile, once the pass is over: waits of threads never sampled before have no
    /// stack and are counted under their thread only.
    pub fn finish(
        mut self,
        processes: &Processes,
        resolver: &Resolver,
        unwinder: &mut StackUnwinder<'_>,
    ) -> OffCpuProfile {
        let end = self.end;
        let mut unknown: Vec<_> = self
            .assignment
            .charged
            .drain()
            .filter(|((_, _, p), _)| *p == Provider::Unknown)
            .collect();
        unknown.sort_unstable();
        for ((pid, tid, _), ns) in unknown {
            let s = Sample {
                time: end,
                pid,
                tid,
                period: ns,
                ..Default::default()
            };
            self.waits.push(Unwound::of(s, processes, unwinder), ns);
        }
        let profile = self.waits.finish(processes, resolver, unwinder);
        let assignment = self.assignment;
        // A wait's stack is the sample fed for it: its thread and time.
        let blocked = wakers::stacks_by_sample(&profile);
        let stack_of = |&(_, tid, provider): &Blocked| {
            let time = match provider {
                Provider::Blocking(t) | Provider::OnCpu(t) => t,
                Provider::Unknown => end,
            };
            blocked.get(&(tid, time)).copied()
        };
        let mut waits: Vec<Wait> = assignment
            .waits
            .iter()
            .filter_map(|(b, from, to, preempt)| {
                Some(Wait {
                    pid: b.0,
                    tid: b.1,
                    from: *from,
                    to: *to,
                    stack: stack_of(b)?,
                    preempt: *preempt,
                })
            })
            .collect();
        waits.sort_unstable_by_key(|w| (w.from, w.tid, w.pid, w.to, w.stack, w.preempt));
        let has_wakeups = self.wakers.is_some();
        let wakers = self.wakers.map(|acc| {
            wakers::pair(
                acc.finish(processes, resolver, unwinder),
                self.waker_event,
                &assignment.wakers,
                stack_of,
                (assignment.woken_ns, assignment.unwoken_ns),
            )
        });
        let latency = has_wakeups.then(|| {
            latency::measure(
                assignment.latencies,
                assignment.switch_outs,
                assignment.on_cpu,
                stack_of,
            )
        });
        let mut threads: Vec<OffCpuThread> = assignment
            .threads
            .into_iter()
            .map(|((pid, tid), times)| OffCpuThread {
                pid,
                tid,
                comm: processes.name(tid, u64::MAX).to_string(),
                times,
            })
            .collect();
        threads.sort_by(|a, b| {
            b.times
                .off_cpu_ns()
                .cmp(&a.times.off_cpu_ns())
                .then(a.pid.cmp(&b.pid))
                .then(a.tid.cmp(&b.tid))
        });
        OffCpuProfile {
            profile,
            wait_ns: assignment.exact_ns + assignment.approximate_ns + assignment.unknown_ns,
            stacks: self.stacks,
            exact_ns: assignment.exact_ns,
            approximate_ns: assignment.approximate_ns,
            unknown_ns: assignment.unknown_ns,
            threads,
            wakers,
            waits,
            latency,
        }
    }
}
