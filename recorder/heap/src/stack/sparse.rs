//! ARMv7 capture without unwinding in the process: the entry registers and a sparse copy of
//! the caller's stack, unwound on the host with the sysroot's tables.
//!
//! Why: C code built with the distributions' defaults (Debian armhf, Yocto, Buildroot:
//! Thumb-2, `-O2`, no frame pointers, no `-funwind-tables`) has no `.ARM.exidx` entry, so
//! any unwinder running on the board stops at the first C frame. Its `.debug_frame` lives
//! in the debug sysroot on the developer's machine, as for the CPU samples' stack copies.
//! Copying the whole used stack per allocation would be far too much for the trace tree, so
//! only the words an unwind can need are kept: those that look like a return address (a
//! word inside an executable segment of a known module, Thumb bit cleared for the check) or
//! like a saved frame pointer (a 4-aligned word pointing into the thread's stack above its
//! own slot). Any other word (saved data registers, locals) reads as unknown on the host,
//! which can stop an unwind but never make one up (see `crossprof_heap_wire::sparse`).
//!
//! Cost per event: one pass over the used stack, at most [`MAX_SCAN_BYTES`], one load and a
//! bit test of a 8 KiB bitmap (one bit per 64 KiB of the address space that overlaps an
//! executable segment) per word, and an exact range check for the few candidates; then the
//! kept words are interned in the trace tree like return addresses. No unwinder, no loader
//! call, no lock: signal-safe. The unwinder of the C runtime (`_Unwind_Backtrace`) is no
//! longer called inside `malloc` on ARMv7.

use alloc::vec::Vec;
use core::ops::Range;

use crossprof_heap_wire::{cut_short, sparse};

use super::phdr_list;

/// Most stack bytes scanned above the caller's stack pointer: as `rec --call-graph dwarf`'s
/// default copy. A deeper stack is cut at the outer end, and its unwind stops there on the
/// host (counted as cut short).
pub const MAX_SCAN_BYTES: usize = 32 * 1024;

/// 64 KiB regions of the 32-bit address space, one bit each.
const REGIONS: usize = 1 << 16;

/// The interposer's own range, the executable segments of the loaded modules and a bitmap of
/// the 64 KiB regions they touch.
pub struct Modules {
    /// The interposer's own code.
    pub own: Range<u64>,
    /// Executable segments, sorted by start.
    exec: Vec<Range<u32>>,
    /// One bit per 64 KiB region that overlaps an executable segment.
    bitmap: Vec<u64>,
}

impl Modules {
    /// Whether `w` (Thumb bit cleared) lies inside an executable segment. Signal-safe.
    #[inline(always)]
    fn is_code(&self, w: u32) -> bool {
        let w = w & !1;
        let region = (w >> 16) as usize;
        // The bitmap always has REGIONS bits.
        if self.bitmap[region / 64] & (1 << (region % 64)) == 0 {
            return false;
        }
        let i = self.exec.partition_point(|r| r.start <= w);
        i > 0 && self.exec[i - 1].contains(&w)
    }
}

/// Takes the module list (call outside any allocation, see [`phdr_list`]).
pub fn rescan() -> Modules {
    let me = rescan as fn() -> Modules as usize as u64;
    let list = phdr_list::take();
    phdr_list::resolve(list.len());
    let own = list
        .iter()
        .find(|m| m.range.contains(&me))
        .map_or(0..0, |m| m.range.clone());
    let mut exec: Vec<Range<u32>> = Vec::new();
    let mut bitmap = alloc::vec![0u64; REGIONS / 64];
    for m in &list {
        for r in m.exec_ranges() {
            let (Ok(start), Ok(end)) = (u32::try_from(r.start), u32::try_from(r.end)) else {
                continue;
            };
            if start >= end {
                continue;
            }
            exec.push(start..end);
            for region in (start >> 16)..=((end - 1) >> 16) {
                bitmap[region as usize / 64] |= 1 << (region % 64);
            }
        }
    }
    exec.sort_by_key(|r| r.start);
    Modules { own, exec, bitmap }
}

/// Writes the sparse stack of a hook entered with `regs` (the caller's lr, sp, r7 and r11,
/// see `super::entry`) into `out`, innermost entry first, as `crossprof_heap_wire::sparse`
/// lays it out: the two register entries, then each kept word by rising stack address, then
/// a [`cut_short::TOO_DEEP`] marker when `out` filled up before the scan ended. Reads stay
/// inside `bounds`, the thread's stack. Returns the entry count; with unknown registers
/// (zeros) nothing is scanned and the stack is the registers alone, whose unwind on the host
/// ends at the site. Signal-safe.
pub fn capture(m: &Modules, out: &mut [u64], bounds: (usize, usize), regs: [u64; 4]) -> usize {
    let [lr, sp, r7, r11] = regs.map(|r| r as u32);
    if out.len() < 3 {
        return 0;
    }
    out[0] = sparse::registers_low(r7, r11);
    out[1] = sparse::registers_high(lr, sp);
    let mut n = 2;
    let sp = sp as usize;
    if sp == 0 || sp < bounds.0 || sp >= bounds.1 || sp % 4 != 0 {
        return n;
    }
    let top = bounds.1.min(sp + MAX_SCAN_BYTES);
    let room = out.len() - 1;
    let mut at = sp;
    while at + 4 <= top {
        // SAFETY: `at` is 4-aligned and inside this thread's stack, [sp, top).
        let w = unsafe { core::ptr::read_volatile(at as *const u32) };
        let up = w as usize;
        let keep = (up > at && up < bounds.1 && up % 4 == 0) || m.is_code(w);
        if keep {
            if n == room {
                out[n] = cut_short::TOO_DEEP;
                return n + 1;
            }
            out[n] = sparse::word((at - sp) as u32, w);
            n += 1;
        }
        at += 4;
    }
    n
}
