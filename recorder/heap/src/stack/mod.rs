//! In-process stack capture: raw return addresses of the allocating thread, innermost first,
//! starting at the caller of the malloc-family function (the interposer's own frames are
//! skipped by address range).
//!
//! Method, chosen by measurement (see `README` of the crate and the report of issue 3): on
//! x86_64 and aarch64, framehop unwinds from `.eh_frame` with a per-address rule cache and
//! never allocates while unwinding. It gives full stacks for code built without frame
//! pointers at a fraction of the cost of the C runtime's `_Unwind_Backtrace`, which
//! re-interprets the CFI of every frame on every call (about 190 ns a frame here). Other
//! architectures (ARMv7's `.ARM.exidx`, i686, RISC-V) use `_Unwind_Backtrace` until they get
//! a cached unwinder of their own.

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod framehop_unwind;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub use framehop_unwind::{capture, rescan, Modules};

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod libgcc;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub use libgcc::{capture, rescan, Modules};

pub mod modules;

/// Walks the frame-pointer chain from the caller: used only for an allocation made by a
/// signal handler that interrupted the interposer on the same thread, when the unwinder's
/// state may be mid-update. Reads stay inside `[low, high)` of the thread's stack.
#[inline(never)]
pub fn capture_fp(out: &mut [u64], own: core::ops::Range<u64>, bounds: (usize, usize)) -> usize {
    let mut fp = frame_address() as usize;
    let mut n = 0;
    while n < out.len() {
        if fp < bounds.0 || fp + 2 * core::mem::size_of::<usize>() > bounds.1 || fp & 7 != 0 {
            break;
        }
        // SAFETY: fp and fp+word lie inside this thread's stack, checked above.
        let (next, ret) = unsafe {
            let p = fp as *const usize;
            (*p, *p.add(1))
        };
        if ret == 0 {
            break;
        }
        if !own.contains(&(ret as u64)) {
            out[n] = ret as u64;
            n += 1;
        }
        if next <= fp {
            break;
        }
        fp = next;
    }
    n
}

#[inline(always)]
fn frame_address() -> *const u8 {
    let fp: *const u8;
    // SAFETY: reads the frame-pointer register only.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags))
    };
    #[cfg(target_arch = "aarch64")]
    unsafe {
        core::arch::asm!("mov {}, x29", out(reg) fp, options(nomem, nostack, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        fp = core::ptr::null();
    }
    fp
}
