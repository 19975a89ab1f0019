//! The heap writer's allocation infos of one process: each distinct (size, stack) pair gets a
//! small index, written once, that allocations and frees then name (see
//! [`crate::heap_stream`]).
//!
//! Bounded for days: the interposer's trace tree starts over with fresh ids when it is full,
//! so a long run keeps meeting new (size, stack) pairs. Past [`InfoTable::limit`] a new pair
//! takes over the index of one that no tracked live block uses (`ESC_INFO_AGAIN`), so the
//! table holds at most the limit or, when more distinct pairs are live at once than that,
//! one per tracked live block (itself bounded, see `HeapEncoder::set_live_limit`).

use crate::probe_map::{Key, ProbeMap};

/// Infos per process before indexes are taken over: 64Ki pairs, about 3 MiB.
pub const DEFAULT_INFO_LIMIT: usize = 1 << 16;

/// What [`InfoTable::intern`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interned {
    /// The pair had this index already.
    Known(u32),
    /// A new index, to announce with `ESC_INFO`.
    New(u32),
    /// An index no live block used, now the pair's, to announce with `ESC_INFO_AGAIN`.
    Again(u32),
}

impl Interned {
    /// The pair's index.
    pub fn index(self) -> u32 {
        match self {
            Interned::Known(i) | Interned::New(i) | Interned::Again(i) => i,
        }
    }
}

/// The table.
#[derive(Default)]
pub struct InfoTable {
    /// (size, stack) → index, prefetchable: most look-ups miss the cache.
    index: ProbeMap<(u64, u64)>,
    /// The index of the one pair the map cannot hold ([`Key::EMPTY`]; no real allocation
    /// has it, a damaged ring could).
    empty_pair: Option<u32>,
    keys: Vec<(u64, u64)>,
    /// Tracked live blocks per index.
    live: Vec<u32>,
    /// Indexes whose live count fell to 0 (checked again when taken), each at most once.
    free: Vec<u32>,
    queued: Vec<bool>,
}

impl InfoTable {
    /// Starts loading the index slot of (`size`, `stack`): a hint for a look-up a few events
    /// later.
    #[inline]
    pub fn prefetch(&self, size: u64, stack: u64) {
        self.index.prefetch((size, stack));
    }

    fn index_get(&self, key: (u64, u64)) -> Option<u32> {
        match key == <(u64, u64)>::EMPTY {
            true => self.empty_pair,
            false => self.index.get(key),
        }
    }

    fn index_set(&mut self, key: (u64, u64), i: Option<u32>) {
        match (key == <(u64, u64)>::EMPTY, i) {
            (true, i) => self.empty_pair = i,
            (false, Some(i)) => _ = self.index.insert(key, i),
            (false, None) => _ = self.index.remove(key),
        }
    }

    /// The index of (`size`, `stack`), taking over an unused one when the table holds
    /// `limit` infos.
    pub fn intern(&mut self, size: u64, stack: u64, limit: usize) -> Interned {
        let key = (size, stack);
        if let Some(i) = self.index_get(key) {
            return Interned::Known(i);
        }
        if self.keys.len() >= limit {
            while let Some(i) = self.free.pop() {
                self.queued[i as usize] = false;
                if self.live[i as usize] == 0 {
                    self.index_set(self.keys[i as usize], None);
                    self.keys[i as usize] = key;
                    self.index_set(key, Some(i));
                    return Interned::Again(i);
                }
            }
        }
        let i = self.keys.len() as u32;
        self.keys.push(key);
        self.live.push(0);
        self.queued.push(false);
        self.index_set(key, Some(i));
        Interned::New(i)
    }

    /// A tracked block of info `i` became live.
    pub fn born(&mut self, i: u32) {
        if let Some(n) = self.live.get_mut(i as usize) {
            *n += 1;
        }
    }

    /// A tracked block of info `i` was freed, replaced or untracked.
    pub fn died(&mut self, i: u32) {
        let i = i as usize;
        let Some(n) = self.live.get_mut(i) else {
            return;
        };
        *n = n.saturating_sub(1);
        if *n == 0 && !self.queued[i] {
            self.queued[i] = true;
            self.free.push(i as u32);
        }
    }

    /// The (size, stack) of index `i`.
    pub fn key(&self, i: u32) -> Option<(u64, u64)> {
        self.keys.get(i as usize).copied()
    }

    /// Indexes in use or reusable.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.keys.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_is_taken_over_only_when_no_live_block_uses_it() {
        let mut t = InfoTable::default();
        assert_eq!(t.intern(8, 1, 2), Interned::New(0));
        t.born(0);
        assert_eq!(t.intern(16, 1, 2), Interned::New(1));
        t.born(1);
        assert_eq!(t.intern(8, 1, 2), Interned::Known(0));
        // Full, and both live: the table grows.
        assert_eq!(t.intern(24, 1, 2), Interned::New(2));
        t.born(2);
        t.died(1);
        t.born(1);
        t.died(1);
        t.died(1); // an extra death changes nothing
        assert_eq!(t.intern(32, 1, 2), Interned::Again(1));
        assert_eq!(t.key(1), Some((32, 1)));
        assert_eq!(t.intern(16, 1, 2), Interned::New(3));
        assert_eq!(t.len(), 4);
        assert_eq!(t.intern(32, 1, 2), Interned::Known(1));
    }

    #[test]
    fn the_pair_that_marks_an_empty_slot_is_interned_like_any_other() {
        let mut t = InfoTable::default();
        assert_eq!(t.intern(u64::MAX, u64::MAX, 4), Interned::New(0));
        assert_eq!(t.intern(u64::MAX, u64::MAX, 4), Interned::Known(0));
        assert_eq!(t.key(0), Some((u64::MAX, u64::MAX)));
        assert_eq!(t.intern(u64::MAX, u64::MAX - 1, 4), Interned::New(1));
    }
}
