//! The entry points `rec --heap -p PID` calls inside a running process, through ptrace, after
//! it has loaded this library there with `dlopen`: [`crossprof_heap_attach`] gives the
//! library the socket that a launch would have put in the environment, connects the ring and
//! redirects the modules' malloc-family calls here (the `got` module);
//! [`crossprof_heap_detach`] puts them back and stops recording. The library stays loaded
//! (a thread may still be inside a hook), forwarding every call.

use core::ffi::c_char;
use core::sync::atomic::{AtomicUsize, Ordering};

/// The socket name and rec's pid given at attach, in the environment's `NAME=value` form's
/// value bytes; read by [`setting`] in place of the environment.
static mut SOCKET: [u8; 128] = [0; 128];
static SOCKET_LEN: AtomicUsize = AtomicUsize::new(0);
static mut REC_PID: [u8; 16] = [0; 16];
static REC_PID_LEN: AtomicUsize = AtomicUsize::new(0);

/// The value of environment setting `name`, or what the attach gave in its place.
pub fn setting(name: &str) -> Option<&'static [u8]> {
    let given = |buf: *const u8, len: &AtomicUsize| {
        let n = len.load(Ordering::Acquire);
        // SAFETY: written once before the length is published, never again.
        (n > 0).then(|| unsafe { core::slice::from_raw_parts(buf, n) })
    };
    let attached = match name {
        crossprof_heap_wire::ENV_SOCKET => given(core::ptr::addr_of!(SOCKET).cast(), &SOCKET_LEN),
        crossprof_heap_wire::ENV_REC_PID => {
            given(core::ptr::addr_of!(REC_PID).cast(), &REC_PID_LEN)
        }
        _ => None,
    };
    attached.or_else(|| crate::sys::env(name))
}

/// Starts recording in a process this library was `dlopen`ed into: `socket` is rec's socket
/// name (NUL-terminated), `rec_pid` rec's pid, `sample_mean` the mean bytes between sampled
/// allocations of `--heap-sample` (0: every allocation), which a launch would have put in
/// the environment. Returns the number of call slots redirected, or -1 when the ring could
/// not be connected (nothing is redirected then).
///
/// # Safety
/// `socket` must be a NUL-terminated string. Called once, by rec, through ptrace.
#[no_mangle]
pub unsafe extern "C" fn crossprof_heap_attach(
    socket: *const c_char,
    rec_pid: u32,
    sample_mean: usize,
) -> i64 {
    if socket.is_null() || SOCKET_LEN.load(Ordering::Acquire) != 0 {
        return -1;
    }
    // Before any slot points at the hooks, so that every call is decided with the rate the
    // recording's header states.
    crate::sample::set_mean(sample_mean as u64);
    // Loaded by dlopen: its thread-locals may be dynamic (never learnt at load; made sure).
    crate::thread::forget_static_tls();
    // SAFETY: the caller passes a NUL-terminated string.
    let name = unsafe { core::ffi::CStr::from_ptr(socket) }.to_bytes();
    if name.is_empty() || name.len() > 100 {
        return -1;
    }
    // SAFETY: written before the lengths are published; no reader before that.
    unsafe {
        core::ptr::copy_nonoverlapping(
            name.as_ptr(),
            core::ptr::addr_of_mut!(SOCKET).cast::<u8>(),
            name.len(),
        );
        let mut digits = [0u8; 16];
        let mut n = 0;
        let mut v = rec_pid;
        loop {
            digits[n] = b'0' + (v % 10) as u8;
            n += 1;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        let out = core::ptr::addr_of_mut!(REC_PID).cast::<u8>();
        for i in 0..n {
            *out.add(i) = digits[n - 1 - i];
        }
        REC_PID_LEN.store(n, Ordering::Release);
    }
    SOCKET_LEN.store(name.len(), Ordering::Release);
    if !start() {
        return -1;
    }
    crate::got::patch_all() as i64
}

/// Stops recording in an attached process: the call slots back as they were, the ring
/// closed. Returns the number of slots put back.
#[no_mangle]
pub extern "C" fn crossprof_heap_detach() -> i64 {
    let n = crate::got::restore_all();
    stop_recording();
    n as i64
}

/// Starts recording in a running process this library was loaded into (`rec --heap -p`,
/// see [`crate::attach`]): [`crate::record::init`] now that the socket is known. Whether the ring is
/// connected (a failed connect turns recording off).
fn start() -> bool {
    crate::record::ACTIVE.store(true, Ordering::Release);
    crate::record::init();
    crate::record::active()
}

/// Stops recording (rec detaches from an attached process): later calls only forward.
fn stop_recording() {
    use crate::record::{state, stop, LOCK};
    LOCK.lock(crate::thread::tid());
    // SAFETY: LOCK is held.
    stop(unsafe { state() });
    LOCK.unlock();
}
