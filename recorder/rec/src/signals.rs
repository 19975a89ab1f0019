//! SIGINT/SIGTERM: stop recording cleanly, and pass the signal on to a launched application.
//!
//! The handler only stores atomics and calls `kill`, both async-signal-safe; the main loop
//! notices the request within one poll interval.

use std::sync::atomic::{AtomicI32, Ordering};

static STOP: AtomicI32 = AtomicI32::new(0);
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    STOP.store(sig, Ordering::SeqCst);
    let child = CHILD.load(Ordering::SeqCst);
    if child > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(child, sig) };
    }
}

/// Installs the handlers. `child` (when launching) receives the signals first.
pub fn install(child: Option<u32>) {
    CHILD.store(child.map_or(0, |c| c as i32), Ordering::SeqCst);
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a valid handler; no SA_RESTART so poll wakes up.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

extern "C" fn on_doorbell(_sig: libc::c_int) {}

/// Makes `SIGURG` (the heap interposers' doorbell) interrupt rec's poll instead of being
/// ignored; the handler does nothing, the main loop then drains.
pub fn install_doorbell() {
    // SAFETY: a zeroed sigaction with a valid no-op handler; no SA_RESTART.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_doorbell as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGURG, &sa, std::ptr::null_mut());
    }
}

/// The signal that asked rec to stop, if one did.
pub fn stop_requested() -> Option<i32> {
    match STOP.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}
