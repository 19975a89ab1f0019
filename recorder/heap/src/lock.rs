//! The interposer's one global lock. Holding it while an event is written gives the
//! process's events one total order (the order heaptrack's global lock gives), which the host
//! needs to tell temporary allocations apart.
//!
//! A three-state futex mutex (Drepper's "mutex2") written by hand: `pthread_mutex` is not
//! async-signal-safe and cannot be reset in a fork child; this one is only atomics and the
//! futex system call. (A signal handler on a thread inside the event path never takes it:
//! see record.rs.)

use core::sync::atomic::{AtomicU32, Ordering};

use crate::sys;

/// The global lock.
pub struct Lock {
    state: AtomicU32,
}

impl Lock {
    /// An unlocked lock.
    pub const fn new() -> Lock {
        Lock {
            state: AtomicU32::new(0),
        }
    }

    /// Takes the lock (`_tid`: the taker, for debugging).
    pub fn lock(&self, _tid: u32) {
        if self
            .state
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            while self.state.swap(2, Ordering::Acquire) != 0 {
                sys::futex_wait(&self.state, 2, 0, false);
            }
        }
    }

    /// Releases the lock.
    pub fn unlock(&self) {
        if self.state.swap(0, Ordering::Release) == 2 {
            sys::futex_wake_one(&self.state);
        }
    }

    /// Forces the lock free: only in a fork child, where the holder no longer exists.
    pub fn reset(&self) {
        self.state.store(0, Ordering::Release);
    }
}

impl Default for Lock {
    fn default() -> Self {
        Self::new()
    }
}
