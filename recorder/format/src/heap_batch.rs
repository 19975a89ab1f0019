//! Heap events of format version 2, which the reader still expands (version 3 writes
//! `heap_stream` instead; the builder stays for the tests that make version-2 payloads).
//!
//! Heap events stored compactly. A heap recording holds millions of `Alloc`/`Free` events;
//! written one record each, their times, thread ids and heap addresses defeat compression
//! (20x the size of heaptrack's file on the benchmark). The writer therefore packs a run of
//! consecutive heap events of one process into one `HeapBatch` record, with each field stored
//! as a change from the previous event: the coarse timestamp and the thread rarely change, the
//! stack often repeats, and an address freed is usually the one just allocated. Readers expand
//! a batch back into the same `Alloc`/`Free` records in the same order, so nothing above the
//! format crate sees the difference and the file order (the process's event order) is kept.
//!
//! Per event: a flags byte, then only what changed: `ALLOC` (else free); `NEW_TID` + tid;
//! `NEW_TIME` + zig-zag time delta; `NEW_STACK` + zig-zag stack-id delta (allocs);
//! always a zig-zag address delta; allocs also their size.

#[cfg(test)]
use crate::codec::Enc;
use crate::codec::{Dec, DecodeError};
use crate::record::{Alloc, Free, Record};

const ALLOC: u8 = 1;
const NEW_TID: u8 = 2;
const NEW_TIME: u8 = 4;
const NEW_STACK: u8 = 8;

/// Events per batch at most: bounds the writer's memory and a reader's expansion queue.
pub const MAX_BATCH: usize = 4096;

#[cfg(test)]
fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The previous event's fields, against which the next one is encoded.
#[derive(Default, Clone, Copy)]
struct Prev {
    tid: u32,
    time: u64,
    addr: u64,
    stack: u64,
}

/// Builds one batch (one process's consecutive heap events).
#[cfg(test)]
#[derive(Default)]
pub struct BatchBuilder {
    pid: Option<u32>,
    count: u64,
    body: Vec<u8>,
    prev: Prev,
}

#[cfg(test)]
impl BatchBuilder {
    /// Whether `r` can join this batch: a heap event of the same process, with room left.
    /// Anything else must be preceded by [`BatchBuilder::take`], so file order is kept.
    pub fn accepts(&self, r: &Record) -> bool {
        let pid = match r {
            Record::Alloc(a) => a.pid,
            Record::Free(f) => f.pid,
            _ => return false,
        };
        self.pid.is_none_or(|p| p == pid) && (self.count as usize) < MAX_BATCH
    }

    /// Adds a heap event (the caller checked [`BatchBuilder::accepts`]).
    pub fn add(&mut self, r: &Record) {
        let (pid, tid, time, addr, alloc) = match r {
            Record::Alloc(a) => (a.pid, a.tid, a.time, a.addr, Some((a.size, a.stack))),
            Record::Free(f) => (f.pid, f.tid, f.time, f.addr, None),
            _ => return,
        };
        if self.pid.is_none() {
            self.pid = Some(pid);
            // The first event is encoded against zeros, with every field present.
            self.prev = Prev::default();
        }
        let mut flags = if alloc.is_some() { ALLOC } else { 0 };
        let first = self.count == 0;
        if first || tid != self.prev.tid {
            flags |= NEW_TID;
        }
        if first || time != self.prev.time {
            flags |= NEW_TIME;
        }
        if let Some((_, stack)) = alloc {
            if first || stack != self.prev.stack {
                flags |= NEW_STACK;
            }
        }
        self.body.push(flags);
        let mut e = Enc::new(&mut self.body);
        if flags & NEW_TID != 0 {
            e.u64(tid.into());
        }
        if flags & NEW_TIME != 0 {
            e.u64(zigzag(time.wrapping_sub(self.prev.time) as i64));
        }
        if let Some((size, stack)) = alloc {
            if flags & NEW_STACK != 0 {
                e.u64(zigzag(stack.wrapping_sub(self.prev.stack) as i64));
            }
            e.u64(size);
            self.prev.stack = stack;
        }
        e.u64(zigzag(addr.wrapping_sub(self.prev.addr) as i64));
        self.prev.tid = tid;
        self.prev.time = time;
        self.prev.addr = addr;
        self.count += 1;
    }

    /// Writes the finished batch payload (pid, count, events) into `payload`, leaving the
    /// builder empty; `false` when there was nothing to write.
    pub fn take(&mut self, payload: &mut Vec<u8>) -> bool {
        let Some(pid) = self.pid.take() else {
            return false;
        };
        payload.clear();
        let mut e = Enc::new(payload);
        e.u64(pid.into());
        e.u64(self.count);
        payload.extend_from_slice(&self.body);
        self.body.clear();
        self.count = 0;
        true
    }
}

/// Expands a batch payload into its records, in order. Bounded by [`MAX_BATCH`] and by the
/// payload's length (every event takes at least two bytes).
pub fn expand(
    payload: &[u8],
    out: &mut std::collections::VecDeque<Record>,
) -> Result<(), DecodeError> {
    let d = &mut Dec::new(payload);
    let pid = d.u32()?;
    let count = d.u64()?;
    if count > MAX_BATCH as u64 || count > d.remaining() as u64 {
        return Err(DecodeError::BadLength(0));
    }
    let mut prev = Prev::default();
    for _ in 0..count {
        let flags = d.u8()?;
        if flags & NEW_TID != 0 {
            prev.tid = d.u32()?;
        }
        if flags & NEW_TIME != 0 {
            prev.time = prev.time.wrapping_add(unzigzag(d.u64()?) as u64);
        }
        if flags & ALLOC != 0 {
            if flags & NEW_STACK != 0 {
                prev.stack = prev.stack.wrapping_add(unzigzag(d.u64()?) as u64);
            }
            let size = d.u64()?;
            prev.addr = prev.addr.wrapping_add(unzigzag(d.u64()?) as u64);
            out.push_back(Record::Alloc(Alloc {
                time: prev.time,
                pid,
                tid: prev.tid,
                addr: prev.addr,
                size,
                stack: prev.stack,
            }));
        } else {
            prev.addr = prev.addr.wrapping_add(unzigzag(d.u64()?) as u64);
            out.push_back(Record::Free(Free {
                time: prev.time,
                pid,
                tid: prev.tid,
                addr: prev.addr,
            }));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    fn events() -> Vec<Record> {
        let mut v = Vec::new();
        for i in 0..1000u64 {
            let addr = 0x5555_0000_1000 + (i % 7) * 0x40;
            v.push(Record::Alloc(Alloc {
                time: 1_000_000 + i / 100 * 4_000_000,
                pid: 42,
                tid: 42 + (i % 3) as u32,
                addr,
                size: 16 + i % 64,
                stack: 1 + i % 5,
            }));
            v.push(Record::Free(Free {
                time: 1_000_000 + i / 100 * 4_000_000,
                pid: 42,
                tid: 42,
                addr,
            }));
        }
        // Extremes: wrapping deltas must round-trip.
        v.push(Record::Alloc(Alloc {
            time: 0,
            pid: 42,
            tid: u32::MAX,
            addr: u64::MAX,
            size: u64::MAX,
            stack: u64::MAX,
        }));
        v.push(Record::Free(Free {
            time: u64::MAX,
            pid: 42,
            tid: 0,
            addr: 0,
        }));
        v
    }

    #[test]
    fn batches_round_trip_exactly_and_in_order() {
        let ev = events();
        let mut b = BatchBuilder::default();
        let mut out = VecDeque::new();
        let mut payload = Vec::new();
        let mut total = 0;
        for r in &ev {
            if !b.accepts(r) {
                assert!(b.take(&mut payload));
                total += payload.len();
                expand(&payload, &mut out).unwrap();
            }
            b.add(r);
        }
        assert!(b.take(&mut payload));
        total += payload.len();
        expand(&payload, &mut out).unwrap();
        assert_eq!(out.into_iter().collect::<Vec<_>>(), ev);
        // Mostly-repeating fields take a few bytes per event.
        assert!(
            total < ev.len() * 5,
            "{total} bytes for {} events",
            ev.len()
        );
    }

    #[test]
    fn other_processes_and_records_end_a_batch() {
        let mut b = BatchBuilder::default();
        let a = Record::Free(Free {
            time: 1,
            pid: 1,
            tid: 1,
            addr: 8,
        });
        assert!(b.accepts(&a));
        b.add(&a);
        assert!(!b.accepts(&Record::Free(Free {
            time: 1,
            pid: 2,
            tid: 2,
            addr: 8
        })));
        assert!(!b.accepts(&Record::Lost(crate::record::Lost {
            time: 0,
            count: 1,
            kind: "heap".into()
        })));
    }

    #[test]
    fn corrupt_batches_are_errors_not_panics() {
        let mut out = VecDeque::new();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for len in 0..300 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng as u8
                })
                .collect();
            out.clear();
            let _ = expand(&bytes, &mut out);
            assert!(out.len() <= MAX_BATCH);
        }
        assert!(expand(&[1, 0xff, 0xff, 0xff, 0x7f], &mut out).is_err());
    }
}
