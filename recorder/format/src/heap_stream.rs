//! Heap events as a stream of small codes per process (format version 3), so that a recording
//! of millions of allocations is no larger than heaptrack's.
//!
//! What makes heap events expensive on disk is not their number but their entropy: the
//! addresses the allocator hands out, which zstd cannot predict. The writer therefore does what
//! `heaptrack_interpret` does before its file is compressed:
//! - an allocation's size and stack are interned per process as an *allocation info*, written
//!   once; an allocation is then the info's index;
//! - the writer keeps the process's live blocks (address → info) and writes a free as the
//!   info index of the block it releases; addresses are not written at all;
//! - the time and the thread are written only when they change (heap events carry the kernel
//!   tick's coarse clock, so the time changes every few milliseconds).
//!
//! A run of one process's events, with the rest of the file's records around it, forms a
//! [`crate::record::tag::HEAP_EVENTS`] record. The reader expands it back into `Alloc` and
//! `Free` records in the same order. Their `addr` is then a *block handle*: unique among the
//! process's live blocks and the same in the free that releases the block. Blocks of one info
//! are interchangeable for every count the analysis makes (heaptrack's own analysis only sees
//! the info of a freed block), so the reader releases the most recent live block of the info.
//! The odd cases keep their meaning: a free of an address that is not live becomes a free of a
//! handle that is never live ([`UNKNOWN_BLOCK`]); an allocation at an address that is still live
//! takes over a live handle of the older block's info, so the older block is never released, as
//! with real addresses.
//!
//! Codes are LEB128 varints `v`; `v & 3` is the operation, `v >> 2` its argument:
//! - 0, alloc: argument = info index;
//! - 1, free: argument = info index of the released block;
//! - 2, escape: argument = one of the `ESC_*` codes below, with their operands after it.
//!
//! The state (infos, live blocks, time, thread) carries across records and frames: each frame
//! decodes given the frames before it, as trace-tree nodes do. A process's first events, and
//! its first events after [`HeapEncoder::forget`] (a new image after exec, or an exited
//! process whose pid may come back), start with `ESC_RESET`.
//!
//! Bounded memory: the writer tracks at most [`HeapEncoder::set_live_limit`] live blocks (all
//! processes together), so that `rec` stays within a fixed budget however much a daemon leaks
//! over days. Past the limit it stops tracking a few blocks at a time (`ESC_UNTRACK`: their
//! info and address) and writes a free of an address it does not track with the address
//! (`ESC_FREE_ADDR`); the reader keeps the untracked blocks by address and matches those
//! frees exactly, so counts do not change. Allocation infos are bounded too: past a limit per
//! process a new (size, stack) pair takes over the index of one no tracked block uses
//! (`ESC_INFO_AGAIN`, see [`crate::heap_infos`]). (One case differs: an untracked block whose free
//! rec missed, then a new block at its address, freed, then a second free of the address, a
//! double free in the program: the second free releases the untracked block, where an
//! address map would ignore it.) A process that never went past the limit keeps
//! the older encoding (`ESC_FREE_UNKNOWN`), which readers before these codes understand.
//!
//! Segments (`rec --max-size`) do not depend on each other: each starts with a fresh encoder,
//! and with each known process's *carried live set* (see [`HeapEncoder::carry`]): an
//! `ESC_CARRY_START` (a reset, with the segment's start time), then one `ESC_CARRIED`
//! allocation per block still live. The reader gives them back as [`Item::CarryStart`] and
//! [`Item::Carried`]: a segment read alone knows every live block, and a reader that read
//! the segment before replaces what it held for that process with the carried set (the block
//! handles of two segments are unrelated).

use crate::codec::{varint, Enc, MAX_VARINT};
use crate::heap_infos::{InfoTable, Interned, DEFAULT_INFO_LIMIT};
use crate::int_map::IntMap;
use crate::probe_map::LiveMap;
use crate::record::tag;

pub(crate) const OP_ALLOC: u64 = 0;
pub(crate) const OP_FREE: u64 = 1;
pub(crate) const OP_ESCAPE: u64 = 2;

/// A new allocation info: size, stack id. It takes the next index.
pub(crate) const ESC_INFO: u64 = 0;
/// The time changed: zig-zag delta from the previous time.
pub(crate) const ESC_TIME: u64 = 1;
/// The thread changed: its id.
pub(crate) const ESC_TID: u64 = 2;
/// A free of an address that is not live.
pub(crate) const ESC_FREE_UNKNOWN: u64 = 3;
/// The next allocation is at an address still live with this info (an older block that is
/// then never released).
pub(crate) const ESC_REUSE: u64 = 4;
/// The process starts over: no infos, no live blocks.
pub(crate) const ESC_RESET: u64 = 5;
/// A `rec --max-size` segment starts: as `ESC_RESET`, then the time (absolute) as operand;
/// the process's live blocks follow as carried allocations.
pub(crate) const ESC_CARRY_START: u64 = 6;
/// The next allocation is a block carried from an earlier segment, not a new one.
pub(crate) const ESC_CARRIED: u64 = 7;

/// A block the writer stops tracking (it is still live): operands its info index and its
/// address. Its free, if it comes, is an `ESC_FREE_ADDR`.
pub(crate) const ESC_UNTRACK: u64 = 8;
/// A free of an address the writer does not track: operand the address. The block is one
/// the writer untracked, or (as `ESC_FREE_UNKNOWN`) none that is live.
pub(crate) const ESC_FREE_ADDR: u64 = 9;
/// An index taken over by another allocation info (no live block uses it any more): operands
/// the index, size, stack. See [`crate::heap_infos`].
pub(crate) const ESC_INFO_AGAIN: u64 = 10;

/// Live blocks the writer tracks by default, all processes together: 3/4 of a 2^18-slot
/// table, 4 MiB (see `HeapEncoder::set_live_limit`).
pub const DEFAULT_LIVE_LIMIT: usize = 3 << 16;

/// Blocks untracked at a time once past the limit (amortizes the table scan).
const UNTRACK_BATCH: usize = 64;

/// The handle of frees of addresses that were not live: never the handle of a live block.
pub const UNKNOWN_BLOCK: u64 = u64::MAX;

/// Events in one heap record at most: bounds the writer's pending bytes.
pub const MAX_EVENTS: usize = 8192;

/// Allocation infos and live blocks of one process at most (far beyond any real program; a
/// hostile file cannot make the reader allocate without bound).
pub(crate) const MAX_ENTRIES: usize = 1 << 28;

fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// One heap event as the writer receives it (see [`crate::FrameWriter::heap_events`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapEvent {
    /// Thread id.
    pub tid: u32,
    /// Time on the header's clock, nanoseconds.
    pub time: u64,
    /// The block's address.
    pub addr: u64,
    /// Requested size (allocations).
    pub size: u64,
    /// Trace-tree id of the allocating stack (allocations).
    pub stack: u64,
    /// An allocation (else a free).
    pub alloc: bool,
}

/// Live heap blocks per process, as (address, size, stack): what a new `rec --max-size`
/// segment carries (see `HeapEncoder::take_live`).
pub type LiveSet = Vec<(u32, Vec<(u64, u64, u64)>)>;

/// How many events ahead the encoder prefetches the live map's slot.
const PREFETCH: usize = 16;

/// The writer's view of one process.
#[derive(Default)]
struct EncProc {
    infos: InfoTable,
    live: LiveMap,
    time: u64,
    tid: u32,
    /// Some block was untracked: frees of untracked addresses carry the address.
    untracked: bool,
}

impl EncProc {
    /// Starts loading what `ev` will look up: its live-map slot and, for an allocation,
    /// its info's index slot.
    #[inline]
    fn prefetch(&self, ev: &HeapEvent) {
        self.live.prefetch(ev.addr);
        if ev.alloc {
            self.infos.prefetch(ev.size, ev.stack);
        }
    }
}

/// Turns heap events into heap records (the writer's side). Memory: per process one entry per
/// allocation info and one per live block it tracks (at most the live limit, see
/// [`HeapEncoder::set_live_limit`]), as `heaptrack_interpret` keeps.
pub struct HeapEncoder {
    procs: IntMap<u32, EncProc>,
    /// The process of the record being built, if one is.
    pid: Option<u32>,
    events: usize,
    body: Vec<u8>,
    live_limit: usize,
    /// Draws the blocks to untrack (see `LiveMap::evict`).
    rng: u64,
    scratch: Vec<(u64, u32)>,
    /// Infos per process before unused indexes are taken over.
    info_limit: usize,
    /// Blocks untracked since the count was last taken, all processes together (some may
    /// have been freed since: the writer cannot tell which frees were theirs).
    untracked: u64,
}

impl Default for HeapEncoder {
    fn default() -> Self {
        HeapEncoder {
            procs: IntMap::default(),
            pid: None,
            events: 0,
            body: Vec::new(),
            live_limit: DEFAULT_LIVE_LIMIT,
            rng: 0x2545_f491_4f6c_dd1d,
            scratch: Vec::new(),
            info_limit: DEFAULT_INFO_LIMIT,
            untracked: 0,
        }
    }
}

impl HeapEncoder {
    /// Tracks at most `n` live blocks (all processes together; at least [`UNTRACK_BATCH`]).
    /// The writer's memory for live blocks is then at most about 21 bytes times `n` whatever
    /// the program does; blocks past it cost their address in the file when freed.
    pub fn set_live_limit(&mut self, n: usize) {
        self.live_limit = n.max(UNTRACK_BATCH);
    }

    /// Takes over unused info indexes past `n` infos per process (tests use a small `n`).
    #[cfg(test)]
    pub fn set_info_limit(&mut self, n: usize) {
        self.info_limit = n;
    }

    /// Info indexes process `pid` holds (tests).
    #[cfg(test)]
    pub fn infos(&self, pid: u32) -> usize {
        self.procs.get(&pid).map_or(0, |p| p.infos.len())
    }

    /// Blocks untracked (past the live limit) since the last call, zeroing the count: a new
    /// segment's carried set ([`HeapEncoder::take_live`]) does not hold them, so at most
    /// this many live blocks are lost at a segment boundary.
    pub fn take_untracked(&mut self) -> u64 {
        std::mem::take(&mut self.untracked)
    }

    /// Whether an event of `pid` can join the record being built; if not, the caller first
    /// takes it ([`HeapEncoder::take`]).
    pub fn accepts(&self, pid: u32) -> bool {
        self.pid.is_none_or(|p| p == pid) && self.events < MAX_EVENTS
    }

    /// How many more events the record being built takes.
    pub fn room(&self) -> usize {
        MAX_EVENTS - self.events
    }

    /// Adds events of process `pid` (the caller checked [`HeapEncoder::accepts`] and
    /// [`HeapEncoder::room`]). The live map's slot of each event, and an allocation's info
    /// slot, are prefetched a few events ahead: with the heap's blocks spread everywhere and
    /// a C++ program's many call sites, most look-ups would otherwise wait for memory.
    pub fn events(&mut self, pid: u32, events: &[HeapEvent]) {
        self.pid = Some(pid);
        self.events += events.len();
        let others: usize = self
            .procs
            .iter()
            .filter(|(&q, _)| q != pid)
            .map(|(_, p)| p.live.len())
            .sum();
        let limit = self.live_limit.saturating_sub(others).max(UNTRACK_BATCH);
        let mut e = Enc::new(&mut self.body);
        let p = self.procs.entry(pid).or_insert_with(|| {
            e.u64(ESC_RESET << 2 | OP_ESCAPE);
            EncProc::default()
        });
        for ahead in events.iter().take(PREFETCH) {
            p.prefetch(ahead);
        }
        for (i, ev) in events.iter().enumerate() {
            if let Some(ahead) = events.get(i + PREFETCH) {
                p.prefetch(ahead);
            }
            if p.tid != ev.tid {
                e.u64(ESC_TID << 2 | OP_ESCAPE);
                e.u64(ev.tid.into());
                p.tid = ev.tid;
            }
            if p.time != ev.time {
                e.u64(ESC_TIME << 2 | OP_ESCAPE);
                e.u64(zigzag(ev.time.wrapping_sub(p.time) as i64));
                p.time = ev.time;
            }
            if ev.alloc {
                let info = announce(&mut e, &mut p.infos, ev.size, ev.stack, self.info_limit);
                if p.live.len() >= limit {
                    p.live
                        .evict(UNTRACK_BATCH, &mut self.rng, &mut self.scratch);
                    for &(addr, old) in &self.scratch {
                        e.u64(ESC_UNTRACK << 2 | OP_ESCAPE);
                        e.u64(old.into());
                        e.u64(addr);
                        p.infos.died(old);
                    }
                    self.untracked += self.scratch.len() as u64;
                    p.untracked = true;
                }
                if let Some(old) = p.live.insert(ev.addr, info) {
                    e.u64(ESC_REUSE << 2 | OP_ESCAPE);
                    e.u64(old.into());
                    p.infos.died(old);
                }
                p.infos.born(info);
                e.u64(u64::from(info) << 2 | OP_ALLOC);
            } else {
                match p.live.remove(ev.addr) {
                    Some(info) => {
                        p.infos.died(info);
                        e.u64(u64::from(info) << 2 | OP_FREE)
                    }
                    None if p.untracked => {
                        e.u64(ESC_FREE_ADDR << 2 | OP_ESCAPE);
                        e.u64(ev.addr);
                    }
                    None => e.u64(ESC_FREE_UNKNOWN << 2 | OP_ESCAPE),
                }
            }
        }
    }

    /// Adds an allocation (the caller checked [`HeapEncoder::accepts`]).
    #[cfg(test)]
    pub fn alloc(&mut self, pid: u32, tid: u32, time: u64, addr: u64, size: u64, stack: u64) {
        self.events(
            pid,
            &[HeapEvent {
                tid,
                time,
                addr,
                size,
                stack,
                alloc: true,
            }],
        );
    }

    /// Adds a free (the caller checked [`HeapEncoder::accepts`]).
    #[cfg(test)]
    pub fn free(&mut self, pid: u32, tid: u32, time: u64, addr: u64) {
        self.events(
            pid,
            &[HeapEvent {
                tid,
                time,
                addr,
                size: 0,
                stack: 0,
                alloc: false,
            }],
        );
    }

    /// Starts process `pid`'s carried live set in a new segment begun at `time` (the caller
    /// took the record being built, if it was another process's): a fresh state, announced
    /// as `ESC_CARRY_START`.
    pub fn carry_start(&mut self, pid: u32, time: u64) {
        self.pid = Some(pid);
        let mut e = Enc::new(&mut self.body);
        e.u64(ESC_CARRY_START << 2 | OP_ESCAPE);
        e.u64(time);
        self.procs.insert(
            pid,
            EncProc {
                time,
                ..EncProc::default()
            },
        );
    }

    /// Adds one carried block of `pid` (after [`HeapEncoder::carry_start`]; the caller
    /// checked [`HeapEncoder::accepts`]).
    pub fn carried(&mut self, pid: u32, addr: u64, size: u64, stack: u64) {
        self.pid = Some(pid);
        self.events += 1;
        let mut e = Enc::new(&mut self.body);
        let p = self.procs.entry(pid).or_default();
        let info = announce(&mut e, &mut p.infos, size, stack, self.info_limit);
        if let Some(old) = p.live.insert(addr, info) {
            p.infos.died(old);
        }
        p.infos.born(info);
        e.u64(ESC_CARRIED << 2 | OP_ESCAPE);
        e.u64(u64::from(info) << 2 | OP_ALLOC);
    }

    /// Each known process's live blocks as (address, size, stack), for the next segment's
    /// carried live set; processes with none included (their carry start still tells a
    /// reader to drop what it holds). Leaves the encoder empty. Allocates one list per
    /// process, 24 bytes per live block.
    pub fn take_live(&mut self) -> LiveSet {
        let mut out = Vec::with_capacity(self.procs.len());
        for (pid, p) in self.procs.drain() {
            let blocks = p
                .live
                .iter()
                .filter_map(|(addr, i)| p.infos.key(i).map(|(s, st)| (addr, s, st)))
                .collect();
            out.push((pid, blocks));
        }
        out.sort_unstable_by_key(|(pid, _)| *pid);
        out
    }

    /// Live blocks the encoder tracks, all processes together.
    pub fn live_blocks(&self) -> usize {
        self.procs.values().map(|p| p.live.len()).sum()
    }

    /// Forgets a process (its image was replaced by exec, or it ended): its next events start
    /// a fresh state in writer and reader alike. Frees its memory.
    pub fn forget(&mut self, pid: u32) {
        self.procs.remove(&pid);
    }

    /// Appends the record being built to `out` (tag `HEAP_EVENTS`, length, then the payload:
    /// pid and codes), leaving the encoder ready for the next one; `false` when there was
    /// nothing to write. The codes are copied once, from the encoder into `out`.
    pub fn append_record(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(pid) = self.pid.take() else {
            return false;
        };
        let mut pid_varint = [0u8; MAX_VARINT];
        let n = varint(pid.into(), &mut pid_varint);
        out.push(tag::HEAP_EVENTS);
        Enc::new(out).u64((n + self.body.len()) as u64);
        out.extend_from_slice(&pid_varint[..n]);
        out.extend_from_slice(&self.body);
        self.body.clear();
        self.events = 0;
        true
    }
}

pub use crate::heap_decode::HeapDecoder;

/// The index of (`size`, `stack`) in `infos`, announced in `e` when new or taken over.
fn announce(e: &mut Enc<'_>, infos: &mut InfoTable, size: u64, stack: u64, limit: usize) -> u32 {
    let interned = infos.intern(size, stack, limit);
    match interned {
        Interned::Known(_) => {}
        Interned::New(_) => e.u64(ESC_INFO << 2 | OP_ESCAPE),
        Interned::Again(i) => {
            e.u64(ESC_INFO_AGAIN << 2 | OP_ESCAPE);
            e.u64(i.into());
        }
    }
    if !matches!(interned, Interned::Known(_)) {
        e.u64(size);
        e.u64(stack);
    }
    interned.index()
}

#[cfg(test)]
#[path = "heap_stream_tests.rs"]
mod tests;
