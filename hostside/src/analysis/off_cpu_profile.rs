//! The off-CPU profile of a recording made with `rec --off-cpu`: every wait measured from the
//! context switches ([`crate::analysis::off_cpu`]), charged to its stack, and the stacks
//! symbolized like CPU samples, weighted by the nanoseconds waited.
//!
//! The switch and sample times come from the recording's metadata pass ([`OffCpuEvents`], kept
//! by the pipeline); one pass of its own then feeds only the samples that name a wait, each
//! once with the sum of its waits as its weight, through the CPU analysis. Memory is the
//! per-thread event lists, not the stacks.

use crossprof_format::{Record, Sample};

use crate::analysis::cpu::{self, CpuProfile};
use crate::analysis::off_cpu::{Blocked, Event, Provider, ThreadTimes, Timeline, WakerKey};
use crate::analysis::wakers::{self, Wakers};
use crate::analysis::Input;
use crate::unwinding::StackUnwinder;

/// The header's name of the event whose samples are blocking stacks.
pub const BLOCKING_EVENT: &str = "context-switches";

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
        }
    }

    /// Keeps what `r` tells of a thread's switches, samples and wakeups.
    pub fn observe(&mut self, r: &Record) {
        let (blocking, waking) = (self.blocking, self.waking);
        match r {
            Record::Switch(s) => {
                let ev = if s.out {
                    Event::Out(s.preempt)
                } else {
                    Event::In
                };
                self.timeline.push(s.pid, s.tid, s.time, ev);
            }
            Record::Sample(s) => self.timeline.push(s.pid, s.tid, s.time, Event::OnCpu),
            Record::EventSample(e) if Some(e.event) == blocking && e.event != 0 => self
                .timeline
                .push(e.sample.pid, e.sample.tid, e.sample.time, Event::Blocking),
            // A wakeup: the sample is the waker's, its `addr` the woken thread.
            Record::EventSample(e) if Some(e.event) == waking => self.timeline.wakeup(
                WakerKey {
                    pid: e.sample.pid,
                    tid: e.sample.tid,
                    time: e.sample.time,
                },
                e.sample.addr as u32,
            ),
            Record::Fork(t) => self.timeline.push(t.pid, t.tid, t.time, Event::Start),
            Record::Exit(t) => self.timeline.push(t.pid, t.tid, t.time, Event::End),
            Record::End(e) => self.end = self.end.max(e.time),
            _ => {}
        }
    }
}

/// Measures and charges every wait of the recording, cut to [`Input::window`].
pub fn analyze(l: &Input<'_>) -> OffCpuProfile {
    let header = l.recording.header();
    let events = match l.off_cpu_events {
        Some(e) => e.clone(),
        None => {
            // Kept by the metadata pass when the header says switches were recorded; read
            // them now otherwise.
            let mut e = OffCpuEvents::new(header, l.duration_ns);
            l.recording.for_each_metadata(|r| e.observe(&r));
            e
        }
    };
    let OffCpuEvents {
        timeline,
        mut end,
        blocking,
        waking,
    } = events;
    end = end.max(header.start_clock_ns.saturating_add(l.duration_ns));
    let assignment = timeline.assign_within(end, l.window);
    let mut charged = assignment.charged;
    let mut unwinder = StackUnwinder::new(l.processes, l.resolver, l.arch, header.big_endian);
    let profile = cpu::analyze_weighted(
        &mut |f| {
            l.recording.for_each(|r| {
                let (sample, provider) = match r {
                    Record::Sample(s) => {
                        let p = Provider::OnCpu(s.time);
                        (s, p)
                    }
                    Record::EventSample(e) if Some(e.event) == blocking && e.event != 0 => {
                        let p = Provider::Blocking(e.sample.time);
                        (e.sample, p)
                    }
                    _ => return,
                };
                if let Some(ns) = charged.remove(&(sample.pid, sample.tid, provider)) {
                    f(Record::Sample(Sample {
                        period: ns,
                        ..sample
                    }));
                }
            });
            // Waits of threads never sampled before: no stack, only the thread.
            let mut unknown: Vec<_> = charged
                .drain()
                .filter(|((_, _, p), _)| *p == Provider::Unknown)
                .collect();
            unknown.sort_unstable();
            for ((pid, tid, _), ns) in unknown {
                f(Record::Sample(Sample {
                    time: end,
                    pid,
                    tid,
                    period: ns,
                    ..Default::default()
                }));
            }
        },
        l.processes,
        l.resolver,
        &mut unwinder,
        true,
    );
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
        .filter_map(|(b, from, to)| {
            Some(Wait {
                pid: b.0,
                tid: b.1,
                from: *from,
                to: *to,
                stack: stack_of(b)?,
            })
        })
        .collect();
    waits.sort_unstable_by_key(|w| (w.from, w.tid, w.pid));
    let wakers = waking.map(|event| {
        wakers::analyze(
            l,
            event,
            &assignment.wakers,
            stack_of,
            (assignment.woken_ns, assignment.unwoken_ns),
        )
    });
    let mut threads: Vec<OffCpuThread> = assignment
        .threads
        .into_iter()
        .map(|((pid, tid), times)| OffCpuThread {
            pid,
            tid,
            comm: l.processes.name(tid, u64::MAX).to_string(),
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
        stacks: header.off_cpu.clone(),
        exact_ns: assignment.exact_ns,
        approximate_ns: assignment.approximate_ns,
        unknown_ns: assignment.unknown_ns,
        threads,
        wakers,
        waits,
    }
}
