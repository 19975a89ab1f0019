//! Allocations and frees at their own times, for the exports that show each one (the Firefox
//! Profiler's native-allocation tracks) rather than the per-stack sums the reports print.
//!
//! A recording can hold tens of millions of heap events, more than a viewer holds, and how many
//! is only known at the end of the pass, so the log is bounded by a stated rule instead of
//! growing with the recording: it keeps one allocation in `every` (the allocations the
//! analysis counts, numbered in stream order from 0: those whose number is a multiple of
//! `every`), each with its free, where `every` is the smallest power of two that keeps at most
//! [`EventSampling::cap`] allocations. It starts at 1 and doubles whenever the log is full,
//! dropping the kept allocations (and frees) whose number is not a multiple of the new step. The
//! result is the same as if `every` had been known from the start. What was left out is
//! reported (the `heap-events-sampled` diagnostic), never silently. Memory: at most `cap`
//! allocations, their frees, and one map entry per kept allocation still live.

use rustc_hash::FxHashMap;

use crate::analysis::heap::trace_tree::TraceId;
use crate::processes::SpaceKey;

/// How many allocations the log keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventSampling {
    /// Keep at most this many allocations (0: no log).
    pub cap: usize,
}

impl EventSampling {
    /// No log (the reports).
    pub const OFF: EventSampling = EventSampling { cap: 0 };

    /// The most allocations an export shows at their times: with their frees, up to a million
    /// rows in the Firefox Profiler's allocation table, about 40 MB of JSON, which it loads
    /// and builds call trees from in seconds.
    pub const MAX_SHOWN: usize = 500_000;

    /// The exports' log: at most [`EventSampling::MAX_SHOWN`] allocations.
    pub const EXPORT: EventSampling = EventSampling {
        cap: EventSampling::MAX_SHOWN,
    };
}

/// One allocation or free of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapEvent {
    /// Board time (ns).
    pub time: u64,
    /// Index into [`crate::analysis::heap::HeapProfile::traces`]: the allocating stack (a
    /// free carries its allocation's).
    pub trace: usize,
    /// Whether this is an allocation (else the free of one).
    pub alloc: bool,
    /// Bytes: positive for an allocation, negative for its free (0 for `malloc(0)`).
    pub size: i64,
    /// Pairs a free with its allocation: the allocation's number among those the analysis
    /// counted (from 1), not the board address, which another process or a later image may
    /// reuse.
    pub id: u64,
}

/// The log the analysis hands to the exports.
#[derive(Debug, Clone, Default)]
pub struct HeapEvents {
    /// Allocations and frees, in stream order (time order per process).
    pub events: Vec<HeapEvent>,
    /// One allocation in this many was kept.
    pub every: u64,
    /// The most allocations kept.
    pub cap: usize,
    /// Allocations counted by the analysis (kept or not).
    pub allocations: u64,
}

impl HeapEvents {
    /// Allocations not shown at their times (sampled out).
    pub fn not_shown(&self) -> u64 {
        let kept = self.events.iter().filter(|e| e.alloc).count() as u64;
        self.allocations.saturating_sub(kept)
    }
}

/// The log while the stream runs.
pub(super) struct EventLog {
    cap: usize,
    every: u64,
    /// Trace ids as the analysis has them (renumbered to rows when it finishes); `id` is the
    /// allocation's number from 0.
    events: Vec<HeapEvent>,
    /// Kept allocations still live: (space, address) → (number, trace, size).
    live: FxHashMap<(SpaceKey, u64), (u64, TraceId, u64)>,
    kept: usize,
    seen: u64,
}

impl EventLog {
    /// A log under `sampling`, `None` when it keeps nothing.
    pub(super) fn new(sampling: EventSampling) -> Option<EventLog> {
        (sampling.cap > 0).then(|| EventLog {
            cap: sampling.cap,
            every: 1,
            events: Vec::new(),
            live: FxHashMap::default(),
            kept: 0,
            seen: 0,
        })
    }

    /// A counted allocation of `size` bytes at `addr` in `space`.
    pub(super) fn alloc(&mut self, space: SpaceKey, addr: u64, size: u64, trace: TraceId, t: u64) {
        let n = self.seen;
        self.seen += 1;
        let key = (space, addr);
        if self.kept >= self.cap && n.is_multiple_of(self.every) {
            self.double();
        }
        if !n.is_multiple_of(self.every) {
            // A block at an address still live replaces it for the frees to come.
            self.live.remove(&key);
            return;
        }
        self.kept += 1;
        self.events.push(HeapEvent {
            time: t,
            trace: trace as usize,
            alloc: true,
            size: i64::try_from(size).unwrap_or(i64::MAX),
            id: n,
        });
        self.live.insert(key, (n, trace, size));
    }

    /// Doubles the step and drops what the new one does not keep.
    fn double(&mut self) {
        self.every = self.every.saturating_mul(2);
        let every = self.every;
        self.events.retain(|e| e.id.is_multiple_of(every));
        self.live.retain(|_, v| v.0.is_multiple_of(every));
        self.kept = self.events.iter().filter(|e| e.alloc).count();
    }

    /// A counted free (one that released a live block) of `addr` in `space`.
    pub(super) fn free(&mut self, space: SpaceKey, addr: u64, t: u64) {
        if let Some((n, trace, size)) = self.live.remove(&(space, addr)) {
            let size = i64::try_from(size).unwrap_or(i64::MAX);
            self.events.push(HeapEvent {
                time: t,
                trace: trace as usize,
                alloc: false,
                size: -size,
                id: n,
            });
        }
    }

    /// The log with trace ids turned into row indices by `row`; events whose trace has no
    /// row (none: every logged trace allocated) are left out.
    pub(super) fn finish(self, row: impl Fn(TraceId) -> Option<usize>) -> HeapEvents {
        HeapEvents {
            events: self
                .events
                .into_iter()
                .filter_map(|e| {
                    Some(HeapEvent {
                        trace: row(TraceId::try_from(e.trace).ok()?)?,
                        id: e.id + 1,
                        ..e
                    })
                })
                .collect(),
            every: self.every,
            cap: self.cap,
            allocations: self.seen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cap: usize, n: u64) -> HeapEvents {
        let s = (1, 0);
        let mut log = EventLog::new(EventSampling { cap }).unwrap();
        for i in 0..n {
            log.alloc(s, 0x1000 + i, 10 + i, 7, 100 + i);
        }
        for i in 0..n {
            log.free(s, 0x1000 + i, 1000 + i);
        }
        log.finish(|t| Some(t as usize))
    }

    #[test]
    fn the_step_doubles_until_the_allocations_fit() {
        let e = run(3, 3);
        assert_eq!((e.every, e.not_shown()), (1, 0));
        // 7 allocations, at most 3: one in 4 (0 and 4), each with its free.
        let e = run(3, 7);
        let rows: Vec<(u64, i64, u64)> = e.events.iter().map(|e| (e.time, e.size, e.id)).collect();
        assert_eq!(
            rows,
            [(100, 10, 1), (104, 14, 5), (1000, -10, 1), (1004, -14, 5)]
        );
        assert_eq!((e.every, e.allocations, e.not_shown()), (4, 7, 5));
        // The same as a step known from the start: multiples of 4 among 0..=8.
        let e = run(3, 9);
        let ids: Vec<u64> = e.events.iter().filter(|e| e.alloc).map(|e| e.id).collect();
        assert_eq!((e.every, ids), (4, vec![1, 5, 9]));
        assert!(EventLog::new(EventSampling::OFF).is_none());
    }

    #[test]
    fn a_reused_live_address_pairs_the_free_with_the_newer_block() {
        let s = (1, 0);
        let mut log = EventLog::new(EventSampling { cap: 1 }).unwrap();
        log.alloc(s, 0x10, 8, 1, 1); // kept (number 0)
        log.alloc(s, 0x10, 9, 1, 2); // number 1: the step doubles, not kept, replaces 0x10
        log.free(s, 0x10, 3);
        let e = log.finish(|t| Some(t as usize));
        assert_eq!(e.events.len(), 1);
        assert_eq!(e.every, 2);
    }
}
