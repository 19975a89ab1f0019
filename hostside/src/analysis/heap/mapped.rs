//! Memory beyond malloc: the program's own anonymous mappings (`AnonMap` records of
//! `rec --heap`), counted apart from the allocator's blocks, by calling stack.
//!
//! A mapping is one `mmap` call: its range (rounded up to pages, as the kernel maps it), its
//! stack and its time. An unmap releases whatever part of a recorded range it covers and
//! nothing else (the interposer reports every `munmap`, file mappings' too): a partial unmap
//! shrinks or splits the range, and the mapping's lifetime ends when its last page is gone.
//! A remap is counted as heaptrack counts a `realloc`: the recorded part of the old range, if
//! any, ends there, and the new range is a new mapping of the remap's stack (a remap of memory
//! that was never recorded, a file mapping's, is no mapping). A map over recorded pages
//! (`MAP_FIXED`) releases them first.
//!
//! Memory: one range per live mapping piece (at most [`MAX_RANGES`], a bound on what a hostile
//! recording can make the analysis hold) and one small accumulator per stack that mapped.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use crate::processes::SpaceKey;

/// A mapping's stack as recorded: its address space and the board's trace-tree id. Turned
/// into a canonical trace once every node is known (the records come before the nodes in a
/// pass that reads the metadata first).
pub type StackKey = (SpaceKey, u64);

/// Live ranges held at most; mappings beyond are counted in [`MappingTotals::dropped`].
pub const MAX_RANGES: usize = 1 << 20;

/// Counts of one stack's mappings (or of all, in [`MappingTotals`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MappingCounts {
    /// `mmap` calls (and remaps that moved recorded memory).
    pub mappings: u64,
    /// Bytes mapped, pages rounded up.
    pub bytes: u64,
    /// Highest mapped bytes live at once.
    pub peak_bytes: u64,
    /// Bytes still mapped when the recording ended.
    pub leaked_bytes: u64,
    /// Mappings of which some page was still mapped at the end.
    pub leaked_mappings: u64,
    /// Mappings whose last page was unmapped: how many, and their lifetimes.
    pub ended: u64,
    /// Shortest lifetime of an ended mapping, ns.
    pub lifetime_min_ns: u64,
    /// Longest lifetime of an ended mapping, ns.
    pub lifetime_max_ns: u64,
    /// Sum of the ended mappings' lifetimes, ns.
    pub lifetime_total_ns: u64,
    /// First mapping's time, board clock.
    pub first_time: u64,
}

impl MappingCounts {
    fn ended(&mut self, lifetime: u64) {
        self.lifetime_min_ns = if self.ended == 0 {
            lifetime
        } else {
            self.lifetime_min_ns.min(lifetime)
        };
        self.lifetime_max_ns = self.lifetime_max_ns.max(lifetime);
        self.lifetime_total_ns = self.lifetime_total_ns.saturating_add(lifetime);
        self.ended += 1;
    }
}

/// Whole-recording numbers of the mappings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MappingTotals {
    /// Sums over the stacks; `peak_bytes` is the highest of all mapped bytes at once.
    pub counts: MappingCounts,
    /// Bytes unmapped that no recorded mapping held (file mappings, the allocator's memory,
    /// mappings made before the recording started).
    pub unmapped_elsewhere_bytes: u64,
    /// Mappings not followed because [`MAX_RANGES`] ranges were live.
    pub dropped: u64,
}

#[derive(Debug, Clone, Copy)]
struct Live {
    trace: StackKey,
    time: u64,
    bytes: u64,
}

/// The streaming state: live ranges per address space, mappings by id, counts by stack.
#[derive(Default)]
pub struct Mappings {
    page: u64,
    /// Per address space: range start → (end, mapping id).
    ranges: FxHashMap<SpaceKey, BTreeMap<u64, (u64, u64)>>,
    range_count: usize,
    live: FxHashMap<u64, Live>,
    next_id: u64,
    by_trace: FxHashMap<StackKey, MappingCounts>,
    /// Live bytes per stack.
    trace_live: FxHashMap<StackKey, u64>,
    live_bytes: u64,
    totals: MappingTotals,
}

impl Mappings {
    /// Empty, for a recording of `page_size`-byte pages (4096 when unknown).
    pub fn new(page_size: u64) -> Mappings {
        Mappings {
            page: if page_size.is_power_of_two() {
                page_size
            } else {
                4096
            },
            ..Mappings::default()
        }
    }

    fn round(&self, len: u64) -> u64 {
        len.checked_next_multiple_of(self.page)
            .unwrap_or(u64::MAX - self.page + 1)
    }

    /// A new mapping of `len` bytes at `addr`, called from `trace`.
    pub fn map(&mut self, space: SpaceKey, addr: u64, len: u64, trace: StackKey, time: u64) {
        let len = self.round(len);
        let end = addr.saturating_add(len);
        if len == 0 || end == addr {
            return;
        }
        self.release_range(space, addr, end, time);
        if self.range_count >= MAX_RANGES {
            self.totals.dropped += 1;
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.ranges
            .entry(space)
            .or_default()
            .insert(addr, (end, id));
        self.range_count += 1;
        self.live.insert(
            id,
            Live {
                trace,
                time,
                bytes: len,
            },
        );
        let c = self.by_trace.entry(trace).or_default();
        if c.mappings == 0 {
            c.first_time = time;
        }
        c.mappings += 1;
        c.bytes = c.bytes.saturating_add(len);
        let own = self.trace_live.entry(trace).or_default();
        *own = own.saturating_add(len);
        c.peak_bytes = c.peak_bytes.max(*own);
        let t = &mut self.totals.counts;
        if t.mappings == 0 {
            t.first_time = time;
        }
        t.mappings += 1;
        t.bytes = t.bytes.saturating_add(len);
        self.live_bytes = self.live_bytes.saturating_add(len);
        t.peak_bytes = t.peak_bytes.max(self.live_bytes);
    }

    /// An unmap of `addr..addr+len`: releases the recorded pages in it; returns how many
    /// bytes were recorded.
    pub fn unmap(&mut self, space: SpaceKey, addr: u64, len: u64, time: u64) -> u64 {
        let len = self.round(len);
        let released = self.release_range(space, addr, addr.saturating_add(len), time);
        self.totals.unmapped_elsewhere_bytes = self
            .totals
            .unmapped_elsewhere_bytes
            .saturating_add(len.saturating_sub(released));
        released
    }

    /// Releases the recorded pages in `addr..end`; returns how many bytes they were.
    fn release_range(&mut self, space: SpaceKey, addr: u64, end: u64, time: u64) -> u64 {
        let Some(map) = self.ranges.get_mut(&space) else {
            return 0;
        };
        let hit: Vec<(u64, u64, u64)> = map
            .range(..end)
            .rev()
            .take_while(|(_, &(e, _))| e > addr)
            .map(|(&s, &(e, id))| (s, e, id))
            .collect();
        let mut released = 0u64;
        let mut cuts = Vec::with_capacity(hit.len());
        for (s, e, id) in hit {
            map.remove(&s);
            self.range_count -= 1;
            for (a, b) in [(s, addr), (end, e)] {
                if a < b && self.range_count < MAX_RANGES {
                    map.insert(a, (b, id));
                    self.range_count += 1;
                }
            }
            let cut = e.min(end) - s.max(addr);
            released = released.saturating_add(cut);
            cuts.push((id, cut));
        }
        for (id, cut) in cuts {
            self.release(id, cut, time);
        }
        released
    }

    /// A remap of `old..old+old_len` to `new..new+new_len`, called from `trace`.
    #[allow(clippy::too_many_arguments)]
    pub fn remap(
        &mut self,
        space: SpaceKey,
        old: u64,
        old_len: u64,
        new: u64,
        new_len: u64,
        trace: StackKey,
        time: u64,
    ) {
        let old_end = old.saturating_add(self.round(old_len));
        if self.release_range(space, old, old_end, time) > 0 {
            self.map(space, new, new_len, trace, time);
        }
    }

    fn release(&mut self, id: u64, bytes: u64, time: u64) {
        let Some(l) = self.live.get_mut(&id) else {
            return;
        };
        l.bytes = l.bytes.saturating_sub(bytes);
        let (trace, left, born) = (l.trace, l.bytes, l.time);
        self.live_bytes = self.live_bytes.saturating_sub(bytes);
        if let Some(own) = self.trace_live.get_mut(&trace) {
            *own = own.saturating_sub(bytes);
        }
        if left == 0 {
            self.live.remove(&id);
            let lifetime = time.saturating_sub(born);
            if let Some(c) = self.by_trace.get_mut(&trace) {
                c.ended(lifetime);
            }
            self.totals.counts.ended(lifetime);
        }
    }

    /// The counts by stack (live bytes at the end as leaks) and the totals, once the pass is
    /// over; stacks in the order of their first mapping.
    pub fn finish(mut self) -> (Vec<(StackKey, MappingCounts)>, MappingTotals) {
        for l in self.live.values() {
            if let Some(c) = self.by_trace.get_mut(&l.trace) {
                c.leaked_bytes = c.leaked_bytes.saturating_add(l.bytes);
                c.leaked_mappings += 1;
            }
            let t = &mut self.totals.counts;
            t.leaked_bytes = t.leaked_bytes.saturating_add(l.bytes);
            t.leaked_mappings += 1;
        }
        let mut rows: Vec<(StackKey, MappingCounts)> = self.by_trace.into_iter().collect();
        rows.sort_unstable_by_key(|(t, c)| (c.first_time, *t));
        (rows, self.totals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: SpaceKey = (7, 0);
    const fn k(id: u64) -> StackKey {
        (S, id)
    }
    const MIB: u64 = 1 << 20;

    #[test]
    fn map_touch_unmap_has_its_size_and_lifetime() {
        let mut m = Mappings::new(4096);
        m.map(S, 0x1000_0000, 64 * MIB, k(3), 1_000);
        assert_eq!(m.unmap(S, 0x1000_0000, 64 * MIB, 501_000), 64 * MIB);
        let (rows, t) = m.finish();
        let c = rows[0].1;
        assert_eq!((rows.len(), rows[0].0), (1, k(3)));
        assert_eq!(
            (c.mappings, c.bytes, c.peak_bytes, c.leaked_bytes),
            (1, 64 * MIB, 64 * MIB, 0)
        );
        assert_eq!(
            (c.ended, c.lifetime_min_ns, c.lifetime_max_ns),
            (1, 500_000, 500_000)
        );
        assert_eq!(t.unmapped_elsewhere_bytes, 0);
    }

    #[test]
    fn partial_unmaps_split_and_the_last_page_ends_the_mapping() {
        let mut m = Mappings::new(4096);
        m.map(S, 0x10000, 5 * 4096, k(1), 0);
        // The middle page, then the first, then a range past the end and the rest.
        assert_eq!(m.unmap(S, 0x12000, 4096, 10), 4096);
        assert_eq!(m.unmap(S, 0x10000, 100, 20), 4096);
        assert_eq!(m.unmap(S, 0x11000, 4096, 30), 4096);
        let (rows, _) = m.finish();
        assert_eq!(rows[0].1.leaked_bytes, 2 * 4096);
        assert_eq!(rows[0].1.ended, 0);
        let mut m = Mappings::new(4096);
        m.map(S, 0x10000, 5 * 4096, k(1), 0);
        m.unmap(S, 0x12000, 4096, 10);
        assert_eq!(m.unmap(S, 0x0, 0x100000, 40), 4 * 4096);
        let (rows, t) = m.finish();
        assert_eq!((rows[0].1.ended, rows[0].1.lifetime_max_ns), (1, 40));
        assert_eq!(t.unmapped_elsewhere_bytes, 0x100000 - 4 * 4096);
    }

    #[test]
    fn remaps_move_recorded_memory_only() {
        let mut m = Mappings::new(4096);
        m.map(S, 0x10000, 2 * 4096, k(1), 0);
        // Grow and move: the old mapping ends, a new one of the remap's stack begins.
        m.remap(S, 0x10000, 2 * 4096, 0x80000, 8 * 4096, k(2), 50);
        // A file mapping's remap is nothing.
        m.remap(S, 0x9000_0000, 4096, 0xa000_0000, 8192, k(3), 60);
        // Shrink in place.
        m.remap(S, 0x80000, 8 * 4096, 0x80000, 4096, k(2), 70);
        let (rows, t) = m.finish();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[0].0, rows[0].1.ended, rows[0].1.leaked_bytes),
            (k(1), 1, 0)
        );
        let c = rows[1].1;
        assert_eq!(
            (rows[1].0, c.mappings, c.peak_bytes, c.leaked_bytes),
            (k(2), 2, 8 * 4096, 4096)
        );
        assert_eq!((t.counts.mappings, t.counts.peak_bytes), (3, 8 * 4096));
        assert_eq!(t.unmapped_elsewhere_bytes, 0);
    }

    #[test]
    fn fixed_maps_replace_and_hostile_ranges_do_not_panic() {
        let mut m = Mappings::new(4096);
        m.map(S, 0x10000, 4 * 4096, k(1), 0);
        m.map(S, 0x11000, 4096, k(2), 5);
        m.map(S, u64::MAX - 10, u64::MAX, k(3), 6);
        m.unmap(S, u64::MAX - 4096, u64::MAX, 7);
        m.remap(S, 0, u64::MAX, u64::MAX, u64::MAX, k(4), 8);
        let (rows, t) = m.finish();
        assert!(t.counts.mappings >= 2);
        assert_eq!(rows[0].1.bytes, 4 * 4096);
    }
}
