//! A counting filter in front of the set of sampled live blocks: most frees in sampled mode
//! are of blocks that were never sampled, and this answers "certainly not sampled" for them
//! from one byte, without the set's sequence counter or its table.
//!
//! Why: the set's table is tens of KiB and a free's probe lands on a random line of it, so in
//! callgrind's cache model the probes were most of the interposer's data-cache misses on Lua
//! (bench/RESULTS.md, "Sampled heap recording"). The filter is [`SLOTS`] one-byte counters
//! (2 KiB, a few dozen cache lines that stay in the first-level cache): each sampled live
//! block adds one to the counter its address hashes to, and takes it back when it is
//! forgotten. A counter of 0 proves that no sampled live block hashes there; any other
//! value sends the look-up on to the set. With `n` sampled live blocks, a free of an
//! unsampled block reaches the set with probability about `1 - exp(-n / SLOTS)` (5% at a
//! hundred blocks, a 50 MiB live heap at the default 512 KiB).
//!
//! Correctness: counters change only under the interposer's lock, where the set changes. A
//! block's counter goes up before its `malloc` returns, so any later `free` of it, on any
//! thread (ordered after that return by the program's own synchronization), reads a non-zero
//! counter. A counter that reached 255 stays there (it is never decremented again), so it can
//! only say "maybe", never a false "no".

use core::sync::atomic::{AtomicU8, Ordering};

/// Counters in the filter (a power of two).
pub const SLOTS: usize = 2048;

static COUNTS: [AtomicU8; SLOTS] = [const { AtomicU8::new(0) }; SLOTS];

/// The counter `addr` hashes to (Fibonacci hashing of the address without its alignment
/// bits, as the set's, but its own top bits).
#[inline(always)]
fn slot(addr: u64) -> &'static AtomicU8 {
    let h = (addr >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SLOTS.trailing_zeros());
    &COUNTS[h as usize & (SLOTS - 1)]
}

/// Whether `addr` may be a sampled live block (false: certainly not). Lock-free, one load.
#[inline(always)]
pub fn may_contain(addr: u64) -> bool {
    slot(addr).load(Ordering::Relaxed) != 0
}

/// Counts a block the set now holds. Only under the interposer's lock.
pub fn add(addr: u64) {
    let c = slot(addr);
    let n = c.load(Ordering::Relaxed);
    if n != u8::MAX {
        c.store(n + 1, Ordering::Relaxed);
    }
}

/// Takes back a block the set no longer holds. Only under the interposer's lock, and only
/// for a block that [`add`] counted.
pub fn remove(addr: u64) {
    let c = slot(addr);
    let n = c.load(Ordering::Relaxed);
    if n != u8::MAX && n != 0 {
        c.store(n - 1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_until_the_last_block_of_a_slot_goes() {
        // Addresses of one slot: found by search (the hash spreads neighbours apart).
        let first = 0x7f00_0000_0010u64;
        let same: alloc::vec::Vec<u64> = (1..200_000u64)
            .map(|i| first + i * 16)
            .filter(|&a| core::ptr::eq(slot(a), slot(first)))
            .take(2)
            .collect();
        assert_eq!(same.len(), 2);
        assert!(!may_contain(first));
        add(first);
        add(same[0]);
        assert!(may_contain(same[1]), "a shared counter says maybe");
        remove(first);
        assert!(may_contain(same[0]));
        remove(same[0]);
        assert!(!may_contain(first) && !may_contain(same[0]));
    }

    #[test]
    fn a_saturated_counter_never_says_no() {
        let a = 0x5555_0000_1230u64;
        for _ in 0..300 {
            add(a);
        }
        for _ in 0..300 {
            remove(a);
        }
        assert!(may_contain(a));
    }
}
