//! heaptrack's counting rules for one address space: which block a free releases, and whether
//! that free makes the allocation *temporary*.
//!
//! These are the rules of `heaptrack_print` 1.4 (its `AccumulatedTraceData::read`, fed by
//! `heaptrack_interpret`), restated so that the numbers agree on the same program:
//!
//! - Every allocation event counts, and adds its size to the live bytes. An allocation at an
//!   address that is still live replaces the map entry; the older block is never released
//!   again (it stays live, and so leaked), as in heaptrack's pointer map.
//! - A free of an address that is not live (freed twice, allocated before recording started,
//!   or `free(NULL)`) is ignored entirely: it does not even reset the marker below, because
//!   `heaptrack_interpret` drops it before the analysis sees it.
//! - The analysis keeps a marker: the *allocation info* (size and stack, interned) of the last
//!   allocation. A free is temporary when the freed block's info equals the marker, so a
//!   different block with the same size and stack allocated in between does not break it, but
//!   any allocation with another size or stack does. After every counted free the marker is
//!   reset to info index 0, which in heaptrack is the first (size, stack) pair of the run: a
//!   block with that pair freed right after another free therefore also counts as temporary.
//! - `realloc(old, n) → new` arrives as a free of `old` and an allocation of `new`, so a
//!   realloc right after the allocation it resizes makes that allocation temporary.

use rustc_hash::FxHashMap;

use crate::analysis::heap::live::LiveMap;
use crate::analysis::heap::trace_tree::TraceId;

/// heaptrack's *allocation info*: an allocation's size and stack.
pub type Info = (u64, TraceId);

/// A live block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// Requested size.
    pub size: u64,
    /// Allocating stack.
    pub trace: TraceId,
}

/// What a counted free released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freed {
    /// The block.
    pub block: Block,
    /// Whether heaptrack counts its allocation as temporary.
    pub temporary: bool,
}

/// The heap of one address space (a process between execs). Memory: each distinct (size,
/// stack) pair once, and about 4 bytes per live block ([`LiveMap`]); nothing per past event.
#[derive(Default)]
pub struct SpaceHeap {
    /// Interned infos; a live block holds its info's index + 1.
    infos: Vec<Block>,
    info_index: FxHashMap<Info, u32>,
    /// Per trace, the size and info index of its last allocation: a trace mostly allocates
    /// one size (a C++ site, its class's), so this answers most look-ups without hashing
    /// (on protoc's recording the hash map's look-up was a sixth of the report's time).
    last_of_trace: Vec<(u64, u32)>,
    live: LiveMap,
    marker: Option<u32>,
    first_info: Option<u32>,
}

impl SpaceHeap {
    fn intern(&mut self, block: Block) -> u32 {
        let t = block.trace as usize;
        if let Some(&(size, i)) = self.last_of_trace.get(t) {
            if size == block.size && i != u32::MAX {
                return i;
            }
        }
        let i = self.intern_slow(block);
        if t >= self.last_of_trace.len() {
            self.last_of_trace.resize(t + 1, (0, u32::MAX));
        }
        self.last_of_trace[t] = (block.size, i);
        i
    }

    fn intern_slow(&mut self, block: Block) -> u32 {
        let next = self.infos.len() as u32;
        let i = *self
            .info_index
            .entry((block.size, block.trace))
            .or_insert(next);
        if i == next {
            self.infos.push(block);
        }
        i
    }

    /// Counts an allocation. Returns the block this one replaced when `addr` was still live
    /// (the caller keeps it counted as live for ever, as heaptrack does).
    pub fn alloc(&mut self, addr: u64, block: Block) -> Option<Block> {
        let info = self.intern(block);
        if self.first_info.is_none() {
            self.first_info = Some(info);
        }
        self.marker = Some(info);
        self.live
            .insert(addr, info + 1)
            .map(|old| self.infos[old as usize - 1])
    }

    /// Takes a block live since before the recording's first segment (a `rec --max-size`
    /// segment's carried live set): live, and no allocation for the temporary rule.
    pub fn carry(&mut self, addr: u64, block: Block) -> Option<Block> {
        let info = self.intern(block);
        self.live
            .insert(addr, info + 1)
            .map(|old| self.infos[old as usize - 1])
    }

    /// Forgets every live block and returns them (a segment's carried live set replaces
    /// them).
    pub fn take_live(&mut self) -> Vec<Block> {
        let blocks = self.live().collect();
        self.live = LiveMap::default();
        self.marker = self.first_info;
        blocks
    }

    /// Counts a free: `None` when `addr` is not live (ignored), else what was released.
    pub fn free(&mut self, addr: u64) -> Option<Freed> {
        let info = self.live.remove(addr)? - 1;
        let temporary = self.marker == Some(info);
        self.marker = self.first_info;
        Some(Freed {
            block: self.infos[info as usize],
            temporary,
        })
    }

    /// Blocks still live.
    pub fn live(&self) -> impl Iterator<Item = Block> + '_ {
        self.live.values().map(|v| self.infos[v as usize - 1])
    }

    /// Number of blocks still live.
    pub fn live_count(&self) -> usize {
        self.live.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(size: u64, trace: TraceId) -> Block {
        Block { size, trace }
    }

    fn temp(h: &mut SpaceHeap, addr: u64) -> Option<bool> {
        h.free(addr).map(|f| f.temporary)
    }

    #[test]
    fn free_right_after_its_allocation_is_temporary() {
        let mut h = SpaceHeap::default();
        h.alloc(0x10, b(8, 1));
        assert_eq!(temp(&mut h, 0x10), Some(true));
        h.alloc(0x10, b(16, 2));
        h.alloc(0x20, b(24, 3));
        assert_eq!(temp(&mut h, 0x10), Some(false));
        assert_eq!(temp(&mut h, 0x20), Some(false), "a free in between resets");
    }

    #[test]
    fn a_trace_that_changes_size_and_back_keeps_one_info_per_pair() {
        // The per-trace cache holds the last size only: (8, 1) after (16, 1) must find the
        // info (8, 1) had, or the marker would no longer match it.
        let mut h = SpaceHeap::default();
        h.alloc(0x10, b(8, 1));
        h.alloc(0x20, b(16, 1));
        h.alloc(0x30, b(8, 1));
        assert_eq!(
            temp(&mut h, 0x10),
            Some(true),
            "same info as the last allocation"
        );
        assert_eq!(h.infos.len(), 2);
    }

    #[test]
    fn same_size_and_stack_in_between_still_counts() {
        // heaptrack compares allocation infos, not addresses.
        let mut h = SpaceHeap::default();
        h.alloc(0x10, b(99, 9)); // info 0
        h.alloc(0x20, b(8, 1));
        h.alloc(0x30, b(8, 1));
        assert_eq!(temp(&mut h, 0x20), Some(true));
    }

    #[test]
    fn marker_resets_to_the_first_info() {
        let mut h = SpaceHeap::default();
        h.alloc(0x10, b(99, 9)); // the first info of the run
        h.alloc(0x20, b(99, 9));
        h.alloc(0x30, b(5, 5));
        assert_eq!(temp(&mut h, 0x30), Some(true));
        // Marker is now info 0 = (99, 9): this free counts although 0x20 was not the last.
        assert_eq!(temp(&mut h, 0x20), Some(true));
        assert_eq!(temp(&mut h, 0x10), Some(true));
    }

    #[test]
    fn unknown_frees_are_ignored_and_keep_the_marker() {
        let mut h = SpaceHeap::default();
        h.alloc(0x10, b(1, 1));
        h.alloc(0x20, b(8, 2));
        assert_eq!(temp(&mut h, 0x999), None);
        assert_eq!(temp(&mut h, 0), None);
        assert_eq!(temp(&mut h, 0x20), Some(true));
        assert_eq!(temp(&mut h, 0x20), None, "double free");
    }

    #[test]
    fn realloc_chain() {
        // p = malloc(8); p = realloc(p, 16); p = realloc(p, 32); free(p)
        let mut h = SpaceHeap::default();
        h.alloc(0x10, b(8, 1));
        assert_eq!(temp(&mut h, 0x10), Some(true));
        h.alloc(0x10, b(16, 2));
        assert_eq!(temp(&mut h, 0x10), Some(true));
        h.alloc(0x40, b(32, 2));
        assert_eq!(temp(&mut h, 0x40), Some(true));
        // With an allocation elsewhere between the resizes, nothing is temporary.
        h.alloc(0x10, b(8, 1));
        h.alloc(0x80, b(100, 3));
        assert_eq!(temp(&mut h, 0x10), Some(false));
    }

    #[test]
    fn reused_live_address_returns_the_orphan() {
        let mut h = SpaceHeap::default();
        assert_eq!(h.alloc(0x10, b(8, 1)), None);
        assert_eq!(h.alloc(0x10, b(4, 2)), Some(b(8, 1)));
        assert_eq!(h.live_count(), 1);
        assert_eq!(h.free(0x10).unwrap().block, b(4, 2));
    }
}
