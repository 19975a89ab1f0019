//! A memo of sparse chains (ARMv7, see `super::sparse`): when a hook is entered with the same
//! registers on a thread with the same stack, and every word the last chain from there kept
//! still holds the value it kept, the chain is taken from the memo with its trace-tree id,
//! without scanning the stack or interning. Checking is one load and one compare per kept word
//! (about a hundred on Lua) where the scan tests every word between the stack pointer and the
//! stack's top (thousands) and interning walks the chain in the trace tree.
//!
//! What a hit may miss: a word the last scan did not keep that now would be (a slot of a live
//! frame that came to hold a code address or a stack address). The host's unwind of the
//! remembered chain reads such a slot as unknown. The unwind reads the same slots either way
//! (its rules depend on the frames found so far, which are the same): where it did not need
//! the slot, the result is the same; where it did, the remembered chain's unwind stopped there
//! and the allocation is counted as cut short. A hit never gives a wrong frame.
//!
//! Memory: [`SETS`] × [`WAYS`] entries of about 1.6 KB in one anonymous mapping, touched only
//! as used. Used under the interposer's lock; never allocates; reads only words inside the
//! current thread's stack (the entry's words lie where the last scan read them, in a thread
//! with the same stack bounds and stack pointer).

use crossprof_heap_wire::cut_short;

use crate::sys;

/// Sets (a power of two), chosen by the registers.
pub const SETS: usize = 64;
/// Entries per set.
pub const WAYS: usize = 2;
/// Longest chain remembered (entries, the two register entries included); longer ones are
/// scanned each time.
pub const MAX_CHAIN: usize = 192;

/// The flag of a stack-word entry (a saved frame pointer: its value is a distance below the
/// stack's top, see `crossprof_heap_wire::sparse::stack_word`).
const POINTER: u64 = 1 << 63;

#[repr(C)]
struct Entry {
    /// The memo's generation when stored; 0 = empty.
    generation: u64,
    /// lr, sp, r7, r11 at the hook's entry.
    regs: [u64; 4],
    /// The thread's stack bounds.
    bounds: (usize, usize),
    id: u64,
    /// Lookup count at the last hit or store, for replacing the least recently used.
    used: u64,
    n: usize,
    chain: [u64; MAX_CHAIN],
}

impl Entry {
    fn matches(&self, generation: u64, regs: &[u64; 4], bounds: (usize, usize)) -> bool {
        self.generation == generation
            && self.regs == *regs
            && self.bounds == bounds
            && self.chain[2..self.n]
                .iter()
                .all(|&e| still_holds(e, bounds.1))
    }
}

/// Whether the stack word of chain entry `e` (past the register entries) still holds what the
/// entry says, on a stack whose top is `top`. Markers (a chain cut short) hold nothing.
fn still_holds(e: u64, top: usize) -> bool {
    if e >= cut_short::BASE {
        return true;
    }
    let below = ((e & !POINTER) >> 32) as usize;
    let at = top.wrapping_sub(below);
    // SAFETY: the scan that made the entry read this aligned word, inside the stack of a
    // thread with the same bounds, above the same stack pointer (the key): it is inside the
    // current thread's live stack.
    let w = unsafe { core::ptr::read_volatile(at as *const u32) };
    let expected = if e & POINTER != 0 {
        // A saved frame pointer `to` bytes below the top.
        top.wrapping_sub(e as u32 as usize) as u32
    } else {
        e as u32
    };
    w == expected
}

fn set_of(regs: &[u64; 4]) -> usize {
    let h = (regs[0] ^ regs[1].rotate_left(23) ^ regs[2].rotate_left(41) ^ regs[3])
        .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> 40) as usize & (SETS - 1)
}

/// The memo. See the module docs.
pub struct SparseMemo {
    table: *mut Entry,
    generation: u64,
    lookups: u64,
}

// SAFETY: used only under the interposer's global lock.
unsafe impl Send for SparseMemo {}

impl SparseMemo {
    /// An empty memo (maps its table on first store).
    pub const fn new() -> SparseMemo {
        SparseMemo {
            table: core::ptr::null_mut(),
            generation: 1,
            lookups: 0,
        }
    }

    /// Forgets every entry: the modules or the trace tree changed.
    pub fn invalidate(&mut self) {
        self.generation += 1;
    }

    /// The trace-tree id of the chain remembered for a hook entered with `regs` (lr, sp, r7,
    /// r11; sp 0: unknown, never remembered) on a thread with stack `bounds`, if every word
    /// it kept still holds its value.
    pub fn lookup(&mut self, regs: &[u64; 4], bounds: (usize, usize)) -> Option<u64> {
        self.lookups += 1;
        if self.table.is_null() || regs[1] == 0 {
            return None;
        }
        let set = set_of(regs) * WAYS;
        for w in 0..WAYS {
            // SAFETY: set + w < SETS * WAYS, inside the mapped table.
            let e = unsafe { &mut *self.table.add(set + w) };
            if e.matches(self.generation, regs, bounds) {
                e.used = self.lookups;
                return Some(e.id);
            }
        }
        None
    }

    /// Remembers that a hook entered with `regs` on a thread with stack `bounds` made the
    /// sparse chain `chain`, interned as `id`. Returns whether it was stored (not when too
    /// long, or the registers are unknown).
    pub fn store(
        &mut self,
        regs: &[u64; 4],
        bounds: (usize, usize),
        chain: &[u64],
        id: u64,
    ) -> bool {
        if chain.len() > MAX_CHAIN || chain.len() < 2 || regs[1] == 0 {
            return false;
        }
        if self.table.is_null() {
            let t = sys::map_anon(SETS * WAYS * core::mem::size_of::<Entry>()) as *mut Entry;
            if t.is_null() {
                return false;
            }
            self.table = t;
        }
        let set = set_of(regs) * WAYS;
        // An empty or outdated way, else the least recently used.
        let mut victim = set;
        let mut oldest = u64::MAX;
        for w in set..set + WAYS {
            // SAFETY: w < SETS * WAYS, inside the mapped table (zeroed: generation 0, empty).
            let e = unsafe { &*self.table.add(w) };
            if e.generation != self.generation {
                victim = w;
                break;
            }
            if e.used < oldest {
                oldest = e.used;
                victim = w;
            }
        }
        // SAFETY: as above.
        let e = unsafe { &mut *self.table.add(victim) };
        e.generation = self.generation;
        e.regs = *regs;
        e.bounds = bounds;
        e.id = id;
        e.used = self.lookups;
        e.n = chain.len();
        e.chain[..chain.len()].copy_from_slice(chain);
        true
    }
}

impl Default for SparseMemo {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossprof_heap_wire::sparse;

    /// A fake thread stack of `words` 32-bit words: its bounds, and a way to write a word at
    /// a distance below the top.
    struct Stack {
        mem: alloc::vec::Vec<u32>,
    }

    impl Stack {
        fn bounds(&self) -> (usize, usize) {
            let lo = self.mem.as_ptr() as usize;
            (lo, lo + self.mem.len() * 4)
        }
        fn set(&mut self, below: usize, v: u32) {
            let i = self.mem.len() - below / 4;
            self.mem[i] = v;
        }
    }

    #[test]
    fn a_chain_comes_back_while_its_words_hold() {
        let mut s = Stack {
            mem: alloc::vec![0u32; 256],
        };
        let (lo, top) = s.bounds();
        // Only the low 32 bits of a host address are compared: the test's top may be a
        // 64-bit address, the board's never is.
        let fp_target_below = 0x40usize;
        s.set(0x20, 0x1234_5679);
        s.set(0x30, top.wrapping_sub(fp_target_below) as u32);
        let sp = top - 0x80;
        let regs = [0x1001, sp as u64, 0, 0];
        let chain = [
            sparse::registers_low(0, 0),
            sparse::registers_high(0x1001, sparse::TOP - 0x80),
            sparse::word(0x20, 0x1234_5679),
            sparse::stack_word(0x30, fp_target_below as u32),
            cut_short::TOO_DEEP,
        ];
        let mut m = SparseMemo::new();
        assert!(m.lookup(&regs, (lo, top)).is_none());
        assert!(m.store(&regs, (lo, top), &chain, 7));
        assert_eq!(m.lookup(&regs, (lo, top)), Some(7));
        // Other registers, another stack: no.
        assert!(m.lookup(&[0x1003, sp as u64, 0, 0], (lo, top)).is_none());
        assert!(m.lookup(&regs, (lo + 4, top)).is_none());
        // A kept word changed: no.
        s.set(0x20, 0x1234_5681);
        assert!(m.lookup(&regs, (lo, top)).is_none());
        s.set(0x20, 0x1234_5679);
        s.set(0x30, 0);
        assert!(m.lookup(&regs, (lo, top)).is_none());
        s.set(0x30, top.wrapping_sub(fp_target_below) as u32);
        assert!(m.lookup(&regs, (lo, top)).is_some());
        // Forgotten when the modules or the trace tree change.
        m.invalidate();
        assert!(m.lookup(&regs, (lo, top)).is_none());
        // Unknown registers and chains too long are not remembered.
        assert!(!m.store(&[0x1001, 0, 0, 0], (lo, top), &chain, 7));
        let long = alloc::vec![sparse::word(0x20, 0x1234_5679); MAX_CHAIN + 1];
        assert!(!m.store(&regs, (lo, top), &long, 8));
    }
}
