//! The trace tree, heaptrack style: a stack is a path from a root frame to its innermost
//! frame, each node `(parent id, ip)` gets a small id the first time it is seen, and an
//! allocation carries only the id of its innermost node. Each distinct stack is therefore
//! sent once, as the nodes it adds.
//!
//! An open-addressing hash table in its own anonymous mapping (never `malloc`), grown by
//! doubling. A node's slot comes from a hash of its whole path from the root, not from its
//! parent's id: the slots of all the frames a stack adds are known before the first is
//! found, so their cache lines are fetched together instead of one miss after another (a
//! C++ allocation's few new inner frames each missed the cache in turn). The hash steps
//! are a bijection of the frame's address for a given parent, so an entry's path hash and
//! parent id name it exactly: 16 bytes an entry, no address stored. Memory is bounded: past
//! [`MAX_ENTRIES`] the table is cleared and nodes are re-sent with fresh ids (ids are never
//! reused, so the host's view stays consistent).

use crate::sys;
use crossprof_heap_wire::MAX_FRAMES;

/// Largest table (entries); 16 bytes each, touched only as used.
pub const MAX_ENTRIES: usize = 1 << 22;
const FIRST_ENTRIES: usize = 1 << 14;
/// The path hash of the root (the parent of every outermost frame).
const ROOT_HASH: u64 = 0x243f_6a88_85a3_08d3;

#[repr(C)]
#[derive(Clone, Copy)]
struct Entry {
    /// [`path_hash`] of the node's path.
    hash: u64,
    parent: u32,
    id: u32, // 0 = empty
}

/// The path hash of a child at `ip` of a node whose path hash is `parent`: murmur3's
/// finalizer, a bijection, of their xor; for one parent, distinct ips give distinct hashes.
fn path_hash(parent: u64, ip: u64) -> u64 {
    let mut h = parent ^ ip;
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Asks for the cache line at `p` without waiting for it (no-op where there is no hint).
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch hint never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(target_arch = "x86")]
    // SAFETY: as above.
    unsafe {
        core::arch::x86::_mm_prefetch::<{ core::arch::x86::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as above.
    unsafe {
        core::arch::asm!("prfm pldl1keep, [{0}]", in(reg) p, options(nostack, readonly, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "x86", target_arch = "aarch64")))]
    let _ = p;
}

/// How many words at the ends of `a` and `b` (equally long) are equal, counted from the
/// end: the outer frames a stack shares with the last one. Four words at a time, compared as
/// arrays (one vector compare), then one at a time in the block that differs: this compare
/// runs over every shared frame of every allocation, and word by word it cost 3% of an
/// allocation-dense C++ program's time.
#[inline(always)]
fn common_suffix(a: &[u64], b: &[u64]) -> usize {
    // Word by word from the end: the block that differs, and the words before the first
    // whole block.
    let words = |a: &[u64], b: &[u64]| {
        a.iter()
            .rev()
            .zip(b.iter().rev())
            .take_while(|(p, q)| p == q)
            .count()
    };
    let mut k = 0;
    for (x, y) in a.rchunks_exact(4).zip(b.rchunks_exact(4)) {
        let (Ok(x), Ok(y)) = (<&[u64; 4]>::try_from(x), <&[u64; 4]>::try_from(y)) else {
            break;
        };
        if x != y {
            return k + words(x, y);
        }
        k += 4;
    }
    let rest = a.len() - k;
    k + words(&a[..rest], &b[..rest])
}

/// Why [`Trie::intern_stack`] gave no id: a new node could not be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotSent;

/// The interning table.
pub struct Trie {
    table: *mut Entry,
    cap: usize,
    len: usize,
    next_id: u64,
    /// Bumped whenever the table forgets nodes (reset, or cleared when full).
    generation: u64,
    /// The last stack interned by [`Trie::intern_stack`], outermost first: (node id, path
    /// hash).
    path: [(u64, u64); MAX_FRAMES],
    /// Its frame addresses, outermost last (`path_ips[MAX_FRAMES - 1 - i]` is frame `i` of
    /// `path`): the same order as the stacks it is compared with, so that the compare runs
    /// over plain words, four at a time.
    path_ips: [u64; MAX_FRAMES],
    path_n: usize,
    /// The generation `path` belongs to.
    path_generation: u64,
}

// SAFETY: used only under the interposer's global lock.
unsafe impl Send for Trie {}

impl Trie {
    /// An empty tree (maps its table on first use).
    pub const fn new() -> Trie {
        Trie {
            table: core::ptr::null_mut(),
            cap: 0,
            len: 0,
            next_id: 1,
            generation: 0,
            path: [(0, 0); MAX_FRAMES],
            path_ips: [0; MAX_FRAMES],
            path_n: 0,
            path_generation: 0,
        }
    }

    /// Interns the stack `ips` (innermost first) and returns its leaf id (the partial stack's
    /// when no memory can be mapped); `new_node(id, parent, ip)` is called for each node
    /// that is new and returns whether it was sent (when not: `Err`). The outer frames it
    /// shares with the previous stack interned keep their ids without a hash probe (a
    /// compare each): deep C++ stacks differ from one allocation to the next in a few inner
    /// frames, whose slots are fetched together before any is probed. Memory:
    /// [`MAX_FRAMES`] triples in the trie itself.
    pub fn intern_stack(
        &mut self,
        ips: &[u64],
        mut new_node: impl FnMut(u64, u64, u64) -> bool,
    ) -> Result<u64, NotSent> {
        let len = ips.len();
        let mut k = 0;
        if self.path_generation == self.generation && !self.table.is_null() {
            let shared = len.min(self.path_n);
            k = common_suffix(&ips[len - shared..], &self.path_ips[MAX_FRAMES - shared..]);
        }
        let (mut parent, mut hash) = match k {
            0 => (0, ROOT_HASH),
            _ => self.path[k - 1],
        };
        // The new frames' path hashes go where `path` will keep them; their slots are
        // fetched now.
        let mut h = hash;
        for i in k..len.min(MAX_FRAMES) {
            let ip = ips[len - 1 - i];
            h = path_hash(h, ip);
            self.path[i] = (0, h);
            self.path_ips[MAX_FRAMES - 1 - i] = ip;
            if !self.table.is_null() {
                // SAFETY: the slot is below cap, inside the mapped table.
                prefetch(unsafe { self.table.add(h as usize & (self.cap - 1)) });
            }
        }
        self.path_n = k;
        self.path_generation = self.generation;
        for i in k..len {
            let ip = ips[len - 1 - i];
            hash = match self.path.get(i) {
                Some(&(_, h)) => h,
                None => path_hash(hash, ip),
            };
            let Some((id, new)) = self.intern_hashed(parent, hash) else {
                break;
            };
            if self.generation != self.path_generation {
                self.path_n = 0; // cleared while interning: remember nothing
            } else if self.path_n == i && i < MAX_FRAMES {
                self.path[i].0 = id;
                self.path_n = i + 1;
            }
            if new && !new_node(id, parent, ip) {
                self.path_n = self.path_n.min(i);
                return Err(NotSent);
            }
            parent = id;
        }
        Ok(parent)
    }

    /// Changes whenever nodes are forgotten: ids handed out before may be stale.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Forgets everything, ids included: in a fork child, which is a new process for the host.
    pub fn reset(&mut self) {
        self.generation += 1;
        self.unmap();
        self.len = 0;
        self.next_id = 1;
    }

    fn unmap(&mut self) {
        if !self.table.is_null() {
            // SAFETY: the table was mapped with this size by `map`.
            unsafe {
                crate::sys::unmap(
                    self.table as *mut libc::c_void,
                    self.cap * core::mem::size_of::<Entry>(),
                )
            };
        }
        self.table = core::ptr::null_mut();
        self.cap = 0;
    }

    fn map(cap: usize) -> *mut Entry {
        sys::map_anon(cap * core::mem::size_of::<Entry>()) as *mut Entry
    }

    /// The id of the node with path hash `hash` under `parent`, and whether it is new (then
    /// the caller must send it before using the id). `None` when no memory can be mapped
    /// at all, or past 2^32 ids (never reached: each id is a node sent).
    fn intern_hashed(&mut self, parent: u64, hash: u64) -> Option<(u64, bool)> {
        if self.table.is_null() {
            self.table = Self::map(FIRST_ENTRIES);
            if self.table.is_null() {
                return None;
            }
            self.cap = FIRST_ENTRIES;
        }
        let parent = u32::try_from(parent).ok()?;
        let mut i = hash as usize & (self.cap - 1);
        loop {
            // SAFETY: i < cap, inside the mapped table.
            let e = unsafe { &*self.table.add(i) };
            if e.id == 0 {
                break;
            }
            if e.hash == hash && e.parent == parent {
                return Some((u64::from(e.id), false));
            }
            i = (i + 1) & (self.cap - 1);
        }
        let id = u32::try_from(self.next_id).ok()?;
        if (self.len + 1) * 2 > self.cap {
            self.grow();
            if self.table.is_null() {
                return None;
            }
            i = hash as usize & (self.cap - 1);
            // SAFETY: i < cap, inside the mapped table.
            while unsafe { (*self.table.add(i)).id } != 0 {
                i = (i + 1) & (self.cap - 1);
            }
        }
        // SAFETY: i < cap, an empty slot of the mapped table.
        unsafe { *self.table.add(i) = Entry { hash, parent, id } };
        self.next_id += 1;
        self.len += 1;
        Some((u64::from(id), true))
    }

    fn grow(&mut self) {
        let new_cap = self.cap * 2;
        if new_cap > MAX_ENTRIES {
            // Bounded memory: start over, keep counting ids.
            self.generation += 1;
            let cap = self.cap;
            self.unmap();
            self.table = Self::map(cap);
            self.cap = if self.table.is_null() { 0 } else { cap };
            self.len = 0;
            return;
        }
        let new = Self::map(new_cap);
        if new.is_null() {
            return; // keep probing the full-ish table; still correct
        }
        for i in 0..self.cap {
            // SAFETY: i < cap, inside the old table.
            let e = unsafe { *self.table.add(i) };
            if e.id == 0 {
                continue;
            }
            let mut j = e.hash as usize & (new_cap - 1);
            // SAFETY: j < new_cap, inside the new table.
            unsafe {
                while (*new.add(j)).id != 0 {
                    j = (j + 1) & (new_cap - 1);
                }
                *new.add(j) = e;
            }
        }
        let len = self.len;
        self.unmap();
        self.table = new;
        self.cap = new_cap;
        self.len = len;
    }
}

impl Default for Trie {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_suffix_is_counted_from_the_end_in_and_across_blocks() {
        let a: Vec<u64> = (0..11).collect();
        for diff in 0..11 {
            let mut b = a.clone();
            b[diff] = 99;
            assert_eq!(common_suffix(&a, &b), 10 - diff, "differs at {diff}");
        }
        assert_eq!(common_suffix(&a, &a), 11);
        assert_eq!(common_suffix(&[], &[]), 0);
    }

    /// Interns `ips` (innermost first): its leaf id and how many nodes were new.
    fn intern(t: &mut Trie, ips: &[u64]) -> (u64, usize) {
        let mut sent = 0;
        let leaf = t.intern_stack(ips, |_, _, _| {
            sent += 1;
            true
        });
        (leaf.expect("sent"), sent)
    }

    #[test]
    fn nodes_are_interned_once_and_survive_growth() {
        let mut t = Trie::new();
        assert_eq!(intern(&mut t, &[0x10]), (1, 1));
        assert_eq!(intern(&mut t, &[0x20, 0x10]), (2, 1));
        // Whole stacks, innermost first: shared outer frames keep their ids.
        assert_eq!(intern(&mut t, &[0x30, 0x20, 0x10]), (3, 1));
        assert_eq!(intern(&mut t, &[0x40, 0x20, 0x10]), (4, 1));
        assert_eq!(intern(&mut t, &[0x30, 0x20, 0x10]), (3, 0));
        assert_eq!(intern(&mut t, &[0x20, 0x10]), (2, 0));
        assert_eq!(
            t.intern_stack(&[0x50, 0x20, 0x10], |_, _, _| false),
            Err(NotSent)
        );
        // The same ip under another parent is another node.
        assert_eq!(intern(&mut t, &[0x20, 0x30, 0x20, 0x10]), (6, 1));
        assert_eq!(intern(&mut t, &[0x10]), (1, 0));
        for i in 0..100_000u64 {
            intern(&mut t, &[0x1000 + i, 0x20, 0x10]);
        }
        assert_eq!(intern(&mut t, &[0x20, 0x10]), (2, 0));
        assert_eq!(intern(&mut t, &[0x1000 + 99_999, 0x20, 0x10]).1, 0);
        assert_eq!(intern(&mut t, &[0x20, 0x30, 0x20, 0x10]), (6, 0));
        t.reset();
        assert_eq!(intern(&mut t, &[0x10]), (1, 1));
    }

    #[test]
    fn interleaved_stacks_keep_their_ids_through_growth() {
        // Stacks that share no outer frames with the one before, so that every frame is
        // probed: 40 subtrees of 300 leaves under 2 roots, 12,000 leaves (the table grows
        // from 16,384 slots while they are interned), then all again in reverse.
        let mut t = Trie::new();
        let stacks: Vec<[u64; 3]> = (0..40u64)
            .flat_map(|a| {
                (0..300u64).map(move |b| [0x3000 + a * 7 + b, 0x2000 + a, 0x1000 + (a + b) % 2])
            })
            .collect();
        let ids: Vec<u64> = stacks.iter().map(|s| intern(&mut t, s).0).collect();
        let mut distinct = ids.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), ids.len(), "every stack its own leaf");
        for (s, id) in stacks.iter().zip(&ids).rev() {
            assert_eq!(intern(&mut t, s), (*id, 0));
        }
    }
}
