//! The heap codes keep everything the analysis can see: the same events in the same order,
//! with the same times, threads, sizes and stacks, and frees that release a block of the same
//! size and stack as the address did (or nothing, when the address was not live).

use std::collections::HashMap;

use super::*;
use crate::codec::Dec;
use crate::record::{Alloc, Free, Item, Record};

/// What an analysis that tracks blocks by address sees of one event.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// pid, tid, time, size, stack, and the (size, stack) of the live block it replaced.
    Alloc(u32, u32, u64, u64, u64, Option<(u64, u64)>),
    /// pid, tid, time, and the (size, stack) of the block released (None: not live).
    Free(u32, u32, u64, Option<(u64, u64)>),
}

/// Replays records as hostside's heap analysis does (live blocks by address, per process).
fn observe(records: &[Record]) -> Vec<Seen> {
    let mut live: HashMap<(u32, u64), (u64, u64)> = HashMap::new();
    records
        .iter()
        .map(|r| match r {
            Record::Alloc(a) => {
                let old = live.insert((a.pid, a.addr), (a.size, a.stack));
                Seen::Alloc(a.pid, a.tid, a.time, a.size, a.stack, old)
            }
            Record::Free(f) => Seen::Free(f.pid, f.tid, f.time, live.remove(&(f.pid, f.addr))),
            other => panic!("not a heap event: {other:?}"),
        })
        .collect()
}

/// Encodes `events` (with `forget` of a pid where a `None` stands) and decodes them back.
fn round_trip(events: &[(Option<Record>, u32)]) -> (Vec<Record>, usize) {
    round_trip_limited(events, DEFAULT_LIVE_LIMIT, usize::MAX).0
}

/// [`round_trip`] with the writer tracking at most `limit` live blocks and taking over unused
/// info indexes past `infos`; also returns how many blocks it untracked and the info indexes
/// of pid 20 at the end.
fn round_trip_limited(
    events: &[(Option<Record>, u32)],
    limit: usize,
    infos: usize,
) -> ((Vec<Record>, usize), (u64, usize)) {
    let mut enc = HeapEncoder::default();
    enc.set_live_limit(limit);
    enc.set_info_limit(infos);
    let mut dec = HeapDecoder::default();
    let mut out = Vec::new();
    let mut record = Vec::new();
    let mut bytes = 0;
    let mut drain = |enc: &mut HeapEncoder, out: &mut Vec<Record>| {
        record.clear();
        if enc.append_record(&mut record) {
            assert_eq!(record[0], tag::HEAP_EVENTS);
            let mut r = Dec::new(&record[1..]);
            let payload = r.bytes().unwrap();
            assert_eq!(r.remaining(), 0);
            bytes += payload.len();
            let mut d = Dec::new(payload);
            let pid = d.u32().unwrap();
            while let Some(r) = dec.next(pid, &mut d).unwrap() {
                out.push(r.into_record());
            }
            assert_eq!(d.remaining(), 0);
        }
    };
    for (r, pid) in events {
        match r {
            Some(Record::Alloc(a)) => {
                if !enc.accepts(a.pid) {
                    drain(&mut enc, &mut out);
                }
                enc.alloc(a.pid, a.tid, a.time, a.addr, a.size, a.stack);
            }
            Some(Record::Free(f)) => {
                if !enc.accepts(f.pid) {
                    drain(&mut enc, &mut out);
                }
                enc.free(f.pid, f.tid, f.time, f.addr);
            }
            Some(other) => panic!("{other:?}"),
            None => enc.forget(*pid),
        }
    }
    drain(&mut enc, &mut out);
    let infos = enc.infos(20);
    ((out, bytes), (enc.take_untracked(), infos))
}

fn alloc(pid: u32, tid: u32, time: u64, addr: u64, size: u64, stack: u64) -> Option<Record> {
    Some(Record::Alloc(Alloc {
        time,
        pid,
        tid,
        addr,
        size,
        stack,
    }))
}

fn free(pid: u32, tid: u32, time: u64, addr: u64) -> Option<Record> {
    Some(Record::Free(Free {
        time,
        pid,
        tid,
        addr,
    }))
}

/// A pseudo-random workload: two processes, three threads, addresses recycled as an allocator
/// does, frees of unknown addresses, allocations at still-live addresses, an exec.
fn workload() -> Vec<(Option<Record>, u32)> {
    workload_of(true)
}

/// [`workload`], where `reuse` says whether allocations may land at still-live addresses
/// (which a real allocator does only when a free went unseen).
fn workload_of(reuse: bool) -> Vec<(Option<Record>, u32)> {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut v = Vec::new();
    let mut live: Vec<(u32, u64)> = Vec::new();
    for i in 0..60_000u64 {
        let pid = if i % 7 == 0 { 20 } else { 10 };
        let tid = pid + (next() % 3) as u32;
        let time = 1_000_000 + i / 500 * 4_000_000;
        let r = next();
        if i == 30_000 {
            // pid 10 execs: its blocks are gone.
            v.push((None, 10));
            live.retain(|&(p, _)| p != 10);
            continue;
        }
        match r % 16 {
            0..=6 => {
                let addr = 0x5555_0000_0000 + (next() % 4096) * 16;
                if !reuse && live.contains(&(pid, addr)) {
                    continue;
                }
                v.push((
                    alloc(pid, tid, time, addr, 16 + next() % 5 * 8, 1 + next() % 9),
                    0,
                ));
                live.push((pid, addr));
            }
            7..=12 if !live.is_empty() => {
                let (p, addr) = live.swap_remove((next() % live.len() as u64) as usize);
                v.push((free(p, tid, time, addr), 0));
            }
            13 => v.push((free(pid, tid, time, 0x7777_0000 + next() % 64), 0)),
            _ => {
                // realloc: a free then an allocation, often at the same address.
                if let Some((p, addr)) = live.pop().filter(|b| reuse || !live.contains(b)) {
                    v.push((free(p, tid, time, addr), 0));
                    v.push((alloc(p, tid, time, addr, 100 + next() % 3, 4), 0));
                    live.push((p, addr));
                }
            }
        }
    }
    v
}

#[test]
fn the_analysis_sees_the_same_events_without_addresses() {
    let events = workload();
    let (out, bytes) = round_trip(&events);
    same_as_by_address(&events, &out, true);
    // Few sizes and stacks, no addresses: about two bytes per event before compression.
    let n = events.iter().filter(|(r, _)| r.is_some()).count();
    assert!(bytes < n * 3, "{bytes} bytes for {n} events");
}

#[test]
fn a_writer_past_its_live_limit_loses_nothing() {
    // Allocations at free addresses, as an allocator hands them out when every free is seen.
    let events = workload_of(false);
    // The workload holds up to about 2,800 live blocks: a limit of 256 untracks most.
    let ((out, bytes), (untracked, _)) = round_trip_limited(&events, 256, usize::MAX);
    same_as_by_address(&events, &out, false);
    let ((_, unlimited), (_, all_infos)) = round_trip_limited(&events, usize::MAX, usize::MAX);
    assert!(untracked > 1000, "{untracked}");
    // The workload's 48 (size, stack) pairs in 8 indexes, taken over as blocks come and go
    // (pid 20 has about 60 live blocks: at times more pairs are live than 8).
    let ((out, _), (_, infos)) = round_trip_limited(&events, 256, 8);
    same_as_by_address(&events, &out, false);
    assert!(infos < all_infos, "{infos} info indexes of {all_infos}");
    // Frees of untracked blocks carry their address: larger, not unbounded.
    assert!(
        bytes > unlimited && bytes < unlimited * 4,
        "{bytes} vs {unlimited}"
    );
}

/// Asserts that the decoded `out` is, for an analysis that matches frees by address, the
/// same as the original `events`; `reuse`: the events hold allocations at live addresses,
/// and each odd case must have happened.
fn same_as_by_address(events: &[(Option<Record>, u32)], out: &[Record], reuse: bool) {
    let originals: Vec<Record> = events.iter().filter_map(|(r, _)| r.clone()).collect();
    assert_eq!(out.len(), originals.len());
    let (mut a, mut b) = (observe(&originals), observe(out));
    // The exec: the original addresses of pid 10's old image may be live again in the new
    // one, which an address-based replay (unlike hostside, which keeps images apart) mixes
    // up; compare the new image as its own process.
    let cut = events.iter().take_while(|(r, _)| r.is_some()).count();
    let fix = |s: &mut Vec<Seen>, records: &[Record]| {
        let after: Vec<Record> = records[cut..]
            .iter()
            .map(|r| match r.clone() {
                Record::Alloc(mut x) if x.pid == 10 => {
                    x.pid = 11;
                    Record::Alloc(x)
                }
                Record::Free(mut x) if x.pid == 10 => {
                    x.pid = 11;
                    Record::Free(x)
                }
                other => other,
            })
            .collect();
        let mut all = records[..cut].to_vec();
        all.extend(after);
        *s = observe(&all);
    };
    fix(&mut a, &originals);
    fix(&mut b, out);
    if let Some(i) = (0..a.len().min(b.len())).find(|&i| a[i] != b[i]) {
        panic!("event {i}: {:?} became {:?}", a[i], b[i]);
    }
    assert_eq!(a, b);
    if !reuse {
        return;
    }
    let reused = a
        .iter()
        .filter(|s| matches!(s, Seen::Alloc(.., Some(_))))
        .count();
    // Some of each odd case happened.
    let unknown = a
        .iter()
        .filter(|s| matches!(s, Seen::Free(.., None)))
        .count();
    assert!(reused > 100 && unknown > 1000, "{reused} {unknown}");
    // No handle is ever 0 or the unknown handle while live; frees of unknown addresses use it.
    for r in out {
        if let Record::Alloc(x) = r {
            assert!(x.addr != 0 && x.addr != UNKNOWN_BLOCK);
        }
    }
    assert!(out
        .iter()
        .any(|r| matches!(r, Record::Free(f) if f.addr == UNKNOWN_BLOCK)));
}

#[test]
fn a_new_image_never_sees_handles_of_the_old_one() {
    let events = vec![
        (alloc(5, 5, 10, 0x1000, 8, 1), 0),
        (alloc(5, 5, 10, 0x2000, 8, 1), 0),
        (None, 5),
        (alloc(5, 5, 20, 0x1000, 8, 1), 0),
        (free(5, 5, 20, 0x2000), 0),
        (free(5, 5, 20, 0x1000), 0),
    ];
    let (out, _) = round_trip(&events);
    let handles: Vec<u64> = out
        .iter()
        .map(|r| match r {
            Record::Alloc(a) => a.addr,
            Record::Free(f) => f.addr,
            _ => unreachable!(),
        })
        .collect();
    assert_ne!(handles[2], handles[0]);
    assert_ne!(handles[2], handles[1]);
    assert_eq!(
        handles[3], UNKNOWN_BLOCK,
        "0x2000 was not allocated by this image"
    );
    assert_eq!(handles[4], handles[2]);
    assert!(out.iter().all(|r| match r {
        Record::Alloc(a) => a.time == if a.addr == handles[2] { 20 } else { 10 },
        _ => true,
    }));
}

#[test]
fn corrupt_codes_are_errors_not_panics() {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for len in 0..2000 {
        let bytes: Vec<u8> = (0..len % 64)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                // Mostly small codes, so that infos get defined and used.
                if rng & 3 == 0 {
                    rng as u8
                } else {
                    (rng % 24) as u8
                }
            })
            .collect();
        let mut dec = HeapDecoder::default();
        let mut d = Dec::new(&bytes);
        let mut n = 0;
        while let Ok(Some(_)) = dec.next(1, &mut d) {
            n += 1;
            assert!(n <= bytes.len());
        }
    }
    // A free of an info with no live block, an unknown escape, an unknown info.
    for bad in [&[OP_FREE as u8][..], &[0x7e], &[4 << 2]] {
        let mut d = Dec::new(bad);
        assert!(HeapDecoder::default().next(1, &mut d).is_err(), "{bad:?}");
    }
}

#[test]
fn through_writer_and_reader_across_frames_and_in_every_prefix() {
    use crate::{End, FrameWriter, Header, Reader, StackNode};
    let header = Header {
        format_version: crate::FORMAT_VERSION,
        arch: "x86_64".into(),
        ..Default::default()
    };
    let mut w = FrameWriter::new(Vec::new(), &header).unwrap();
    let mut expected = Vec::new();
    let mut frame_ends = Vec::new();
    for (i, (r, pid)) in workload().into_iter().enumerate().take(20_000) {
        match r {
            Some(r) => {
                w.push(&r).unwrap();
                expected.push(r);
            }
            None => w.heap_forget(pid),
        }
        if i % 3000 == 0 {
            let n = Record::StackNode(StackNode {
                pid: 10,
                id: i as u64 + 1,
                parent: 0,
                ip: 0x40_0000 + i as u64,
            });
            w.push(&n).unwrap();
            expected.push(n);
        }
        if i % 4500 == 4499 {
            w.flush().unwrap();
            frame_ends.push(expected.len());
        }
    }
    let bytes = w.finish(End::default()).unwrap();
    let read = |data: &[u8]| {
        let mut r = Reader::new(data).unwrap();
        let mut v = Vec::new();
        while let Some(x) = r.next_record() {
            v.push(x);
        }
        v
    };
    let all = read(&bytes);
    assert!(matches!(all.last(), Some(Record::End(_))));
    let split = |v: &[Record]| {
        let heap: Vec<Record> = v
            .iter()
            .filter(|r| matches!(r, Record::Alloc(_) | Record::Free(_)))
            .cloned()
            .collect();
        let other: Vec<Record> = v
            .iter()
            .filter(|r| !matches!(r, Record::Alloc(_) | Record::Free(_) | Record::End(_)))
            .cloned()
            .collect();
        (heap, other)
    };
    let (heap_in, other_in) = split(&expected);
    let (heap_out, other_out) = split(&all);
    assert_eq!(other_out, other_in);
    assert_eq!(observe(&heap_out), observe(&heap_in));
    // Each stack node sits where it was pushed among the heap events.
    let position = |v: &[Record], id: u64| {
        v.iter()
            .position(|r| matches!(r, Record::StackNode(n) if n.id == id))
            .unwrap()
    };
    assert_eq!(position(&all, 3001), position(&expected, 3001));
    // Cut anywhere: whole frames come back, each the same as in the full read.
    for cut in (100..bytes.len()).step_by(97) {
        let part = read(&bytes[..cut]);
        assert_eq!(part[..], all[..part.len()]);
        assert!(part.len() == all.len() || frame_ends.contains(&part.len()) || part.is_empty());
    }
}

/// Decodes every record `enc` holds with `dec`, as items.
fn items(enc: &mut HeapEncoder, dec: &mut HeapDecoder) -> Vec<Item> {
    let mut record = Vec::new();
    let mut out = Vec::new();
    if enc.append_record(&mut record) {
        let mut r = Dec::new(&record[1..]);
        let mut d = Dec::new(r.bytes().unwrap());
        let pid = d.u32().unwrap();
        while let Some(i) = dec.next(pid, &mut d).unwrap() {
            out.push(i);
        }
    }
    out
}

#[test]
fn a_segment_carries_the_live_set_and_reads_alone() {
    let mut old = HeapEncoder::default();
    let mut old_dec = HeapDecoder::default();
    old.alloc(7, 7, 10, 0x1000, 16, 3);
    old.alloc(7, 7, 11, 0x2000, 32, 4);
    old.alloc(7, 7, 12, 0x3000, 16, 3);
    old.free(7, 7, 13, 0x1000);
    assert_eq!(items(&mut old, &mut old_dec).len(), 4);
    let mut live = old.take_live();
    live[0].1.sort_unstable();
    assert_eq!(live, vec![(7, vec![(0x2000, 32, 4), (0x3000, 16, 3)])]);
    // The next segment: a fresh encoder and a fresh reader.
    let mut new = HeapEncoder::default();
    new.carry_start(7, 500);
    for &(addr, size, stack) in &live[0].1 {
        new.carried(7, addr, size, stack);
    }
    new.free(7, 7, 600, 0x3000);
    new.free(7, 7, 601, 0x1000);
    let got = items(&mut new, &mut HeapDecoder::default());
    assert_eq!(got[0], Item::CarryStart { pid: 7, time: 500 });
    let carried: Vec<(u64, u64, u64)> = got[1..3]
        .iter()
        .map(|i| match i {
            Item::Carried(a) => (a.time, a.size, a.stack),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(carried, [(500, 32, 4), (500, 16, 3)]);
    let Item::Carried(third) = &got[2] else {
        unreachable!()
    };
    // The carried block is found by its free; the block freed before the segment is not.
    assert_eq!(
        got[3],
        Item::Free(Free {
            time: 600,
            pid: 7,
            tid: 7,
            addr: third.addr
        })
    );
    assert!(matches!(
        got[4],
        Item::Free(Free {
            addr: UNKNOWN_BLOCK,
            ..
        })
    ));
    assert_eq!(got.len(), 5);
}
