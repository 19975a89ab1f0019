//! The trace tree, heaptrack style: a stack is a path from a root frame to its innermost
//! frame, each node `(parent id, ip)` gets a small id the first time it is seen, and an
//! allocation carries only the id of its innermost node. Each distinct stack is therefore
//! sent once, as the nodes it adds.
//!
//! An open-addressing hash table in its own anonymous mapping (never `malloc`), grown by
//! doubling. Memory is bounded: past [`MAX_ENTRIES`] the table is cleared and nodes are
//! re-sent with fresh ids (ids are never reused, so the host's view stays consistent).

use crate::sys;
use crossprof_heap_wire::MAX_FRAMES;

/// Largest table (entries); 24 bytes each, touched only as used.
pub const MAX_ENTRIES: usize = 1 << 22;
const FIRST_ENTRIES: usize = 1 << 14;

#[repr(C)]
#[derive(Clone, Copy)]
struct Entry {
    parent: u64,
    ip: u64,
    id: u64, // 0 = empty
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
    /// The last stack interned by [`Trie::intern_stack`], outermost first: (ip, node id).
    path: [(u64, u64); MAX_FRAMES],
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
            path_n: 0,
            path_generation: 0,
        }
    }

    /// Interns the stack `ips` (innermost first) and returns its leaf id (the partial stack's
    /// when no memory can be mapped); `new_node(id, parent, ip)` is called for each node
    /// that is new and returns whether it was sent (when not: `Err`). The outer frames it
    /// shares with the previous stack interned keep their ids without a hash probe (a
    /// compare each): deep C++ stacks differ from one allocation to the next in a few inner
    /// frames. Memory: [`MAX_FRAMES`] pairs in the trie itself.
    pub fn intern_stack(
        &mut self,
        ips: &[u64],
        mut new_node: impl FnMut(u64, u64, u64) -> bool,
    ) -> Result<u64, NotSent> {
        let len = ips.len();
        let mut k = 0;
        if self.path_generation == self.generation && !self.table.is_null() {
            let shared = len.min(self.path_n);
            while k < shared && self.path[k].0 == ips[len - 1 - k] {
                k += 1;
            }
        }
        let mut parent = if k > 0 { self.path[k - 1].1 } else { 0 };
        self.path_n = k;
        self.path_generation = self.generation;
        for i in k..len {
            let ip = ips[len - 1 - i];
            let Some((id, new)) = self.intern(parent, ip) else {
                break;
            };
            if self.generation != self.path_generation {
                self.path_n = 0; // cleared while interning: remember nothing
            } else if self.path_n == i && i < MAX_FRAMES {
                self.path[i] = (ip, id);
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

    fn slot(cap: usize, parent: u64, ip: u64) -> usize {
        let h =
            (parent.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ip).wrapping_mul(0xff51_afd7_ed55_8ccd);
        (h ^ (h >> 29)) as usize & (cap - 1)
    }

    /// The id of node `(parent, ip)` and whether it is new (then the caller must send it
    /// before using the id). `None` only when no memory can be mapped at all.
    pub fn intern(&mut self, parent: u64, ip: u64) -> Option<(u64, bool)> {
        if self.table.is_null() {
            self.table = Self::map(FIRST_ENTRIES);
            if self.table.is_null() {
                return None;
            }
            self.cap = FIRST_ENTRIES;
        }
        let mut i = Self::slot(self.cap, parent, ip);
        loop {
            // SAFETY: i < cap, inside the mapped table.
            let e = unsafe { &mut *self.table.add(i) };
            if e.id == 0 {
                break;
            }
            if e.parent == parent && e.ip == ip {
                return Some((e.id, false));
            }
            i = (i + 1) & (self.cap - 1);
        }
        if (self.len + 1) * 2 > self.cap {
            self.grow();
            return self.intern_new(parent, ip);
        }
        self.intern_new(parent, ip)
    }

    fn intern_new(&mut self, parent: u64, ip: u64) -> Option<(u64, bool)> {
        if self.table.is_null() {
            return None;
        }
        let mut i = Self::slot(self.cap, parent, ip);
        loop {
            // SAFETY: i < cap, inside the mapped table.
            let e = unsafe { &mut *self.table.add(i) };
            if e.id == 0 {
                let id = self.next_id;
                self.next_id += 1;
                *e = Entry { parent, ip, id };
                self.len += 1;
                return Some((id, true));
            }
            i = (i + 1) & (self.cap - 1);
        }
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
            let mut j = Self::slot(new_cap, e.parent, e.ip);
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
    fn nodes_are_interned_once_and_survive_growth() {
        let mut t = Trie::new();
        assert_eq!(t.intern(0, 0x10), Some((1, true)));
        assert_eq!(t.intern(1, 0x20), Some((2, true)));
        // Whole stacks, innermost first: shared outer frames keep their ids.
        let mut sent = 0;
        assert_eq!(
            t.intern_stack(&[0x30, 0x20, 0x10], |_, _, _| {
                sent += 1;
                true
            }),
            Ok(3)
        );
        assert_eq!(
            t.intern_stack(&[0x40, 0x20, 0x10], |_, _, _| {
                sent += 1;
                true
            }),
            Ok(4)
        );
        assert_eq!(
            t.intern_stack(&[0x30, 0x20, 0x10], |_, _, _| {
                sent += 1;
                true
            }),
            Ok(3)
        );
        assert_eq!(t.intern_stack(&[0x20, 0x10], |_, _, _| true), Ok(2));
        assert_eq!(
            t.intern_stack(&[0x50, 0x20, 0x10], |_, _, _| false),
            Err(NotSent)
        );
        assert_eq!(sent, 2);
        assert_eq!(t.intern(0, 0x10), Some((1, false)));
        for i in 0..100_000u64 {
            t.intern(2, 0x1000 + i);
        }
        assert_eq!(t.intern(1, 0x20), Some((2, false)));
        assert_eq!(t.intern(2, 0x1000 + 99_999).map(|x| x.1), Some(false));
        t.reset();
        assert_eq!(t.intern(0, 0x10), Some((1, true)));
    }
}
