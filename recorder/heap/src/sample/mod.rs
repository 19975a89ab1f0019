//! Sampled mode (`rec --heap-sample BYTES`): which allocations are recorded, and which frees.
//!
//! Allocations are sampled per byte, as heapprofd and tcmalloc do: sampling points form a
//! Poisson process over the bytes each thread allocates (the gaps between points are drawn
//! from an exponential distribution with mean BYTES), and an allocation that covers a point
//! is recorded with its stack. An allocation of `s` bytes is so recorded with probability
//! `1 - exp(-s/BYTES)`, whatever came before it, which is all the host needs to weigh it (the
//! recording's header carries BYTES). The gap counter is thread-local (the `thread` module):
//! an unsampled allocation costs one thread-local access and a subtraction, no lock, no
//! unwind, no ring write.
//!
//! Only frees of recorded blocks are recorded. The sampled live blocks are kept in an
//! open-addressing set (`Set`) in the interposer's own arena: it changes only on the event
//! path, under the interposer's lock, and every free looks its address up without a lock
//! (a sequence counter tells a reader that a change overlapped its look-up, and it looks
//! again). A counting filter in front of it (the `filter` module) answers most frees (those of
//! blocks never sampled) from one byte that stays in the cache.
//!
//! Limits: a block allocated in a signal handler that interrupted the event path and freed
//! before that event finished has its free missed (the set learns of the block only when
//! the parked event is written); a block whose address another thread gets back from the
//! allocator between a `realloc` returning and the set forgetting the old block may have
//! its free recorded once more (the host ignores frees of unknown blocks).

mod filter;

use alloc::boxed::Box;
use core::sync::atomic::{fence, AtomicPtr, AtomicU64, Ordering};

/// Not read from the environment yet.
const UNKNOWN: u64 = u64::MAX;
/// Mean bytes between samples; 0: every allocation is recorded.
static MEAN: AtomicU64 = AtomicU64::new(UNKNOWN);

/// The mean bytes between samples, or 0 when every allocation is recorded. Read from the
/// environment on first use (which may come before the load-time initializer).
#[inline(always)]
pub fn mean() -> u64 {
    match MEAN.load(Ordering::Relaxed) {
        UNKNOWN => read_mean(),
        m => m,
    }
}

#[cold]
fn read_mean() -> u64 {
    let m = crate::sys::env(crossprof_heap_wire::ENV_SAMPLE)
        .and_then(|v| core::str::from_utf8(v).ok()?.parse::<u64>().ok())
        .unwrap_or(0);
    MEAN.store(m, Ordering::Relaxed);
    m
}

/// Sets the mean bytes between samples (0: every allocation) where there is no environment
/// to read it from: an attach (`rec --heap -p PID --heap-sample BYTES`). Called before any
/// call slot points at the hooks.
pub fn set_mean(m: u64) {
    MEAN.store(m, Ordering::Relaxed);
}

/// The next gap between sampling points, in bytes (at least 1), drawn with `rng`
/// (xorshift64* state, not 0).
pub fn draw_gap(rng: &mut u64, mean: u64) -> u64 {
    let mut x = *rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *rng = x;
    let bits = x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11;
    // Uniform in (0, 1].
    let u = (bits as f64 + 1.0) * (1.0 / (1u64 << 53) as f64);
    // Rounded up: an allocation of `s` bytes covers the point when the gap is at most `s`,
    // exactly when the continuous gap is (so it is sampled with 1 - exp(-s/mean)).
    let gap = -ln(u) * mean as f64;
    if gap < 1.0 {
        1
    } else if gap > 1e18 {
        1_000_000_000_000_000_000
    } else {
        let whole = gap as u64;
        whole + u64::from((whole as f64) < gap)
    }
}

/// The natural logarithm of `x` > 0, without the C math library: `f64::ln` calls libm's
/// `log`, which would make the interposer need `libm.so.6`, absent from minimal board
/// images. `x = m * 2^e` with `m` in [1, 2), and `ln m = 2 atanh((m - 1) / (m + 1))`, whose
/// series in `t <= 1/3` is within 1e-15 after 16 terms: ample for drawing gaps.
pub fn ln(x: f64) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        return if x == 0.0 {
            f64::NEG_INFINITY
        } else {
            f64::NAN
        };
    }
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    if e == -1023 {
        // Subnormal: normalise through a multiplication by 2^64.
        let y = x * 18_446_744_073_709_551_616.0;
        let b = y.to_bits();
        e = ((b >> 52) & 0x7ff) as i64 - 1023 - 64;
        m = f64::from_bits((b & ((1u64 << 52) - 1)) | (1023u64 << 52));
    }
    let t = (m - 1.0) / (m + 1.0);
    let t2 = t * t;
    let (mut term, mut sum) = (t, 0.0);
    for k in 0..16 {
        sum += term / (2 * k + 1) as f64;
        term *= t2;
    }
    e as f64 * core::f64::consts::LN_2 + 2.0 * sum
}

// ---- decisions taken before the real function runs ----------------------------------------
//
// Each hook asks first, so that a call that will be no event goes straight on to the C
// library's function (a tail call: no frame of the hook's left around it, nothing done after
// it). In sampled mode that is almost every call; it is also every call once recording is off.
// A sampling point is therefore consumed by an allocation before the allocator ran: one that
// then fails (NULL) records nothing and its point is lost, a bias of the order of the
// program's failed allocations, which are rare.

/// Whether an allocation of `size` bytes certainly makes no event: recording is off, or in
/// sampled mode it covers no sampling point (which this consumes when it does).
#[inline(always)]
pub fn alloc_skipped(size: usize) -> bool {
    // The gap first: in sampled mode most calls end there, before the second load.
    let m = mean();
    (m != 0 && !crate::thread::sampled(size, m)) || !crate::record::ACTIVE.load(Ordering::Relaxed)
}

/// Whether a free of `addr` (not NULL) certainly makes no event: recording is off, or in
/// sampled mode the block was not sampled.
#[inline(always)]
pub fn free_skipped(addr: u64) -> bool {
    let m = mean();
    (m != 0 && !contains(addr)) || !crate::record::ACTIVE.load(Ordering::Relaxed)
}

/// The events a `realloc(old, size)` makes if it succeeds: `None` when none; else the old
/// block to record as freed (0 for none) and whether the new block is recorded. Exact mode:
/// `old` and true. Sampled mode: the old block only if it was sampled, the new one if it
/// covers a sampling point.
#[inline(always)]
pub fn realloc_plan(old: u64, size: usize) -> Option<(u64, bool)> {
    if !crate::record::ACTIVE.load(Ordering::Relaxed) {
        return None;
    }
    let m = mean();
    if m == 0 {
        return Some((old, true));
    }
    let old = if old != 0 && contains(old) { old } else { 0 };
    let new = crate::thread::sampled(size, m);
    (old != 0 || new).then_some((old, new))
}

// ---- the set of sampled live blocks ------------------------------------------------------

/// A linear-probing table of addresses (0: empty), deleted from by shifting back (no
/// tombstones, so a miss stops at the first empty slot).
struct Set {
    slots: Box<[AtomicU64]>,
    /// 64 - log2(slots.len()).
    shift: u32,
    len: usize,
}

/// Changes to the set: odd while one is under way.
static SEQ: AtomicU64 = AtomicU64::new(0);
/// The current table (null until the first sampled block). Tables it replaced are never
/// freed (a reader may still be probing one; they add up to less than the current one).
static TABLE: AtomicPtr<Set> = AtomicPtr::new(core::ptr::null_mut());

const FIRST_BITS: u32 = 12;

fn home(addr: u64, shift: u32) -> usize {
    ((addr >> 3).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> shift) as usize
}

impl Set {
    fn new(bits: u32) -> Set {
        Set {
            slots: (0..1usize << bits).map(|_| AtomicU64::new(0)).collect(),
            shift: 64 - bits,
            len: 0,
        }
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    fn find(&self, addr: u64) -> Option<usize> {
        let mut i = home(addr, self.shift);
        loop {
            match self.slots[i].load(Ordering::Relaxed) {
                0 => return None,
                a if a == addr => return Some(i),
                _ => i = (i + 1) & self.mask(),
            }
        }
    }

    /// Adds `addr`; false when it was there already.
    fn insert(&mut self, addr: u64) -> bool {
        let mut i = home(addr, self.shift);
        loop {
            match self.slots[i].load(Ordering::Relaxed) {
                0 => {
                    self.slots[i].store(addr, Ordering::Relaxed);
                    self.len += 1;
                    return true;
                }
                a if a == addr => return false,
                _ => i = (i + 1) & self.mask(),
            }
        }
    }

    /// Removes `addr`; false when it was not there.
    fn remove(&mut self, addr: u64) -> bool {
        let Some(mut i) = self.find(addr) else {
            return false;
        };
        self.len -= 1;
        let mask = self.mask();
        // Knuth's algorithm R: move later entries of the run back over the hole.
        loop {
            self.slots[i].store(0, Ordering::Relaxed);
            let mut j = i;
            loop {
                j = (j + 1) & mask;
                let a = self.slots[j].load(Ordering::Relaxed);
                if a == 0 {
                    return true;
                }
                let k = home(a, self.shift);
                let stays = if i <= j {
                    i < k && k <= j
                } else {
                    i < k || k <= j
                };
                if !stays {
                    self.slots[i].store(a, Ordering::Relaxed);
                    i = j;
                    break;
                }
            }
        }
    }
}

/// Whether `addr` is a sampled live block. Lock-free; if a change keeps overlapping the
/// look-up (a writer interrupted by a signal handler on this very thread), answers yes:
/// a free recorded too many is ignored by the host, one missed would look like a leak.
#[inline(always)]
pub fn contains(addr: u64) -> bool {
    filter::may_contain(addr) && in_set(addr)
}

/// The set's half of [`contains`], out of line: the filter answers most calls, and the hooks
/// that inline it then need no stack frame.
#[inline(never)]
fn in_set(addr: u64) -> bool {
    for _ in 0..1000 {
        let s1 = SEQ.load(Ordering::Acquire);
        if s1 & 1 == 0 {
            let t = TABLE.load(Ordering::Acquire);
            // SAFETY: tables are never freed while the process runs.
            let found = !t.is_null() && unsafe { &*t }.find(addr).is_some();
            fence(Ordering::Acquire);
            if SEQ.load(Ordering::Relaxed) == s1 {
                return found;
            }
        }
        core::hint::spin_loop();
    }
    true
}

/// Runs a change of the set as one write section.
fn change(f: impl FnOnce(&mut Set)) {
    let s = SEQ.load(Ordering::Relaxed);
    SEQ.store(s + 1, Ordering::Relaxed);
    fence(Ordering::Release);
    let mut t = TABLE.load(Ordering::Relaxed);
    if t.is_null() {
        t = Box::into_raw(Box::new(Set::new(FIRST_BITS)));
        TABLE.store(t, Ordering::Release);
    }
    // SAFETY: only writers (serialized by the caller's lock) touch the table mutably;
    // readers use atomic loads and discard what they read during the section.
    f(unsafe { &mut *t });
    SEQ.store(s + 2, Ordering::Release);
}

/// Remembers a sampled block. Only under the interposer's lock (or as the only thread).
pub fn remember(addr: u64) {
    change(|set| {
        if set.insert(addr) {
            filter::add(addr);
        }
        if set.len * 4 > set.slots.len() {
            grow(set);
        }
    });
}

/// Forgets a block that was freed. Only under the interposer's lock (or as the only thread).
pub fn forget(addr: u64) {
    if !TABLE.load(Ordering::Relaxed).is_null() {
        change(|set| {
            if set.remove(addr) {
                filter::remove(addr);
            }
        });
    }
}

/// A sampled allocation at `addr` was written (with the free of `old` before it, when not
/// 0): the set learns both. Nothing in exact mode. Under the interposer's lock.
pub fn replaced(old: u64, addr: u64) {
    if mean() != 0 {
        if old != 0 {
            forget(old);
        }
        remember(addr);
    }
}

/// Replaces the table by one four times as large (inside a write section).
fn grow(old: &mut Set) {
    let bits = 64 - old.shift + 2;
    let mut new = Set::new(bits);
    for s in old.slots.iter() {
        let a = s.load(Ordering::Relaxed);
        if a != 0 {
            new.insert(a);
        }
    }
    // The old table is left allocated on purpose (see TABLE).
    TABLE.store(Box::into_raw(Box::new(new)), Ordering::Release);
}

#[cfg(test)]
mod tests {
    #[test]
    fn ln_without_libm_matches_std() {
        for x in [
            1e-300, 1e-16, 2.2e-16, 0.001, 0.25, 0.5, 0.999_999, 1.0, 1.5, 2.0, 10.0, 1e10,
        ] {
            let (ours, std) = (super::ln(x), x.ln());
            assert!(
                (ours - std).abs() <= 1e-12 * std.abs().max(1.0),
                "{x}: {ours} vs {std}"
            );
        }
    }

    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn set_inserts_finds_and_removes_across_runs() {
        let mut s = Set::new(4);
        let keys: Vec<u64> = (1..12).map(|k| k * 0x10_0000).collect();
        for &k in &keys {
            s.insert(k);
        }
        for &k in &keys {
            assert!(s.find(k).is_some());
        }
        for &k in keys.iter().step_by(2) {
            s.remove(k);
        }
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(s.find(k).is_some(), i % 2 == 1, "{k:#x}");
        }
        assert_eq!(s.len, 5);
    }

    #[test]
    fn gaps_average_the_mean() {
        let mut rng = 0x1234_5678_9abc_def1;
        let n = 200_000;
        let sum: u64 = (0..n).map(|_| draw_gap(&mut rng, 1000)).sum();
        let avg = sum as f64 / n as f64;
        assert!((avg - 1000.0).abs() < 10.0, "{avg}");
    }
}
