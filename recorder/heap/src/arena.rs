//! Memory for the interposer itself. Its own Rust allocations (the unwinder's module list)
//! must never go through `malloc`: that is the function being replaced, and calling it from
//! inside would recurse and show up in the application's counts. So the library's global
//! allocator takes memory straight from `mmap`: size classes of powers of two with free
//! lists, carved from 1 MiB chunks; larger blocks are mapped on their own.
//!
//! Used only off the hot path (module list rebuilds), under a spin lock, so it is simple
//! rather than fast. Signal-safe (mmap, munmap and atomics only).

use core::alloc::{GlobalAlloc, Layout};
use core::ptr::null_mut;
use core::sync::atomic::{AtomicBool, Ordering};

use crate::sys;

const CHUNK: usize = 1 << 20;
const MIN_SHIFT: usize = 4;
const CLASSES: usize = 17; // 16 B .. 1 MiB

struct State {
    free: [*mut u8; CLASSES],
    bump: *mut u8,
    left: usize,
}

/// The interposer's global allocator. See the module docs.
pub struct Arena {
    lock: AtomicBool,
    state: core::cell::UnsafeCell<State>,
}

// SAFETY: `state` is only touched with `lock` held.
unsafe impl Sync for Arena {}

impl Arena {
    /// An empty arena; memory is mapped on first use.
    pub const fn new() -> Arena {
        Arena {
            lock: AtomicBool::new(false),
            state: core::cell::UnsafeCell::new(State {
                free: [null_mut(); CLASSES],
                bump: null_mut(),
                left: 0,
            }),
        }
    }

    fn class(layout: Layout) -> Option<usize> {
        let size = layout.size().max(layout.align()).max(1 << MIN_SHIFT);
        let c = size.next_power_of_two().trailing_zeros() as usize - MIN_SHIFT;
        (c < CLASSES).then_some(c)
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        while self
            .lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            core::hint::spin_loop();
        }
        // SAFETY: the lock is held, so this is the only reference.
        let r = f(unsafe { &mut *self.state.get() });
        self.lock.store(false, Ordering::Release);
        r
    }
}

impl Default for Arena {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: blocks are handed out once until returned; sizes are powers of two aligned to their
// size within page-aligned chunks, which satisfies any alignment up to the class size.
unsafe impl GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(c) = Self::class(layout) else {
            let len = layout.size().div_ceil(4096) * 4096;
            return sys::map_anon(len);
        };
        let size = 1usize << (c + MIN_SHIFT);
        self.with(|s| {
            let head = s.free[c];
            if !head.is_null() {
                // SAFETY: a free block stores the next free block in its first word.
                s.free[c] = unsafe { *(head as *mut *mut u8) };
                return head;
            }
            // Align the bump pointer to the block size (blocks are naturally aligned).
            let misalign = (s.bump as usize) & (size - 1);
            let pad = if misalign == 0 { 0 } else { size - misalign };
            if s.bump.is_null() || s.left < pad + size {
                let chunk = sys::map_anon(CHUNK);
                if chunk.is_null() {
                    return null_mut();
                }
                s.bump = chunk;
                s.left = CHUNK;
                let p = s.bump;
                // SAFETY: size <= CHUNK, inside the fresh chunk.
                s.bump = unsafe { s.bump.add(size) };
                s.left -= size;
                return p;
            }
            // SAFETY: pad + size <= left, inside the current chunk.
            let p = unsafe { s.bump.add(pad) };
            // SAFETY: as above.
            s.bump = unsafe { p.add(size) };
            s.left -= pad + size;
            p
        })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(c) = Self::class(layout) else {
            let len = layout.size().div_ceil(4096) * 4096;
            // SAFETY: the block was mapped on its own with this length.
            unsafe { crate::sys::unmap(ptr as *mut libc::c_void, len) };
            return;
        };
        self.with(|s| {
            // SAFETY: the block is ours again and at least one word long.
            unsafe { *(ptr as *mut *mut u8) = s.free[c] };
            s.free[c] = ptr;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_and_reused() {
        let a = Arena::new();
        let l = Layout::from_size_align(24, 8).unwrap();
        // SAFETY: test of the allocator contract.
        unsafe {
            let p = a.alloc(l);
            assert!(!p.is_null() && (p as usize) & 31 == 0);
            a.dealloc(p, l);
            assert_eq!(a.alloc(l), p);
            let big = Layout::from_size_align(3 << 20, 8).unwrap();
            let q = a.alloc(big);
            assert!(!q.is_null());
            a.dealloc(q, big);
            let al = Layout::from_size_align(100, 64).unwrap();
            assert_eq!(a.alloc(al) as usize % 64, 0);
        }
    }
}
