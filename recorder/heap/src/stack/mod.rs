//! In-process stack capture: raw return addresses of the allocating thread, innermost first,
//! starting at the caller of the malloc-family function (the interposer's own frames are
//! skipped by address range).
//!
//! The innermost frame does not depend on unwind information: each hook reads its own return
//! address as its first instruction ([`entry_return_address`]), and [`capture_at`] puts it
//! first and appends what the unwinder found beyond it. ARMv7 C code built without
//! `-funwind-tables` (Debian armhf's default) has no `.ARM.exidx` entry, so
//! `_Unwind_Backtrace` stops at the first C frame without reporting it: there the stack is
//! the allocation site alone, which is still the right site. Where unwind information exists
//! the unwinder's first frame is that same address and the result is the unwinder's stack.
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

/// The return address of the function this is inlined into, read as it stands at entry: the
/// link register on ARM, AArch64 and RISC-V. Each hook calls it as its first statement, so
/// that it is inlined there before any call overwrites the register. On ARM the Thumb bit is cleared, as `_Unwind_GetIP` clears it. On x86 and
/// other architectures the return address sits on the stack under a frame this code cannot
/// name, and 0 ("unknown") is returned: there the unwinder's first frame is the site (x86 C
/// compilers emit `.eh_frame` by default). Signal-safe (reads one register).
#[inline(always)]
pub fn entry_return_address() -> u64 {
    let ra: usize;
    // SAFETY: reads the link register only. Not `nomem`: the asm stays before the calls the
    // hook makes (which overwrite the link register).
    #[cfg(target_arch = "aarch64")]
    unsafe {
        core::arch::asm!("mov {}, x30", out(reg) ra, options(nostack, preserves_flags))
    };
    // SAFETY: as above.
    #[cfg(target_arch = "arm")]
    unsafe {
        core::arch::asm!("mov {}, lr", out(reg) ra, options(nostack, preserves_flags))
    };
    // SAFETY: as above.
    #[cfg(any(target_arch = "riscv64", target_arch = "riscv32"))]
    unsafe {
        core::arch::asm!("mv {}, ra", out(reg) ra, options(nostack, preserves_flags))
    };
    #[cfg(not(any(
        target_arch = "aarch64",
        target_arch = "arm",
        target_arch = "riscv64",
        target_arch = "riscv32"
    )))]
    {
        ra = 0;
    }
    if cfg!(target_arch = "arm") {
        (ra & !1) as u64
    } else {
        ra as u64
    }
}

/// Puts `ra`, the hook's return address, first in `out[..n]` (a stack the unwinder wrote,
/// innermost first, own frames skipped) and keeps the unwinder's frames beyond it: those
/// after `ra`'s position when the unwinder reached it (normally at 0), none when it did not
/// (it stopped before the site, or its frames do not continue from it). `ra` of 0 or inside
/// `own` (a hook called by another part of the interposer) leaves the stack as it is.
/// Returns the new frame count. Signal-safe.
pub fn put_first(ra: u64, own: &core::ops::Range<u64>, out: &mut [u64], n: usize) -> usize {
    if ra == 0 || own.contains(&ra) || out.is_empty() {
        return n;
    }
    let n = n.min(out.len());
    match out[..n].iter().position(|&ip| ip == ra) {
        Some(0) => n,
        Some(i) => {
            out.copy_within(i..n, 0);
            n - i
        }
        None => {
            out[0] = ra;
            1
        }
    }
}

/// Where a hook was entered: its return address (the allocation site, see
/// [`entry_return_address`]) and, where framehop unwinds, the registers (pc, sp, fp, lr) at
/// the hook's first statement. Unwinding starts from those, so the interposer's own frames
/// under the hook (the event path down to the capture) are never unwound: they were about
/// half of the unwinding work of every allocation. Zeros mean "unknown": unwind from the
/// capture itself and skip the interposer's frames by address.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Entry {
    /// The hook's return address, 0 when unknown.
    pub ra: u64,
    /// pc, sp, fp, lr at the hook's first statement, zeros when not taken.
    pub regs: [u64; 4],
}

/// The [`Entry`] of the hook this is inlined into; each hook calls it as its first statement.
/// Signal-safe (reads registers only).
#[inline(always)]
pub fn entry() -> Entry {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    let regs = {
        let (pc, sp, fp, lr) = framehop_unwind::registers();
        [pc, sp, fp, lr]
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let regs = [0; 4];
    Entry {
        ra: entry_return_address(),
        regs,
    }
}

/// [`capture`] from the hook's entry registers, with its return address as the innermost
/// frame (see [`put_first`]); returns the frame count and whether an address outside every
/// known module was met.
pub fn capture_at(
    at: Entry,
    m: &mut Modules,
    out: &mut [u64],
    bounds: (usize, usize),
) -> (usize, bool) {
    let (n, unknown) = capture(m, out, bounds, at.regs);
    (put_first(at.ra, &m.own, out, n), unknown)
}

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

#[cfg(test)]
mod tests {
    use super::put_first;

    #[test]
    fn the_return_address_leads_and_the_overlap_is_kept_once() {
        let own = 0x100..0x200;
        let mut s = [0x1000, 0x2000, 0x3000, 0];
        assert_eq!(put_first(0x1000, &own, &mut s, 3), 3);
        assert_eq!(s[..3], [0x1000, 0x2000, 0x3000]);
        // The unwinder reported something before the site: start at the site.
        let mut s = [0x900, 0x1000, 0x2000, 0];
        assert_eq!(put_first(0x1000, &own, &mut s, 3), 2);
        assert_eq!(s[..2], [0x1000, 0x2000]);
        // It never reached the site (ARMv7 C code without unwind tables): the site alone.
        let mut s = [0u64; 4];
        assert_eq!(put_first(0x1000, &own, &mut s, 0), 1);
        assert_eq!(s[0], 0x1000);
        let mut s = [0x5000, 0x6000, 0, 0];
        assert_eq!(put_first(0x1000, &own, &mut s, 2), 1);
        assert_eq!(s[0], 0x1000);
        // Unknown or own return address: the unwinder's stack as it is.
        let mut s = [0x5000, 0x6000, 0, 0];
        assert_eq!(put_first(0, &own, &mut s, 2), 2);
        assert_eq!(put_first(0x150, &own, &mut s, 2), 2);
        assert_eq!(s[..2], [0x5000, 0x6000]);
    }
}
