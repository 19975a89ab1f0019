//! The writer's open-addressing maps, built for the one thing they do millions of times a
//! second: a lookup whose slot is almost never in the cache. The live blocks (address →
//! allocation info) are spread over the whole heap and a free rarely follows its
//! allocation; the allocation infos ((size, stack) → index) are as many as the program's
//! distinct call sites and sizes. Open addressing with linear probing in one array of
//! (key, value) slots, so that the caller can [`ProbeMap::prefetch`] the slot of an event it
//! will handle a few events later and the miss overlaps with other work; deletion shifts
//! the following slots back (no tombstones, probe runs stay short however many keys come and
//! go). Grows at 3/4 full: about 21 bytes per live block, 32 per info.

/// A key of a [`ProbeMap`]: one value never used as a key marks an empty slot.
pub trait Key: Copy + PartialEq {
    /// The empty slot's key: never a real one (callers map it away first).
    const EMPTY: Self;
    /// A well-mixed hash: the table takes its low bits.
    fn hash(&self) -> u64;
}

/// Block addresses: 0 is never a block.
impl Key for u64 {
    const EMPTY: u64 = 0;
    fn hash(&self) -> u64 {
        // Blocks are 8- or 16-aligned: mix the high bits of the product down.
        let h = self.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^ (h >> 29)
    }
}

/// (size, stack) pairs: no allocation has size `u64::MAX`.
impl Key for (u64, u64) {
    const EMPTY: (u64, u64) = (u64::MAX, u64::MAX);
    fn hash(&self) -> u64 {
        let h = (self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ self.1)
            .wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 29)
    }
}

/// The map. [`Key::EMPTY`] is never stored: inserting it does nothing.
pub struct ProbeMap<K: Key> {
    slots: Vec<(K, u32)>,
    len: usize,
}

impl<K: Key> Default for ProbeMap<K> {
    fn default() -> Self {
        ProbeMap {
            slots: Vec::new(),
            len: 0,
        }
    }
}

/// The live blocks: address → allocation info.
pub type LiveMap = ProbeMap<u64>;

const FIRST: usize = 1 << 12;

impl<K: Key> ProbeMap<K> {
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// Starts loading the slot `key` hashes to into the cache. A hint: no effect on
    /// results.
    #[inline]
    pub fn prefetch(&self, key: K) {
        if self.slots.is_empty() {
            return;
        }
        let p = &self.slots[key.hash() as usize & self.mask()] as *const (K, u32);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch hint on an address inside the table; it never faults.
        unsafe {
            core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0)
        };
        #[cfg(target_arch = "aarch64")]
        // SAFETY: as above.
        unsafe {
            core::arch::asm!("prfm pldl1keep, [{0}]", in(reg) p, options(nostack, readonly, preserves_flags))
        };
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        let _ = p;
    }

    /// Maps `key` (a block's address) to `info`; the value it had before, if any.
    pub fn insert(&mut self, key: K, info: u32) -> Option<u32> {
        if key == K::EMPTY {
            return None;
        }
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        let mask = self.mask();
        let mut i = key.hash() as usize & mask;
        loop {
            let s = &mut self.slots[i];
            if s.0 == key {
                return Some(core::mem::replace(&mut s.1, info));
            }
            if s.0 == K::EMPTY {
                *s = (key, info);
                self.len += 1;
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// The value of `key`, if it has one.
    pub fn get(&self, key: K) -> Option<u32> {
        if key == K::EMPTY || self.slots.is_empty() {
            return None;
        }
        let mask = self.mask();
        let mut i = key.hash() as usize & mask;
        loop {
            let s = &self.slots[i];
            if s.0 == key {
                return Some(s.1);
            }
            if s.0 == K::EMPTY {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// Forgets `key` (a block's address); the value it had, if any.
    pub fn remove(&mut self, key: K) -> Option<u32> {
        if key == K::EMPTY || self.slots.is_empty() {
            return None;
        }
        let mask = self.mask();
        let mut i = key.hash() as usize & mask;
        loop {
            let s = self.slots[i];
            if s.0 == K::EMPTY {
                return None;
            }
            if s.0 == key {
                break;
            }
            i = (i + 1) & mask;
        }
        let info = self.slots[i].1;
        // Backward shift: move later members of the probe run into the hole when their home
        // slot is not between the hole and them.
        let mut hole = i;
        let mut j = (i + 1) & mask;
        loop {
            let s = self.slots[j];
            if s.0 == K::EMPTY {
                break;
            }
            let home = s.0.hash() as usize & mask;
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = s;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.slots[hole] = (K::EMPTY, 0);
        self.len -= 1;
        Some(info)
    }

    /// Keys held (live blocks).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Removes up to `n` live blocks into `out` as (address, info), each the first block at or
    /// after a slot drawn with `rng` (xorshift state, not 0). Which blocks go is arbitrary: the
    /// caller bounds the map's size, it does not choose. They are drawn all over the table on
    /// purpose: removing them in a sweep would empty one band of the table while insertions
    /// fill the rest, until every probe runs to the band (a Ninja run took minutes).
    pub fn evict(&mut self, n: usize, rng: &mut u64, out: &mut Vec<(K, u32)>) {
        out.clear();
        let mask = match self.slots.len() {
            0 => return,
            len => len - 1,
        };
        while out.len() < n && self.len > 0 {
            let mut x = *rng;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *rng = x;
            let mut i = x as usize & mask;
            while self.slots[i].0 == K::EMPTY {
                i = (i + 1) & mask;
            }
            let (addr, info) = self.slots[i];
            self.remove(addr);
            out.push((addr, info));
        }
    }

    /// Every live block as (address, info), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (K, u32)> + '_ {
        self.slots.iter().copied().filter(|s| s.0 != K::EMPTY)
    }

    fn grow(&mut self) {
        let cap = (self.slots.len() * 2).max(FIRST);
        let old = std::mem::replace(&mut self.slots, vec![(K::EMPTY, 0); cap]);
        self.len = 0;
        for (addr, info) in old {
            if addr != K::EMPTY {
                self.insert(addr, info);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn eviction_takes_distinct_live_blocks_and_keeps_the_rest() {
        let mut m = LiveMap::default();
        for a in 1..=1000u64 {
            m.insert(a * 16, a as u32);
        }
        let (mut rng, mut out, mut gone) = (0x2545_f491_4f6c_dd1d, Vec::new(), HashMap::new());
        for _ in 0..10 {
            m.evict(64, &mut rng, &mut out);
            assert_eq!(out.len(), 64);
            for &(addr, info) in &out {
                assert_eq!(u64::from(info) * 16, addr);
                assert!(gone.insert(addr, info).is_none(), "evicted twice: {addr}");
            }
        }
        assert_eq!(m.len(), 360);
        for a in 1..=1000u64 {
            let evicted = gone.contains_key(&(a * 16));
            assert_eq!(m.remove(a * 16).is_some(), !evicted);
        }
        m.evict(64, &mut rng, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn a_map_kept_at_its_limit_by_eviction_stays_fast() {
        // A program whose live set outgrows the limit (Ninja: 2 million blocks): eviction
        // must keep probes short, so a million insertions past the limit take moments.
        let (mut m, mut rng, mut out) = (LiveMap::default(), 0x9e37_79b9_7f4a_7c15u64, Vec::new());
        let limit = 3 << 14;
        let started = std::time::Instant::now();
        for i in 0..1_000_000u64 {
            if m.len() >= limit {
                m.evict(64, &mut rng, &mut out);
            }
            m.insert(0x5555_0000_0000 + i * 32, 1);
        }
        assert!(m.len() <= limit);
        // About 50 ms; the sweep this replaced took minutes.
        assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());
    }

    #[test]
    fn agrees_with_a_hash_map_through_growth_and_deletions() {
        let mut m = LiveMap::default();
        let mut reference = HashMap::new();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for i in 0..200_000u32 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            // Few distinct addresses, so that inserts, replacements and removals all happen
            // and probe runs collide.
            let addr = (rng % 5000 + 1) * 16;
            if rng % 3 < 1 {
                assert_eq!(m.remove(addr), reference.remove(&addr), "remove {addr:#x}");
            } else {
                m.prefetch(addr);
                assert_eq!(
                    m.insert(addr, i),
                    reference.insert(addr, i),
                    "insert {addr:#x}"
                );
            }
            assert_eq!(m.len(), reference.len());
        }
        for (&addr, &info) in &reference {
            assert_eq!(m.remove(addr), Some(info));
        }
        assert_eq!(m.len(), 0);
        assert_eq!(m.remove(0), None);
        assert_eq!(m.insert(0, 1), None);
    }

    #[test]
    fn pair_keys_agree_with_a_hash_map() {
        let mut m = ProbeMap::<(u64, u64)>::default();
        let mut reference = HashMap::new();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..100_000u32 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let key = (rng % 64 * 16, rng / 64 % 300);
            match rng % 4 {
                0 => assert_eq!(m.remove(key), reference.remove(&key)),
                1 => assert_eq!(m.get(key), reference.get(&key).copied()),
                _ => {
                    m.prefetch(key);
                    assert_eq!(m.insert(key, i), reference.insert(key, i));
                }
            }
            assert_eq!(m.len(), reference.len());
        }
        assert_eq!(m.insert(<(u64, u64)>::EMPTY, 1), None);
        assert_eq!(m.get(<(u64, u64)>::EMPTY), None);
    }
}
