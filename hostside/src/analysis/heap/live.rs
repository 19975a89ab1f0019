//! The live blocks of one address space: block key (heap address, or the block handle newer
//! recordings store instead) → a small value, for millions of blocks and tens of millions of
//! lookups.
//!
//! A hash map costs 17 bytes or more per slot, with half the slots empty after each doubling
//! and both tables alive while it grows (over 100 MB for two million live blocks), and a cache
//! miss per event. The keys are not random, though: allocators hand out addresses packed in a
//! few regions, at multiples of their alignment, and block handles are small dense integers. So
//! the map is a sparse array, as a page table is: the key shifted right by its alignment, split
//! into a page number (looked up in a hash map, with the last page cached) and a slot in a page
//! of [`PAGE_SLOTS`] values. Values are 2 bytes wide until a page must hold one above 65,535
//! (the values are allocation-info indices: few programs have that many distinct (size, stack)
//! pairs), then that page alone widens to 4 bytes. A dense heap so costs 2 bytes per
//! alignment unit of its span (an eighth of its size at 16-byte alignment), neighbouring blocks
//! share a cache line, and a page that empties is recycled. Keys that are not multiples of the
//! alignment chosen at the first insertion go to an ordinary hash map.

use rustc_hash::FxHashMap;

/// Slots per page (8 KiB of narrow values).
pub const PAGE_SLOTS: usize = 4096;

/// The largest alignment assumed: 16 bytes, what 64-bit C libraries guarantee for malloc.
const MAX_SHIFT: u32 = 4;

/// A page's values: 2 bytes each while they fit.
enum Slots {
    Narrow(Box<[u16]>),
    Wide(Box<[u32]>),
}

struct Page {
    slots: Slots,
    used: u32,
}

impl Page {
    fn get(&self, slot: usize) -> u32 {
        match &self.slots {
            Slots::Narrow(v) => v[slot] as u32,
            Slots::Wide(v) => v[slot],
        }
    }

    /// Stores `value` at `slot` and returns what was there.
    fn replace(&mut self, slot: usize, value: u32) -> u32 {
        if let Slots::Narrow(v) = &mut self.slots {
            match u16::try_from(value) {
                Ok(narrow) => return std::mem::replace(&mut v[slot], narrow) as u32,
                Err(_) => self.slots = Slots::Wide(v.iter().map(|&x| x as u32).collect()),
            }
        }
        match &mut self.slots {
            Slots::Wide(v) => std::mem::replace(&mut v[slot], value),
            Slots::Narrow(_) => unreachable!("widened above"),
        }
    }

    fn values(&self) -> impl Iterator<Item = u32> + '_ {
        (0..PAGE_SLOTS).map(|i| self.get(i))
    }
}

/// A map from block keys to non-zero `u32` values (the caller's allocation info + 1).
#[derive(Default)]
pub struct LiveMap {
    /// Alignment of keys, as a shift; chosen at the first insertion.
    shift: Option<u32>,
    /// Page number → index into `pages`.
    index: FxHashMap<u64, u32>,
    pages: Vec<Page>,
    /// Emptied pages, ready for reuse.
    spare: Vec<u32>,
    /// The page of the last access: (page number, index).
    last: Option<(u64, u32)>,
    /// Keys that are not multiples of the alignment.
    odd: FxHashMap<u64, u32>,
    len: usize,
}

impl LiveMap {
    /// Number of live keys.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no key is live.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn split(&self, key: u64) -> Option<(u64, usize)> {
        let shift = self.shift?;
        if key & ((1u64 << shift) - 1) != 0 {
            return None;
        }
        let unit = key >> shift;
        Some((
            unit / PAGE_SLOTS as u64,
            (unit % PAGE_SLOTS as u64) as usize,
        ))
    }

    fn page(&mut self, number: u64) -> Option<u32> {
        if let Some((n, i)) = self.last {
            if n == number {
                return Some(i);
            }
        }
        let i = *self.index.get(&number)?;
        self.last = Some((number, i));
        Some(i)
    }

    /// Sets `key` to `value` (not 0); returns the value it replaces, if the key was live.
    pub fn insert(&mut self, key: u64, value: u32) -> Option<u32> {
        debug_assert!(value != 0);
        if self.shift.is_none() {
            self.shift = Some(key.trailing_zeros().min(MAX_SHIFT));
        }
        let Some((number, slot)) = self.split(key) else {
            let old = self.odd.insert(key, value);
            if old.is_none() {
                self.len += 1;
            }
            return old;
        };
        let i = match self.page(number) {
            Some(i) => i,
            None => {
                let i = match self.spare.pop() {
                    Some(i) => i,
                    None => {
                        self.pages.push(Page {
                            slots: Slots::Narrow(vec![0; PAGE_SLOTS].into_boxed_slice()),
                            used: 0,
                        });
                        (self.pages.len() - 1) as u32
                    }
                };
                self.index.insert(number, i);
                self.last = Some((number, i));
                i
            }
        };
        let page = &mut self.pages[i as usize];
        let old = page.replace(slot, value);
        if old == 0 {
            page.used += 1;
            self.len += 1;
            None
        } else {
            Some(old)
        }
    }

    /// Removes `key`; returns its value if it was live.
    pub fn remove(&mut self, key: u64) -> Option<u32> {
        let Some((number, slot)) = self.split(key) else {
            let old = self.odd.remove(&key);
            if old.is_some() {
                self.len -= 1;
            }
            return old;
        };
        let i = self.page(number)?;
        let page = &mut self.pages[i as usize];
        if page.get(slot) == 0 {
            return None;
        }
        let old = page.replace(slot, 0);
        self.len -= 1;
        page.used -= 1;
        if page.used == 0 {
            self.index.remove(&number);
            // A page reused starts narrow again.
            if let Slots::Wide(_) = page.slots {
                page.slots = Slots::Narrow(vec![0; PAGE_SLOTS].into_boxed_slice());
            }
            self.spare.push(i);
            self.last = None;
        }
        Some(old)
    }

    /// Every live value (in no particular order).
    pub fn values(&self) -> impl Iterator<Item = u32> + '_ {
        let paged = self
            .index
            .values()
            .flat_map(|&i| self.pages[i as usize].values())
            .filter(|&v| v != 0);
        paged.chain(self.odd.values().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_addresses_share_pages() {
        let mut m = LiveMap::default();
        assert_eq!(m.insert(0x5555_0000_1000, 1), None);
        for k in 1..10_000u64 {
            assert_eq!(m.insert(0x5555_0000_1000 + 16 * k, 2), None);
        }
        assert_eq!(m.len(), 10_000);
        assert_eq!(m.pages.len(), 3);
        assert!(m.odd.is_empty());
        assert_eq!(
            m.insert(0x5555_0000_1000, 7),
            Some(1),
            "a live key replaced"
        );
        assert_eq!(m.remove(0x5555_0000_1000), Some(7));
        assert_eq!(m.remove(0x5555_0000_1000), None, "twice");
        assert_eq!(m.remove(0x1234_5670), None, "never inserted, no page");
        assert_eq!(m.len(), 9_999);
    }

    #[test]
    fn misaligned_and_huge_keys_are_kept_too() {
        let mut m = LiveMap::default();
        m.insert(0x1000, 1); // alignment 16 chosen
        assert_eq!(m.insert(0x1008, 2), None); // not a multiple of 16
        assert_eq!(m.insert(u64::MAX, 3), None);
        assert_eq!(m.insert(!15u64, 4), None);
        assert_eq!(m.len(), 4);
        let mut v: Vec<u32> = m.values().collect();
        v.sort();
        assert_eq!(v, [1, 2, 3, 4]);
        assert_eq!(m.remove(0x1008), Some(2));
        assert_eq!(m.remove(u64::MAX), Some(3));
        assert_eq!(m.remove(!15u64), Some(4));
        assert_eq!(m.remove(0x1000), Some(1));
        assert!(m.is_empty());
    }

    #[test]
    fn values_too_wide_for_two_bytes_widen_their_page() {
        let mut m = LiveMap::default();
        m.insert(0x10, 7);
        m.insert(0x20, 65_535);
        assert!(matches!(m.pages[0].slots, Slots::Narrow(_)));
        assert_eq!(m.insert(0x30, 65_536), None);
        assert!(matches!(m.pages[0].slots, Slots::Wide(_)));
        assert_eq!(m.insert(0x10, u32::MAX), Some(7));
        assert_eq!(m.remove(0x20), Some(65_535));
        assert_eq!(m.remove(0x30), Some(65_536));
        assert_eq!(m.remove(0x10), Some(u32::MAX));
        // Emptied, the page is narrow again for its next use.
        m.insert(0x5000_0000, 1);
        assert_eq!(m.pages.len(), 1);
        assert!(matches!(m.pages[0].slots, Slots::Narrow(_)));
    }

    #[test]
    fn dense_handles_and_page_reuse() {
        let mut m = LiveMap::default();
        // Handles: odd first key, so every integer is a slot.
        for k in 1..=(2 * PAGE_SLOTS as u64) {
            m.insert(k, k as u32);
        }
        assert!(m.odd.is_empty());
        let pages = m.pages.len();
        for k in 1..=(2 * PAGE_SLOTS as u64) {
            assert_eq!(m.remove(k), Some(k as u32));
        }
        assert!(m.is_empty() && m.index.is_empty());
        // Emptied pages are reused, not allocated again.
        for k in 1..=(2 * PAGE_SLOTS as u64) {
            m.insert(k + (1 << 40), 9);
        }
        assert_eq!(m.pages.len(), pages);
    }
}
