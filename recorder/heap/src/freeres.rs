//! Lets the C++ runtime free its start-up memory at exit, so that it is not reported as a
//! leak. libstdc++ allocates an emergency pool for exceptions (about 70 KiB) while it
//! initializes and keeps it for the life of the process; it frees it only when asked, through
//! `__gnu_cxx::__freeres()` (valgrind's `--run-cxx-freeres`). heaptrack calls that function,
//! and nothing else, from an `atexit` handler it registers when it initializes; the
//! interposer does the same, so leak counts match heaptrack's.
//!
//! glibc's `__libc_freeres` is deliberately not called: heaptrack does not call it (so the
//! C library's own start-up blocks are leaks for heaptrack too), and at `atexit` time it
//! would free memory that later exit handlers and destructors still use (stdio buffers).
//!
//! The symbol is looked up when the handler runs (libstdc++ may have been loaded after the
//! interposer, or not at all: C programs, musl userlands without C++), with
//! `dlsym(RTLD_DEFAULT)`, which finds it in any library of the global scope. Absent: nothing
//! happens. The handler runs in `exit`, outside every malloc hook and without the
//! interposer's lock, so neither the lookup nor the frees it causes can deadlock; the frees
//! are recorded like any other.

use core::ffi::c_void;

/// `__gnu_cxx::__freeres()`, mangled.
const CXX_FREERES: &core::ffi::CStr = c"_ZN9__gnu_cxx9__freeresEv";

/// Registers the exit handler (once, from the interposer's initializer). `atexit` may
/// allocate its list of handlers: that allocation passes through unrecorded.
pub fn register() {
    crate::thread::pass_through(|| {
        // SAFETY: at_exit is a plain extern "C" function that stays loaded (a preloaded
        // library is never unloaded); failure (ENOMEM) only means the pool shows as leaked.
        unsafe { libc::atexit(at_exit) };
    });
}

extern "C" fn at_exit() {
    crate::stats::print_stats();
    if !crate::record::active() {
        return;
    }
    // A failed lookup makes glibc's dlsym allocate its error message: not the program's.
    let f: *mut c_void = crate::thread::pass_through(|| {
        // SAFETY: the name is NUL-terminated; RTLD_DEFAULT lookups have no preconditions.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, CXX_FREERES.as_ptr()) }
    });
    if f.is_null() {
        return;
    }
    // SAFETY: the address is that of `void __gnu_cxx::__freeres() noexcept`, which takes no
    // arguments, returns nothing and may be called once the program is exiting.
    unsafe { core::mem::transmute::<*mut c_void, extern "C" fn()>(f)() };
}
