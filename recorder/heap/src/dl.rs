//! `dlopen` and `dlclose`: after the real call returns (outside the loader's lock and outside
//! any allocation), the module list is read again, so that stacks through a library loaded
//! after start unwind through it, and a library unloaded is no longer trusted for unwinding.
//!
//! Nothing inside an allocation reads the module list with `dl_iterate_phdr`: it takes the
//! loader's lock, and the loader allocates with that lock held (musl's `dlopen`; glibc's
//! `dlclose` frees with its list lock held), so a thread in `dlopen` waiting for the
//! interposer's lock and a thread in `malloc` waiting for the loader's would wait for ever.
//! On glibc, where `dlopen` is not wrapped (it looks at its caller to choose the search path
//! and namespace, so wrapping it would change what the program loads; musl's does not look
//! at its caller), an allocation whose stack meets a module loaded since is completed with
//! `_dl_find_object` instead, which takes no lock (`crate::stack::find`).
//!
//! Allocations that a new library's constructors make run inside the real `dlopen`, before
//! the list is read again: their site is right (it is the first address outside the
//! interposer), their stack beyond it may be cut short on musl.

use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

#[cfg(target_env = "musl")]
type DlopenFn = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;
type DlcloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;

#[cfg(target_env = "musl")]
static REAL_DLOPEN: AtomicUsize = AtomicUsize::new(0);
static REAL_DLCLOSE: AtomicUsize = AtomicUsize::new(0);

/// The next definition of `name` after this library (libc's), looked up once.
fn next(slot: &AtomicUsize, name: &[u8]) -> usize {
    let f = slot.load(Ordering::Acquire);
    if f != 0 {
        return f;
    }
    // SAFETY: name is NUL-terminated; RTLD_NEXT lookups have no other preconditions. Not
    // called from inside malloc, so musl's loader lock is free.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr() as *const c_char) } as usize;
    slot.store(f, Ordering::Release);
    f
}

/// `dlopen` (musl only, see the module docs).
///
/// # Safety
/// As for the C function: `file` is NULL or a NUL-terminated path.
#[cfg(target_env = "musl")]
#[no_mangle]
pub unsafe extern "C" fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void {
    let f = next(&REAL_DLOPEN, b"dlopen\0");
    if f == 0 {
        return core::ptr::null_mut();
    }
    // SAFETY: the address came from dlsym("dlopen"); arguments passed through.
    let h = unsafe { core::mem::transmute::<usize, DlopenFn>(f)(file, mode) };
    if !h.is_null() {
        crate::record::modules_changed();
    }
    h
}

/// `dlclose`.
///
/// # Safety
/// As for the C function: `handle` came from `dlopen`.
#[no_mangle]
pub unsafe extern "C" fn dlclose(handle: *mut c_void) -> c_int {
    let f = next(&REAL_DLCLOSE, b"dlclose\0");
    if f == 0 {
        return -1;
    }
    let told = crate::record::dlclose_starts();
    // SAFETY: the address came from dlsym("dlclose"); argument passed through.
    let r = unsafe { core::mem::transmute::<usize, DlcloseFn>(f)(handle) };
    crate::record::modules_changed();
    crate::record::dlclose_ended(told);
    r
}
