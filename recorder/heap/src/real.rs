//! The allocator being wrapped: the next definitions of the malloc family after this library
//! (libc's, or another preloaded allocator's), found with `dlsym(RTLD_NEXT)`.
//!
//! The classic trap: `dlsym` itself may allocate (glibc's `dlerror` buffer uses `calloc`),
//! which lands back in our `malloc` before we know where the real one is. Such early calls are
//! served from a small static bootstrap arena; its blocks are never freed to the real
//! allocator (free ignores them, realloc copies them out).

use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

type MallocFn = unsafe extern "C" fn(usize) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type CallocFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type ReallocFn = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
type MemalignFn = unsafe extern "C" fn(usize, usize) -> *mut c_void;
type PosixMemalignFn = unsafe extern "C" fn(*mut *mut c_void, usize, usize) -> i32;
type UsableFn = unsafe extern "C" fn(*mut c_void) -> usize;

/// Resolved addresses (0 = not resolved or absent), in the order of [`NAMES`].
static FNS: [AtomicUsize; 10] = [const { AtomicUsize::new(0) }; 10];
static RESOLVING: AtomicBool = AtomicBool::new(false);
static RESOLVED: AtomicBool = AtomicBool::new(false);

const NAMES: [&[u8]; 10] = [
    b"malloc\0",
    b"free\0",
    b"calloc\0",
    b"realloc\0",
    b"memalign\0",
    b"posix_memalign\0",
    b"aligned_alloc\0",
    b"valloc\0",
    b"pvalloc\0",
    b"malloc_usable_size\0",
];
const MALLOC: usize = 0;
const FREE: usize = 1;
const CALLOC: usize = 2;
const REALLOC: usize = 3;
const MEMALIGN: usize = 4;
const POSIX_MEMALIGN: usize = 5;
const ALIGNED_ALLOC: usize = 6;
const VALLOC: usize = 7;
const PVALLOC: usize = 8;
const USABLE: usize = 9;

/// Looks the real functions up once. Safe to call again (double initialization is a no-op);
/// a call that races with one in progress returns at once and the caller uses the bootstrap.
pub fn resolve() {
    if RESOLVED.load(Ordering::Acquire) || RESOLVING.swap(true, Ordering::AcqRel) {
        return;
    }
    // dlsym may allocate: those calls are served by the bootstrap arena and not recorded.
    crate::thread::pass_through(|| {
        for (slot, name) in FNS.iter().zip(NAMES) {
            // SAFETY: name is NUL-terminated; RTLD_NEXT lookups have no other preconditions.
            let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr() as *const libc::c_char) };
            slot.store(f as usize, Ordering::Release);
        }
    });
    RESOLVED.store(
        FNS[MALLOC].load(Ordering::Acquire) != 0 && FNS[FREE].load(Ordering::Acquire) != 0,
        Ordering::Release,
    );
    RESOLVING.store(false, Ordering::Release);
}

fn get(i: usize) -> usize {
    let f = FNS[i].load(Ordering::Acquire);
    if f == 0 && !RESOLVED.load(Ordering::Acquire) {
        resolve();
        return FNS[i].load(Ordering::Acquire);
    }
    f
}

// ---- bootstrap arena -------------------------------------------------------------------

const BOOT_BYTES: usize = 256 << 10;
#[repr(C, align(64))]
struct Boot([u8; BOOT_BYTES]);
static mut BOOT: Boot = Boot([0; BOOT_BYTES]);
static BOOT_USED: AtomicUsize = AtomicUsize::new(0);

fn boot_base() -> usize {
    core::ptr::addr_of!(BOOT) as usize
}

/// Whether `p` came from the bootstrap arena.
#[inline(always)]
pub fn is_boot(p: *mut c_void) -> bool {
    // One comparison: below the arena wraps around to a large offset.
    (p as usize).wrapping_sub(boot_base()) < BOOT_BYTES
}

/// Size requested for a bootstrap block (stored in the 16 bytes before it).
fn boot_size(p: *mut c_void) -> usize {
    // SAFETY: p is a bootstrap block, preceded by its header word.
    unsafe { *((p as *const usize).sub(1)) }
}

fn boot_alloc(size: usize, align: usize) -> *mut c_void {
    let align = align.max(16);
    loop {
        let used = BOOT_USED.load(Ordering::Acquire);
        let start = (boot_base() + used + 16).next_multiple_of(align);
        let end = start + size;
        if end > boot_base() + BOOT_BYTES {
            return core::ptr::null_mut();
        }
        if BOOT_USED
            .compare_exchange(used, end - boot_base(), Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            // SAFETY: [start-8, end) lies in the arena and was just reserved for us. The
            // arena is static zeroed memory, so calloc's contract holds too.
            unsafe { *((start as *mut usize).sub(1)) = size };
            return start as *mut c_void;
        }
    }
}

// ---- the real functions ----------------------------------------------------------------

/// Real `malloc`.
pub fn malloc(size: usize) -> *mut c_void {
    match get(MALLOC) {
        0 => boot_alloc(size, 16),
        // SAFETY: the address came from dlsym("malloc").
        f => unsafe { core::mem::transmute::<usize, MallocFn>(f)(size) },
    }
}

/// Real `free`; bootstrap blocks are ignored.
pub fn free(p: *mut c_void) {
    if is_boot(p) {
        return;
    }
    if let f @ 1.. = get(FREE) {
        // SAFETY: the address came from dlsym("free"); p came from the real allocator.
        unsafe { core::mem::transmute::<usize, FreeFn>(f)(p) }
    }
}

/// Real `calloc`.
pub fn calloc(n: usize, size: usize) -> *mut c_void {
    match get(CALLOC) {
        0 => match n.checked_mul(size) {
            Some(total) => boot_alloc(total, 16),
            None => core::ptr::null_mut(),
        },
        // SAFETY: the address came from dlsym("calloc").
        f => unsafe { core::mem::transmute::<usize, CallocFn>(f)(n, size) },
    }
}

/// Real `realloc`; a bootstrap block is copied into a real one.
pub fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if is_boot(p) {
        let q = malloc(size);
        if !q.is_null() {
            let n = boot_size(p).min(size);
            // SAFETY: both blocks hold at least n bytes and do not overlap.
            unsafe { core::ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, n) };
        }
        return q;
    }
    match get(REALLOC) {
        0 => core::ptr::null_mut(),
        // SAFETY: the address came from dlsym("realloc").
        f => unsafe { core::mem::transmute::<usize, ReallocFn>(f)(p, size) },
    }
}

/// Real `memalign` (falls back to `posix_memalign`, then the bootstrap).
pub fn memalign(align: usize, size: usize) -> *mut c_void {
    match get(MEMALIGN) {
        0 => {
            let mut p = core::ptr::null_mut();
            if posix_memalign(&mut p, align.max(core::mem::size_of::<usize>()), size) == 0 {
                p
            } else {
                core::ptr::null_mut()
            }
        }
        // SAFETY: the address came from dlsym("memalign").
        f => unsafe { core::mem::transmute::<usize, MemalignFn>(f)(align, size) },
    }
}

/// Real `posix_memalign`.
pub fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> i32 {
    match get(POSIX_MEMALIGN) {
        0 => {
            let p = boot_alloc(size, align);
            if p.is_null() {
                return libc::ENOMEM;
            }
            // SAFETY: out is the caller's valid out-pointer.
            unsafe { *out = p };
            0
        }
        // SAFETY: the address came from dlsym("posix_memalign").
        f => unsafe { core::mem::transmute::<usize, PosixMemalignFn>(f)(out, align, size) },
    }
}

/// Real `aligned_alloc` (falls back to `memalign`).
pub fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    match get(ALIGNED_ALLOC) {
        0 => memalign(align, size),
        // SAFETY: the address came from dlsym("aligned_alloc").
        f => unsafe { core::mem::transmute::<usize, MemalignFn>(f)(align, size) },
    }
}

/// Real `valloc` (falls back to page-aligned `memalign`).
pub fn valloc(size: usize) -> *mut c_void {
    match get(VALLOC) {
        0 => memalign(page(), size),
        // SAFETY: the address came from dlsym("valloc").
        f => unsafe { core::mem::transmute::<usize, MallocFn>(f)(size) },
    }
}

/// Real `pvalloc` (falls back to page-aligned, page-rounded `memalign`).
pub fn pvalloc(size: usize) -> *mut c_void {
    match get(PVALLOC) {
        0 => memalign(page(), size.next_multiple_of(page()).max(page())),
        // SAFETY: the address came from dlsym("pvalloc").
        f => unsafe { core::mem::transmute::<usize, MallocFn>(f)(size) },
    }
}

/// Real `malloc_usable_size`; for a bootstrap block, its requested size.
pub fn usable_size(p: *mut c_void) -> usize {
    if p.is_null() {
        return 0;
    }
    if is_boot(p) {
        return boot_size(p);
    }
    match get(USABLE) {
        0 => 0,
        // SAFETY: the address came from dlsym("malloc_usable_size").
        f => unsafe { core::mem::transmute::<usize, UsableFn>(f)(p) },
    }
}

fn page() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_blocks_are_recognized_and_sized() {
        let p = boot_alloc(40, 16);
        assert!(is_boot(p) && (p as usize) & 15 == 0);
        assert_eq!(boot_size(p), 40);
        let q = boot_alloc(8, 64);
        assert!(is_boot(q) && (q as usize) & 63 == 0);
        assert!(!is_boot(core::ptr::null_mut()));
    }
}
