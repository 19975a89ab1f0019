//! The reader's side of the heap codes (see [`crate::heap_stream`] for the format): expands
//! heap records back into `Alloc`/`Free` records, with block handles in place of addresses.

use crate::codec::{Dec, DecodeError};
use crate::heap_stream::*;
use crate::int_map::IntMap;
use crate::record::{Alloc, Free, Item};

const NONE: u32 = u32::MAX;

/// The reader's view of one process: infos, and the live blocks of each info as a stack of
/// slots (a block's handle is `base + slot + 1`; slots are recycled, `base` moves past every
/// slot used when the process starts over, so no handle of an earlier image comes back).
#[derive(Default)]
struct DecProc {
    infos: Vec<(u64, u64)>,
    /// Per info: the most recent live slot, or NONE.
    heads: Vec<u32>,
    /// Per slot: the next live slot of the same info, or the next recycled slot.
    next: Vec<u32>,
    /// Most recently recycled slot, or NONE.
    spare: u32,
    base: u64,
    time: u64,
    tid: u32,
    /// Slot the next allocation takes over (an allocation at a still-live address).
    reuse: Option<u32>,
    /// The next allocation is a carried block.
    carried: bool,
    /// Live blocks the writer no longer tracks: address → slot (see `ESC_UNTRACK`).
    untracked: IntMap<u64, u32>,
}

impl DecProc {
    fn fresh(base: u64) -> DecProc {
        DecProc {
            spare: NONE,
            base,
            ..Default::default()
        }
    }

    fn handle(&self, slot: u32) -> u64 {
        self.base + u64::from(slot) + 1
    }

    /// Pops the most recent live slot of `info`.
    fn pop(&mut self, info: u32) -> Option<u32> {
        let head = self.heads.get_mut(info as usize)?;
        let slot = *head;
        if slot == NONE {
            return None;
        }
        *head = self.next[slot as usize];
        Some(slot)
    }

    fn push(&mut self, info: u32, slot: u32) {
        self.next[slot as usize] = self.heads[info as usize];
        self.heads[info as usize] = slot;
    }

    fn new_slot(&mut self) -> Option<u32> {
        if self.spare != NONE {
            let s = self.spare;
            self.spare = self.next[s as usize];
            return Some(s);
        }
        if self.next.len() >= MAX_ENTRIES {
            return None;
        }
        self.next.push(NONE);
        Some(self.next.len() as u32 - 1)
    }
}

/// Expands heap records into `Alloc`/`Free` records (the reader's side).
#[derive(Default)]
pub struct HeapDecoder {
    procs: IntMap<u32, DecProc>,
    /// The process of the last call, outside the map: a heap record's events all belong to
    /// one process, so the map is not consulted per event.
    current: Option<(u32, DecProc)>,
}

impl HeapDecoder {
    fn process(&mut self, pid: u32) -> &mut DecProc {
        if self.current.as_ref().is_some_and(|c| c.0 != pid) {
            if let Some((old, st)) = self.current.take() {
                self.procs.insert(old, st);
            }
        }
        let procs = &mut self.procs;
        let (_, st) = self.current.get_or_insert_with(|| {
            let st = procs.remove(&pid).unwrap_or_else(|| DecProc::fresh(0));
            (pid, st)
        });
        st
    }

    /// Decodes codes of process `pid` from `d` until one of them is an event, which is
    /// returned; `None` at the end of the record. An error means the record is malformed (a
    /// forged file or a writer bug; frames are checksummed).
    pub fn next(&mut self, pid: u32, d: &mut Dec<'_>) -> Result<Option<Item>, DecodeError> {
        let p = self.process(pid);
        while d.remaining() > 0 {
            let at = d.position();
            let v = d.u64()?;
            let arg = v >> 2;
            match v & 3 {
                OP_ALLOC => {
                    let info = u32::try_from(arg).map_err(|_| DecodeError::BadLength(at))?;
                    let &(size, stack) = p
                        .infos
                        .get(info as usize)
                        .ok_or(DecodeError::BadLength(at))?;
                    let slot = match p.reuse.take() {
                        Some(s) => s,
                        None => p.new_slot().ok_or(DecodeError::BadLength(at))?,
                    };
                    p.push(info, slot);
                    let a = Alloc {
                        time: p.time,
                        pid,
                        tid: p.tid,
                        addr: p.handle(slot),
                        size,
                        stack,
                    };
                    return Ok(Some(if std::mem::take(&mut p.carried) {
                        Item::Carried(a)
                    } else {
                        Item::Alloc(a)
                    }));
                }
                OP_FREE => {
                    let info = u32::try_from(arg).map_err(|_| DecodeError::BadLength(at))?;
                    let slot = p.pop(info).ok_or(DecodeError::BadLength(at))?;
                    p.next[slot as usize] = p.spare;
                    p.spare = slot;
                    return Ok(Some(Item::Free(Free {
                        time: p.time,
                        pid,
                        tid: p.tid,
                        addr: p.handle(slot),
                    })));
                }
                OP_ESCAPE => match arg {
                    ESC_INFO => {
                        let size = d.u64()?;
                        let stack = d.u64()?;
                        if p.infos.len() >= MAX_ENTRIES {
                            return Err(DecodeError::BadLength(at));
                        }
                        p.infos.push((size, stack));
                        p.heads.push(NONE);
                    }
                    ESC_INFO_AGAIN => {
                        let i = d.u32()? as usize;
                        let size = d.u64()?;
                        let stack = d.u64()?;
                        // Only an index no live block uses can be taken over.
                        match (p.infos.get_mut(i), p.heads.get(i)) {
                            (Some(info), Some(&NONE)) => *info = (size, stack),
                            _ => return Err(DecodeError::BadLength(at)),
                        }
                    }
                    ESC_TIME => p.time = p.time.wrapping_add(unzigzag(d.u64()?) as u64),
                    ESC_TID => p.tid = d.u32()?,
                    ESC_FREE_UNKNOWN => {
                        return Ok(Some(Item::Free(Free {
                            time: p.time,
                            pid,
                            tid: p.tid,
                            addr: UNKNOWN_BLOCK,
                        })))
                    }
                    ESC_UNTRACK => {
                        let info = d.u32()?;
                        let addr = d.u64()?;
                        let slot = p.pop(info).ok_or(DecodeError::BadLength(at))?;
                        if p.untracked.len() >= MAX_ENTRIES {
                            return Err(DecodeError::BadLength(at));
                        }
                        // An address untracked again without its free (a free rec missed):
                        // the older block is never released, as with an address reused.
                        p.untracked.insert(addr, slot);
                    }
                    ESC_FREE_ADDR => {
                        let addr = d.u64()?;
                        let handle = match p.untracked.remove(&addr) {
                            Some(slot) => {
                                p.next[slot as usize] = p.spare;
                                p.spare = slot;
                                p.handle(slot)
                            }
                            None => UNKNOWN_BLOCK,
                        };
                        return Ok(Some(Item::Free(Free {
                            time: p.time,
                            pid,
                            tid: p.tid,
                            addr: handle,
                        })));
                    }
                    ESC_REUSE => {
                        let info = d.u32()?;
                        let slot = p.pop(info).ok_or(DecodeError::BadLength(at))?;
                        // A second REUSE before the allocation would orphan a slot: refuse.
                        if p.reuse.replace(slot).is_some() {
                            return Err(DecodeError::BadLength(at));
                        }
                    }
                    ESC_RESET => {
                        let base = p.base + p.next.len() as u64;
                        *p = DecProc::fresh(base);
                    }
                    ESC_CARRY_START => {
                        let time = d.u64()?;
                        let base = p.base + p.next.len() as u64;
                        *p = DecProc::fresh(base);
                        p.time = time;
                        return Ok(Some(Item::CarryStart { pid, time }));
                    }
                    ESC_CARRIED => p.carried = true,
                    _ => return Err(DecodeError::BadLength(at)),
                },
                _ => return Err(DecodeError::BadLength(at)),
            }
        }
        Ok(None)
    }
}
