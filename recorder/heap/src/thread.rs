//! Per-thread state: the cached thread id, the stack's bounds (so the unwinder never reads
//! outside the stack) and a pass-through depth for calls the interposer makes itself.
//!
//! Only `const`-initialized `Cell`s of plain integers: such thread-locals need no destructor
//! and no lazy registration (which could allocate), so they are valid from the thread's first
//! instruction to its last, including inside TLS destructors that run after other state is
//! gone and in signal handlers.

use core::cell::Cell;

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    static TID: Cell<u32> = const { Cell::new(0) };
    static PASS: Cell<u32> = const { Cell::new(0) };
    static STACK: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// The calling thread's id, cached after the first call.
pub fn tid() -> u32 {
    TID.with(|t| match t.get() {
        0 => {
            let id = crate::sys::gettid();
            t.set(id);
            id
        }
        id => id,
    })
}

/// Marks the thread as inside the event path; returns whether it already was (then this is
/// a signal handler that interrupted it, which must not touch the lock).
pub fn enter() -> bool {
    DEPTH.with(|d| {
        let was = d.get();
        d.set(was + 1);
        was != 0
    })
}

/// Leaves the event path.
pub fn leave() {
    DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
}

/// Whether the thread is inside the event path.
pub fn inside() -> bool {
    DEPTH.with(|d| d.get() != 0)
}

/// Forgets the cached id (in a fork child, whose only thread has a new id).
pub fn reset_tid() {
    TID.with(|t| t.set(0));
}

/// Whether the interposer itself is the caller (allocations pass through unrecorded).
pub fn passing_through() -> bool {
    PASS.with(|p| p.get() != 0)
}

/// Runs `f` with recording off for this thread: for libc calls the interposer makes that may
/// allocate (the stack-bounds query on glibc's main thread reads /proc with stdio).
pub fn pass_through<R>(f: impl FnOnce() -> R) -> R {
    PASS.with(|p| p.set(p.get() + 1));
    let r = f();
    PASS.with(|p| p.set(p.get() - 1));
    r
}

/// `[low, high)` of this thread's stack, found once per thread; `(0, 0)` when unknown.
pub fn stack_bounds() -> (usize, usize) {
    let cached = STACK.with(|s| s.get());
    if cached.1 != 0 {
        return cached;
    }
    let b = pass_through(query_stack);
    STACK.with(|s| s.set(b));
    b
}

fn query_stack() -> (usize, usize) {
    // SAFETY: attr is initialized by pthread_getattr_np before use and destroyed after;
    // pthread_getattr_np exists on glibc and musl.
    unsafe {
        let mut attr: libc::pthread_attr_t = core::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return (0, 0);
        }
        let mut addr: *mut libc::c_void = core::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        if !ok {
            return (0, 0);
        }
        (addr as usize, addr as usize + size)
    }
}
