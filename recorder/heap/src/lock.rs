//! The interposer's one global lock. Holding it while an event is written gives the
//! process's events one total order (the order heaptrack's global lock gives), which the host
//! needs to tell temporary allocations apart. A process that never started a second thread
//! needs no lock for that, and the event path skips it ([`Lock::lock_if_threaded`]).
//!
//! A three-state futex mutex (Drepper's "mutex2") written by hand: `pthread_mutex` is not
//! async-signal-safe and cannot be reset in a fork child; this one is only atomics and the
//! futex system call. (A signal handler on a thread inside the event path never takes it:
//! see record.rs.)

use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU8, Ordering};

use crate::sys;

/// glibc's `__libc_single_threaded` (since 2.32): nonzero while the process has never had a
/// second thread. Null until found (and on C libraries without it): then always lock.
static SINGLE_THREADED: AtomicPtr<AtomicU8> = AtomicPtr::new(core::ptr::null_mut());

/// Looks up the C library's single-thread flag (once, at load time; `dlsym` may allocate
/// on failure, so outside the event path and with recording off for the thread).
pub fn find_single_threaded_flag() {
    let p = crate::thread::pass_through(|| {
        // SAFETY: the name is NUL-terminated; RTLD_DEFAULT lookups have no preconditions.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__libc_single_threaded".as_ptr()) }
    });
    SINGLE_THREADED.store(p as *mut AtomicU8, Ordering::Release);
}

/// Whether the process has only ever had one thread. Then nothing can run concurrently
/// with the caller: only it could start a second thread, and it is busy here. (Signal
/// handlers on the same thread never take the lock, see record.rs.) glibc's own malloc
/// skips its locks on the same flag. Once a thread was created the flag stays clear.
fn single_threaded() -> bool {
    let p = SINGLE_THREADED.load(Ordering::Acquire);
    // SAFETY: a non-null p is the address of glibc's flag, a byte that lives as long as
    // the process; reading it as an atomic byte is how glibc's own readers see it.
    !p.is_null() && unsafe { (*p).load(Ordering::Relaxed) } != 0
}

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

    /// Takes the lock unless the process is single-threaded (see [`single_threaded`]): two
    /// atomic read-modify-writes per event saved, each of which waits for the event's
    /// stores to the shared ring to leave the store buffer. Returns whether it was taken;
    /// release with [`Lock::unlock_if`].
    pub fn lock_if_threaded(&self, tid: u32) -> bool {
        if single_threaded() {
            return false;
        }
        self.lock(tid);
        true
    }

    /// Releases the lock if [`Lock::lock_if_threaded`] took it.
    pub fn unlock_if(&self, taken: bool) {
        if taken {
            self.unlock();
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
