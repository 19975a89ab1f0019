//! The exported malloc family. Each hook first asks whether the call will be an event at all
//! (`sample::alloc_skipped` and its kin: not when recording is off, nor for most calls in
//! sampled mode), and if not goes straight on to the C library's function. An event's hook
//! calls the real function first and then records what it returned, except `free`, which
//! records before freeing so that another thread cannot be handed the same address and record
//! its allocation first (heaptrack orders it the same way). What is recorded, per heaptrack's
//! hooks:
//! - `free(NULL)`: nothing;
//! - `realloc(old, n) -> new`: `Free{old}` (when old is not NULL) then `Alloc{new, n}`;
//!   when realloc fails or returns NULL (glibc's `realloc(p, 0)` frees p and returns NULL),
//!   nothing, as heaptrack;
//! - `calloc(n, s)`: `Alloc{n*s}`; the aligned variants and `valloc`/`pvalloc`: their
//!   requested size; `reallocarray(p, n, s)`: as `realloc(p, n*s)`;
//! - a failed call (NULL, or an error from `posix_memalign`): nothing.
//!
//! Checked against heaptrack 1.4 on one program that makes each of these calls: the same
//! events, except that heaptrack does not hook `memalign` and `pvalloc` at all (their blocks
//! are invisible to it, a "TODO" in its preload library), while DESIGN.md's contract asks for
//! them: a program that calls them has that many more allocations here than in heaptrack.
//!
//! Each allocating hook reads its own return address first thing
//! ([`stack::entry::entry_return_address`]): the allocation site, whatever unwind information
//! the caller has (see the `stack` module).

use core::ffi::c_void;

use crate::{real, record, sample, stack};

/// Defines a hook twice with one body: exported under the C name (what a preload
/// interposes), and as a library-internal function of the second name for the call slots
/// rewritten at an attach (`got`): inside a library loaded with `dlopen`, a reference to an
/// exported name binds to the C library's definition that comes first, while an internal one
/// stays here. Both read their own return address first thing (the fence in the twin emits
/// no instruction), as the site.
macro_rules! hook {
    ($(#[$m:meta])* fn $name:ident / $internal:ident ($($a:ident: $t:ty),*) -> $r:ty $body:block) => {
        $(#[$m])*
        #[no_mangle]
        pub extern "C" fn $name($($a: $t),*) -> $r $body

        /// The attach-time twin of the hook of the same C name (see `hook!`).
        pub(crate) extern "C" fn $internal($($a: $t),*) -> $r {
            // Keeps LLVM from merging the twins (the same code) into one exported symbol,
            // whose address would again be the C library's; costs no instruction.
            core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
            $body
        }
    };
    ($(#[$m:meta])* unsafe fn $name:ident / $internal:ident ($($a:ident: $t:ty),*) -> $r:ty $body:block) => {
        $(#[$m])*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($a: $t),*) -> $r $body

        /// The attach-time twin of the hook of the same C name (see `hook!`).
        ///
        /// # Safety
        /// As the C function's.
        pub(crate) unsafe extern "C" fn $internal($($a: $t),*) -> $r {
            core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
            $body
        }
    };
}
pub(crate) use hook;

hook! {
/// `malloc`.
fn malloc / attached_malloc(size: usize) -> *mut c_void {
    let ra = stack::entry_start();
    if sample::alloc_skipped(size) {
        return real::malloc(size);
    }
    malloc_event(size, ra)
}
}

/// A `malloc` that is an event, for a hook that read `ra` at its entry. Apart from the hook
/// so that the hook's way to the C library for the calls that are no event (almost all in
/// sampled mode) needs no stack frame: a few instructions and a jump.
#[inline(never)]
fn malloc_event(size: usize, ra: stack::EntryStart) -> *mut c_void {
    let at = stack::entry_finish(ra);
    let p = real::malloc(size);
    record::alloc(p, size, at);
    p
}

hook! {
/// `free`.
fn free / attached_free(p: *mut c_void) -> () {
    // `real::free` keeps a bootstrap block from the C library (whose free ignores NULL);
    // neither is ever a sampled block, and the event path checks the bootstrap case again.
    if sample::free_skipped(p as u64) || p.is_null() {
        return real::free(p);
    }
    free_event(p)
}
}

/// A `free` that is an event (apart from the hook, as [`malloc_event`]); a bootstrap block is
/// never recorded (its allocation was not).
#[inline(never)]
fn free_event(p: *mut c_void) {
    if !real::is_boot(p) {
        record::free(p);
    }
    real::free(p)
}

hook! {
/// `cfree`, an old alias of free that some programs still call.
fn cfree / attached_cfree(p: *mut c_void) -> () {
    attached_free(p)
}
}

hook! {
/// `calloc`.
fn calloc / attached_calloc(n: usize, size: usize) -> *mut c_void {
    let ra = stack::entry_start();
    if sample::alloc_skipped(n.wrapping_mul(size)) {
        return real::calloc(n, size);
    }
    calloc_event(n, size, ra)
}
}

/// A `calloc` that is an event (apart from the hook, as [`malloc_event`]).
#[inline(never)]
fn calloc_event(n: usize, size: usize, ra: stack::EntryStart) -> *mut c_void {
    let at = stack::entry_finish(ra);
    let p = real::calloc(n, size);
    record::alloc(p, n.wrapping_mul(size), at);
    p
}

hook! {
/// `realloc`.
fn realloc / attached_realloc(old: *mut c_void, size: usize) -> *mut c_void {
    let ra = stack::entry_start();
    match sample::realloc_plan(old as u64, size) {
        None => real::realloc(old, size),
        Some(plan) => realloc_event(old, size, ra, plan),
    }
}
}

/// A `realloc` that is an event (apart from the hook, as [`malloc_event`]).
#[inline(never)]
fn realloc_event(
    old: *mut c_void,
    size: usize,
    ra: stack::EntryStart,
    plan: (u64, bool),
) -> *mut c_void {
    realloc_from(old, size, stack::entry_finish(ra), plan)
}

/// `realloc` for a hook entered at `at`, with events as [`sample::realloc_plan`] planned.
#[inline(always)]
fn realloc_from(old: *mut c_void, size: usize, at: stack::Entry, plan: (u64, bool)) -> *mut c_void {
    // A bootstrap block was never recorded (it is copied out, not freed).
    let freed = if real::is_boot(old) { 0 } else { plan.0 };
    let p = real::realloc(old, size);
    record::realloc(freed, plan.1, p, size, at);
    p
}

hook! {
/// `reallocarray`: realloc with an overflow check.
fn reallocarray / attached_reallocarray(old: *mut c_void, n: usize, size: usize) -> *mut c_void {
    let at = stack::entry();
    match n.checked_mul(size) {
        Some(total) => match sample::realloc_plan(old as u64, total) {
            None => real::realloc(old, total),
            Some(plan) => realloc_from(old, total, at, plan),
        },
        None => {
            // SAFETY: setting the thread's errno.
            unsafe { *libc::__errno_location() = libc::ENOMEM };
            core::ptr::null_mut()
        }
    }
}
}

hook! {
/// `posix_memalign`.
///
/// # Safety
/// `out` must be valid for writing a pointer, as for the C function.
unsafe fn posix_memalign / attached_posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> i32 {
    let at = stack::entry();
    if sample::alloc_skipped(size) {
        return real::posix_memalign(out, align, size);
    }
    let r = real::posix_memalign(out, align, size);
    if r == 0 {
        // SAFETY: on success the real function stored the block in *out.
        record::alloc(unsafe { *out }, size, at);
    }
    r
}
}

hook! {
/// `aligned_alloc`.
fn aligned_alloc / attached_aligned_alloc(align: usize, size: usize) -> *mut c_void {
    let at = stack::entry();
    if sample::alloc_skipped(size) {
        return real::aligned_alloc(align, size);
    }
    let p = real::aligned_alloc(align, size);
    record::alloc(p, size, at);
    p
}
}

hook! {
/// `memalign`.
fn memalign / attached_memalign(align: usize, size: usize) -> *mut c_void {
    let at = stack::entry();
    if sample::alloc_skipped(size) {
        return real::memalign(align, size);
    }
    let p = real::memalign(align, size);
    record::alloc(p, size, at);
    p
}
}

hook! {
/// `valloc`.
fn valloc / attached_valloc(size: usize) -> *mut c_void {
    let at = stack::entry();
    if sample::alloc_skipped(size) {
        return real::valloc(size);
    }
    let p = real::valloc(size);
    record::alloc(p, size, at);
    p
}
}

hook! {
/// `pvalloc`.
fn pvalloc / attached_pvalloc(size: usize) -> *mut c_void {
    let at = stack::entry();
    if sample::alloc_skipped(size) {
        return real::pvalloc(size);
    }
    let p = real::pvalloc(size);
    record::alloc(p, size, at);
    p
}
}

/// `malloc_usable_size`: forwarded (and answers for bootstrap blocks).
#[no_mangle]
pub extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    real::usable_size(p)
}
