//! The threads' timeline, as hotspot draws it: for each thread, over [`COLUMNS`] equal slices
//! of the recording (or of the `--from/--to` window), how long it ran and how long it waited.
//!
//! Off-CPU recordings (switch records) give exact times: a thread runs from each switch-in
//! to the next switch-out and waits (blocked or preempted) in between. Recordings without
//! them only know where samples fell: each sample counts its period as running time, and the
//! rest of the thread's life (its creation, or first sample, to its exit, or last sample) as
//! waiting. No pass of its own: [`TimelineEvents`] keeps what it needs as the recording's
//! metadata pass goes by (24 bytes per sample, switch and thread start or end).

use std::collections::HashMap;

use crossprof_format::Record;

use crate::filter::Window;
use crate::processes::Processes;

/// Slices of the timeline.
pub const COLUMNS: usize = 60;

/// One thread's row.
pub struct Row {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Thread name.
    pub comm: String,
    /// Nanoseconds running in each slice.
    pub running: Vec<u64>,
    /// Nanoseconds alive but not running in each slice.
    pub waiting: Vec<u64>,
}

impl Row {
    /// All running time.
    pub fn running_ns(&self) -> u64 {
        self.running.iter().sum()
    }

    /// All waiting time.
    pub fn waiting_ns(&self) -> u64 {
        self.waiting.iter().sum()
    }
}

/// The timeline of every selected thread.
pub struct ThreadTimeline {
    /// `switches` (exact) or `samples` (running where samples fell).
    pub source: &'static str,
    /// Board time of the first slice's start, ns.
    pub start: u64,
    /// Length of one slice, ns.
    pub slice_ns: u64,
    /// Threads by running time, most first.
    pub rows: Vec<Row>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Start,
    In,
    Out,
    Sample(u64),
    End,
}

/// Where a timeline's slices lie on the board clock, and the part of them that counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    /// Board time of the first slice's start, ns.
    pub start: u64,
    /// Length of one slice, ns.
    pub slice_ns: u64,
    /// How many slices.
    pub columns: usize,
    /// Time before this (board clock, ns) is not counted (the window's start).
    pub lo: u64,
    /// Time from this on is not counted (the window's or the recording's end).
    pub hi: u64,
}

impl Grid {
    /// Adds the time from `a` to `b`, cut to the grid's counted part, to the slices it covers.
    fn spread(&self, slices: &mut [u64], a: u64, b: u64) {
        let end = self
            .start
            .saturating_add(self.slice_ns.saturating_mul(slices.len() as u64));
        let (a, b) = (a.max(self.lo), b.min(self.hi).min(end));
        spread(slices, self.start, self.slice_ns, a, b);
    }
}

/// Adds the time from `a` to `b` to the slices it covers.
fn spread(slices: &mut [u64], start: u64, slice_ns: u64, a: u64, b: u64) {
    let slice_ns = slice_ns.max(1);
    let end = start.saturating_add(slice_ns.saturating_mul(slices.len() as u64));
    let (mut a, b) = (a.max(start), b.min(end));
    while a < b {
        let i = ((a - start) / slice_ns) as usize;
        let slice_end = start
            .saturating_add((i as u64 + 1).saturating_mul(slice_ns))
            .min(b);
        if let Some(s) = slices.get_mut(i) {
            *s += slice_end - a;
        }
        a = slice_end;
    }
}

/// What a thread did at one moment, as recorded (the timeline reads it as an [`Ev`] once it
/// knows whether the recording has switches).
#[derive(Clone, Copy)]
enum Raw {
    Fork,
    Exit,
    Switch { out: bool },
    Sample { period: u64 },
    EventSample,
}

/// The timeline's events, per thread, gathered from the records as a pass over the file goes
/// by ([`TimelineEvents::observe`]), so that building the timeline reads nothing again.
#[derive(Default)]
pub struct TimelineEvents {
    threads: HashMap<(u32, u32), Vec<(u64, Raw)>>,
    /// The latest `End` record's time.
    end: u64,
}

impl TimelineEvents {
    /// Keeps what `r` says of a thread's life (metadata records suffice: no stack bytes).
    pub fn observe(&mut self, r: &Record) {
        let (pid, tid, time, raw) = match r {
            Record::Switch(s) => (s.pid, s.tid, s.time, Raw::Switch { out: s.out }),
            Record::Sample(s) => (s.pid, s.tid, s.time, Raw::Sample { period: s.period }),
            Record::EventSample(e) => (e.sample.pid, e.sample.tid, e.sample.time, Raw::EventSample),
            Record::Fork(t) => (t.pid, t.tid, t.time, Raw::Fork),
            Record::Exit(t) => (t.pid, t.tid, t.time, Raw::Exit),
            Record::End(e) => {
                self.end = self.end.max(e.time);
                return;
            }
            _ => return,
        };
        if time > 0 {
            self.threads
                .entry((pid, tid))
                .or_default()
                .push((time, raw));
        }
    }
}

/// What the timeline needs of the recording besides its events.
pub struct Recorded<'a> {
    /// Thread names.
    pub processes: &'a Processes,
    /// The part of the recording analysed.
    pub window: &'a Window,
    /// Whether it has context-switch records (exact running times).
    pub switches: bool,
    /// The recording's end on the board clock (its start plus its duration), ns.
    pub end: u64,
}

/// Builds the timeline of the recorded `events`, within the window, in [`COLUMNS`] slices
/// from its first event to its last, or on the slices of `grid` when given (the HTML
/// report's, whose time selection must add up exactly): a slice's times count only where they
/// lie in both the grid's counted part and the window. None when nothing was recorded.
pub fn build_on(
    events: &TimelineEvents,
    rec: &Recorded<'_>,
    grid: Option<Grid>,
) -> Option<ThreadTimeline> {
    let switches = rec.switches;
    let mut first = u64::MAX;
    let mut last = rec.end.max(events.end);
    let w = rec.window;
    let mut threads: HashMap<(u32, u32), Vec<(u64, Ev)>> = HashMap::new();
    for (&(pid, tid), raw) in &events.threads {
        if !w.keeps_task(pid, tid) {
            continue;
        }
        let evs: Vec<(u64, Ev)> = raw
            .iter()
            .filter_map(|&(time, r)| {
                let ev = match r {
                    Raw::Switch { out } if switches => {
                        if out {
                            Ev::Out
                        } else {
                            Ev::In
                        }
                    }
                    Raw::Sample { period } if !switches => Ev::Sample(period),
                    // With switches, samples only say the thread was alive (as off-CPU
                    // analysis counts a thread's wall time from its first record).
                    Raw::Sample { .. } => Ev::Sample(0),
                    Raw::EventSample if switches => Ev::Sample(0),
                    Raw::Fork => Ev::Start,
                    Raw::Exit => Ev::End,
                    Raw::Switch { .. } | Raw::EventSample => return None,
                };
                Some((time, ev))
            })
            .collect();
        if let (Some(a), Some(b)) = (evs.iter().map(|e| e.0).min(), evs.iter().map(|e| e.0).max()) {
            first = first.min(a);
            last = last.max(b);
            threads.insert((pid, tid), evs);
        }
    }
    let grid = match grid {
        Some(g) => Grid {
            lo: g.lo.max(w.lo),
            hi: g.hi.min(w.hi),
            ..g
        },
        None => {
            let start = first.max(w.lo);
            let end = last.min(w.hi);
            Grid {
                start,
                slice_ns: end.saturating_sub(start).div_ceil(COLUMNS as u64).max(1),
                columns: COLUMNS,
                lo: start,
                hi: end,
            }
        }
    };
    let (start, end, columns) = (grid.lo, grid.hi, grid.columns);
    if threads.is_empty() || end <= start {
        return None;
    }
    let mut rows: Vec<Row> = threads
        .into_iter()
        .map(|((pid, tid), mut evs)| {
            evs.sort_unstable();
            let mut row = Row {
                pid,
                tid,
                comm: rec.processes.name(tid, u64::MAX).to_string(),
                running: vec![0; columns],
                waiting: vec![0; columns],
            };
            let born = evs.first().map_or(start, |e| e.0);
            let died = evs.iter().find(|e| e.1 == Ev::End).map_or(
                if switches {
                    end
                } else {
                    evs.last().map_or(end, |e| e.0)
                },
                |e| e.0,
            );
            let mut alive = vec![0; columns];
            grid.spread(&mut alive, born, died);
            if switches {
                // Running until the first switch says otherwise: a thread first seen
                // switching in was waiting before.
                let mut on_since = match evs.iter().find(|e| matches!(e.1, Ev::In | Ev::Out)) {
                    Some((_, Ev::In)) => None,
                    _ => Some(born),
                };
                for &(t, ev) in &evs {
                    match ev {
                        Ev::In if on_since.is_none() => on_since = Some(t),
                        Ev::Out | Ev::End => {
                            if let Some(a) = on_since.take() {
                                grid.spread(&mut row.running, a, t.min(died));
                            }
                        }
                        _ => {}
                    }
                }
                if let Some(a) = on_since {
                    grid.spread(&mut row.running, a, died);
                }
            } else {
                for &(t, ev) in &evs {
                    if let Ev::Sample(period) = ev {
                        grid.spread(&mut row.running, t, t.saturating_add(period));
                    }
                }
            }
            for ((run, wait), &alive) in row.running.iter_mut().zip(&mut row.waiting).zip(&alive) {
                *run = (*run).min(alive);
                *wait = alive - *run;
            }
            row
        })
        .filter(|r| r.running_ns() + r.waiting_ns() > 0)
        .collect();
    rows.sort_by(|a, b| {
        b.running_ns()
            .cmp(&a.running_ns())
            .then(a.pid.cmp(&b.pid))
            .then(a.tid.cmp(&b.tid))
    });
    Some(ThreadTimeline {
        source: if switches { "switches" } else { "samples" },
        start: grid.start,
        slice_ns: grid.slice_ns,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::spread;

    #[test]
    fn time_is_spread_over_the_slices_it_covers() {
        let mut s = vec![0u64; 4];
        spread(&mut s, 100, 10, 95, 125);
        assert_eq!(s, vec![10, 10, 5, 0]);
        spread(&mut s, 100, 10, 138, 1000);
        assert_eq!(s, vec![10, 10, 5, 2]);
        spread(&mut s, 100, 10, 50, 60);
        assert_eq!(s, vec![10, 10, 5, 2]);
    }
}
