//! The heap's allocations cut in time slices, for views that select a time range or a thread
//! after the analysis (the HTML report's timeline): per allocating trace and thread, the slice
//! each block was allocated in and the slice it was freed in (or none), with counts, bytes and
//! heaptrack's temporary flag. A range of slices `[a, b]` then holds exactly the allocations made in it
//! (count and bytes) and the blocks still live at its end, as `--from/--to` on the same
//! slice edges counts them (see [`crate::filter`]).
//!
//! Only on request ([`crate::analysis::heap::HeapOptions::slices`]): it costs a hash map
//! entry per live block (the slice it was born in) and one cell per distinct (trace,
//! allocation slice, free slice).

use rustc_hash::FxHashMap;

use crate::analysis::heap::trace_tree::TraceId;
use crate::processes::SpaceKey;

/// Where the slices lie on the board clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceGrid {
    /// Board time of the first slice's start, ns (earlier events count in the first slice).
    pub start: u64,
    /// Width of a slice, ns.
    pub slice_ns: u64,
    /// How many slices (later events count in the last one).
    pub count: u32,
}

impl SliceGrid {
    /// The slice `time` falls in.
    pub fn slice(&self, time: u64) -> u32 {
        let i = time.saturating_sub(self.start) / self.slice_ns.max(1);
        i.min(u64::from(self.count.saturating_sub(1))) as u32
    }
}

/// One cell: blocks of one trace allocated by one thread in one slice and freed in another
/// (or never).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SliceCell {
    /// Index into the profile's traces.
    pub trace: u32,
    /// The thread that allocated them (its process is the trace's).
    pub tid: u32,
    /// The slice they were allocated in.
    pub allocated: u32,
    /// The slice they were freed in; `None` while live at the end.
    pub freed: Option<u32>,
    /// How many blocks.
    pub allocations: u64,
    /// Their bytes.
    pub bytes: u64,
    /// How many of them heaptrack counts temporary.
    pub temporary: u64,
}

/// The log the heap pass keeps when asked.
pub(super) struct SliceLog {
    grid: SliceGrid,
    /// Live block → (allocating thread, allocation slice).
    born: FxHashMap<(SpaceKey, u64), (u32, u32)>,
    /// (trace, thread, allocation slice, free slice or `u32::MAX`) → (count, bytes, temporary).
    cells: FxHashMap<(TraceId, u32, u32, u32), [u64; 3]>,
}

const LIVE: u32 = u32::MAX;

impl SliceLog {
    pub(super) fn new(grid: SliceGrid) -> Self {
        SliceLog {
            grid,
            born: FxHashMap::default(),
            cells: FxHashMap::default(),
        }
    }

    /// A block of `size` bytes of `trace` allocated at `addr` at `time` by thread `tid`.
    pub(super) fn alloc(
        &mut self,
        space: SpaceKey,
        addr: u64,
        (size, trace): (u64, TraceId),
        time: u64,
        tid: u32,
    ) {
        let s = self.grid.slice(time);
        self.born.insert((space, addr), (tid, s));
        let c = self.cells.entry((trace, tid, s, LIVE)).or_default();
        c[0] += 1;
        c[1] = c[1].saturating_add(size);
    }

    /// The block at `addr` (of `size` bytes, `trace`) freed at `time`.
    pub(super) fn free(
        &mut self,
        space: SpaceKey,
        addr: u64,
        (size, trace): (u64, TraceId),
        time: u64,
        temporary: bool,
    ) {
        let Some((tid, s)) = self.born.remove(&(space, addr)) else {
            return;
        };
        if let Some(c) = self.cells.get_mut(&(trace, tid, s, LIVE)) {
            c[0] = c[0].saturating_sub(1);
            c[1] = c[1].saturating_sub(size);
        }
        let c = self
            .cells
            .entry((trace, tid, s, self.grid.slice(time)))
            .or_default();
        c[0] += 1;
        c[1] = c[1].saturating_add(size);
        c[2] += u64::from(temporary);
    }

    /// The cells, traces renumbered by `row` (traces without a row are left out), in a
    /// stable order.
    pub(super) fn cells(self, row: impl Fn(TraceId) -> Option<usize>) -> Vec<SliceCell> {
        let mut cells: Vec<SliceCell> = self
            .cells
            .into_iter()
            .filter(|(_, c)| c[0] > 0)
            .filter_map(|((t, tid, a, f), c)| {
                Some(SliceCell {
                    trace: row(t)? as u32,
                    tid,
                    allocated: a,
                    freed: (f != LIVE).then_some(f),
                    allocations: c[0],
                    bytes: c[1],
                    temporary: c[2],
                })
            })
            .collect();
        cells.sort_unstable_by_key(|c| (c.trace, c.tid, c.allocated, c.freed));
        cells
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_move_from_live_to_their_free_slice() {
        let grid = SliceGrid {
            start: 1000,
            slice_ns: 10,
            count: 4,
        };
        assert_eq!(
            (grid.slice(0), grid.slice(1019), grid.slice(5000)),
            (0, 1, 3)
        );
        let mut log = SliceLog::new(grid);
        let sp = (1, 0);
        log.alloc(sp, 0x10, (8, 7), 1001, 3);
        log.alloc(sp, 0x20, (16, 7), 1002, 3);
        log.free(sp, 0x10, (8, 7), 1025, true);
        // A free of a block the log never saw (allocated outside a window) is no change.
        log.free(sp, 0x30, (4, 7), 1026, false);
        let cells = log.cells(|t| (t == 7).then_some(0));
        assert_eq!(
            cells,
            vec![
                SliceCell {
                    trace: 0,
                    tid: 3,
                    allocated: 0,
                    freed: None,
                    allocations: 1,
                    bytes: 16,
                    temporary: 0
                },
                SliceCell {
                    trace: 0,
                    tid: 3,
                    allocated: 0,
                    freed: Some(2),
                    allocations: 1,
                    bytes: 8,
                    temporary: 1
                },
            ]
        );
    }
}
