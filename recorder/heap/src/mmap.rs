//! Memory beyond malloc: the program's own anonymous mappings. `mmap`, `mmap64`, `munmap`
//! and `mremap` are hooked like the malloc family (exported for a preload, twins for the call
//! slots an attach rewrites, see `hooks`), forwarded to the kernel, and recorded:
//! - `mmap` of private anonymous memory that can be accessed (not `PROT_NONE`, which only
//!   reserves address space): `MMAP{addr, len, stack}`; file-backed and shared mappings are
//!   forwarded and not recorded;
//! - every successful `munmap`: `MUNMAP{addr, len}` (the hook cannot tell what the range held;
//!   rec and the host keep only the part that was a recorded mapping, so a partial unmap
//!   shrinks or splits it);
//! - every successful `mremap`: `MREMAP{old, old_len, new, new_len, stack}`; the host moves
//!   the recorded part of the old range, if any, to the new one (grow, shrink or move).
//!
//! What is not seen, by design: the C library's allocator maps its large blocks and arenas
//! through internal calls (glibc's and musl's `__mmap`) that no symbol lookup reaches, and
//! `pthread_create` its stacks the same way, so those are heap and stack memory, not mapping
//! events (the RSS split in `rec` accounts for them). An allocator that calls `mmap` through
//! the dynamic symbol (jemalloc, tcmalloc, an interpreter's arena) is seen here: its chunks
//! are mappings of the program's. The interposer's own memory is mapped with system calls
//! ([`crate::sys::raw_mmap`]) and never reaches these hooks.
//!
//! Forwarding is a system call, not the C library's wrapper: the wrapper's name is this
//! library's, and looking up the next one would run `dlsym` inside a hook.
//!
//! Cost: a mapping event takes the event path of an allocation (the global lock, an unwind
//! or a memo hit, a ring write); an unmap no unwind. A hook entered inside the event path (a
//! signal handler that maps memory while its thread records an event) is counted as lost.

use core::ffi::c_void;
use core::sync::atomic::{AtomicU64, Ordering};

use crossprof_heap_wire::kind;

use crate::hooks::hook;
use crate::{record, stack, sys, thread};

/// Mapping events that came while their thread was inside the event path.
static NESTED_LOST: AtomicU64 = AtomicU64::new(0);

/// Whether a mapping made with `prot` and `flags` is one of the program's anonymous memory.
fn recorded(prot: i32, flags: i32) -> bool {
    flags & libc::MAP_ANONYMOUS != 0 && flags & libc::MAP_SHARED == 0 && prot != libc::PROT_NONE
}

/// `mmap` with a 64-bit offset, checked as the C library checks it.
fn forward_mmap(
    addr: *mut c_void,
    len: usize,
    prot: i32,
    flags: i32,
    fd: i32,
    off: i64,
) -> *mut c_void {
    let unaligned = cfg!(target_pointer_width = "32") && off & 4095 != 0;
    if off < 0 || unaligned {
        // SAFETY: setting the thread's errno.
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return libc::MAP_FAILED;
    }
    sys::raw_mmap(addr, len, prot, flags, fd, off as u64)
}

/// `mmap` that records: see the module.
#[inline(always)]
fn mmap_from(
    addr: *mut c_void,
    len: usize,
    prot: i32,
    flags: i32,
    fd: i32,
    off: i64,
    at: stack::Entry,
) -> *mut c_void {
    let p = forward_mmap(addr, len, prot, flags, fd, off);
    if p != libc::MAP_FAILED && recorded(prot, flags) {
        event(kind::MMAP, [p as u64, len as u64, 0, 0], at);
    }
    p
}

hook! {
/// `mmap`.
fn mmap / attached_mmap(addr: *mut c_void, len: usize, prot: i32, flags: i32, fd: i32, off: libc::off_t) -> *mut c_void {
    let at = stack::entry();
    // off_t is 32 bits wide on 32-bit glibc targets.
    #[allow(clippy::useless_conversion)]
    let off = i64::from(off);
    mmap_from(addr, len, prot, flags, fd, off, at)
}
}

hook! {
/// `mmap64`: `mmap` with a 64-bit offset on 32-bit targets (an alias on 64-bit ones).
fn mmap64 / attached_mmap64(addr: *mut c_void, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut c_void {
    let at = stack::entry();
    mmap_from(addr, len, prot, flags, fd, off, at)
}
}

hook! {
/// `munmap`.
///
/// # Safety
/// As the C function's: nothing may use the range afterwards.
unsafe fn munmap / attached_munmap(addr: *mut c_void, len: usize) -> i32 {
    // SAFETY: per the C function's contract, which the caller keeps.
    let r = unsafe { sys::unmap(addr, len) };
    if r == 0 {
        event(kind::MUNMAP, [addr as u64, len as u64, 0, 0], stack::Entry::default());
    }
    r
}
}

hook! {
/// `mremap`. The C function is variadic: the fifth argument, the new address, is read only
/// with `MREMAP_FIXED`, as the C library does (variadic and fixed pointer arguments are
/// passed alike on every ABI this library is built for).
///
/// # Safety
/// As the C function's.
unsafe fn mremap / attached_mremap(old: *mut c_void, old_len: usize, new_len: usize, flags: i32, new_addr: *mut c_void) -> *mut c_void {
    let at = stack::entry();
    let fixed = if flags & libc::MREMAP_FIXED != 0 { new_addr } else { core::ptr::null_mut() };
    // SAFETY: the kernel checks the arguments; the caller owns the ranges, per the contract.
    let r = unsafe { libc::syscall(libc::SYS_mremap, old, old_len, new_len, flags, fixed) };
    if r == -1 {
        return libc::MAP_FAILED;
    }
    event(kind::MREMAP, [old as u64, old_len as u64, r as usize as u64, new_len as u64], at);
    r as usize as *mut c_void
}
}

/// Records a mapping event of kind `k` (the payload's words but the stack, which is captured
/// here for a map and a remap). Never called by the interposer's own mappings.
#[inline(never)]
fn event(k: u8, w: [u64; 4], at: stack::Entry) {
    if !record::active() {
        return;
    }
    let Some((nested, tid, bounds)) = thread::begin_event() else {
        return;
    };
    if nested {
        NESTED_LOST.fetch_add(1, Ordering::Relaxed);
    } else {
        record::locked(tid, k != kind::MUNMAP, |st, time| {
            let stack = if k == kind::MUNMAP {
                0
            } else {
                match record::stack_of(st, tid, at, bounds) {
                    Ok(id) => id,
                    Err(_) => return false,
                }
            };
            let Some(p) = st.producer.as_mut() else {
                return false;
            };
            let lost = NESTED_LOST.swap(0, Ordering::Relaxed);
            if lost > 0 {
                p.lost(lost);
            }
            match k {
                kind::MMAP => p.mapping(k, tid, time, [w[0], w[1], stack]),
                kind::MUNMAP => p.mapping(k, tid, time, [w[0], w[1]]),
                _ => p.mapping(k, tid, time, [w[0], w[1], w[2], w[3], stack]),
            }
        });
    }
    thread::leave();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_accessible_private_anonymous_mappings_are_recorded() {
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        assert!(recorded(rw, anon));
        assert!(recorded(rw, anon | libc::MAP_FIXED | libc::MAP_NORESERVE));
        assert!(!recorded(libc::PROT_NONE, anon));
        assert!(!recorded(rw, libc::MAP_SHARED | libc::MAP_ANONYMOUS));
        assert!(!recorded(rw, libc::MAP_PRIVATE));
    }

    #[test]
    fn forwarding_maps_and_rejects_bad_offsets() {
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        let p = forward_mmap(core::ptr::null_mut(), 8192, rw, anon, -1, 0);
        assert_ne!(p, libc::MAP_FAILED);
        // SAFETY: the fresh mapping is ours.
        unsafe {
            *(p as *mut u8) = 1;
            assert_eq!(sys::unmap(p, 8192), 0);
        }
        assert_eq!(
            forward_mmap(core::ptr::null_mut(), 8192, rw, anon, -1, -4096),
            libc::MAP_FAILED
        );
    }
}
