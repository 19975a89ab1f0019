//! ARMv7 capture without unwinding in the process: the entry registers and a sparse copy of
//! the caller's stack, unwound on the host with the sysroot's tables.
//!
//! Why: C code built with the distributions' defaults (Debian armhf, Yocto, Buildroot:
//! Thumb-2, `-O2`, no frame pointers, no `-funwind-tables`) has no `.ARM.exidx` entry, so
//! any unwinder running on the board stops at the first C frame. Its `.debug_frame` lives
//! in the debug sysroot on the developer's machine, as for the CPU samples' stack copies.
//! Copying the whole used stack per allocation would be far too much for the trace tree, so
//! only the words an unwind can need are kept: those that look like a return address (a
//! word inside an executable segment of a known module, Thumb bit cleared for the check,
//! that follows a call instruction) or like a saved frame pointer (a 4-aligned word pointing
//! into the thread's stack above its own slot). Stack addresses are recorded as distances
//! below the stack's top (`crossprof_heap_wire::sparse::TOP`), so that the outer frames give
//! the same entries at any depth and the trace tree shares them, as it shares the outer
//! frames of return-address stacks. Any other word (saved data registers, locals) reads as unknown on the host,
//! which can stop an unwind but never make one up (see `crossprof_heap_wire::sparse`).
//!
//! Cost per event: most events are answered by the chain memo (`super::sparse_memo`): one
//! load and compare per word the last chain from the same registers kept. Otherwise one pass
//! over the used stack, at most [`MAX_SCAN_BYTES`], one load and a bit test of a 8 KiB bitmap
//! (one bit per 64 KiB of the address space that overlaps an executable segment) per word,
//! and an exact range check and a look at the instruction before for the few candidates;
//! then, unless the chain is the last one met again (see `super::stack_id`), the kept words
//! are interned in the trace tree like return addresses. No unwinder, no loader call, no
//! lock: signal-safe. The unwinder of the C runtime (`_Unwind_Backtrace`) is no longer called
//! inside `malloc` on ARMv7.

use alloc::vec::Vec;
use core::ops::Range;

use crossprof_heap_wire::{cut_short, sparse};

use super::phdr_list;

/// Most stack bytes scanned above the caller's stack pointer: as `rec --call-graph dwarf`'s
/// default copy. A deeper stack is cut at the outer end, and its unwind stops there on the
/// host (counted as cut short).
pub const MAX_SCAN_BYTES: usize = 32 * 1024;

/// How far below a saved return address a saved frame pointer can lie: a prologue pushes
/// the callee-saved registers with lr last (`push {r4-r11, lr}`), so a saved r7 is at most 5
/// words below the saved lr, and a saved r11 right below it. A word that points into the
/// stack is kept only within this span below a kept return address: the others are pointers
/// to locals, which no unwind reads and which made chains that are the same look different
/// (half the entries of a Lua chain).
const SAVED_SPAN: usize = 20;

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
    /// Whether `w` looks like a return address: inside an executable segment, and right
    /// after a call instruction (Thumb `bl`/`blx` when its low bit is set, else ARM `bl`/
    /// `blx`). Pointers to functions, to `.rodata` (which shares the executable segment) and
    /// data that happens to fall in one are mostly left out: they would only make stacks
    /// that are the same look different to the trace tree. Signal-safe (reads code).
    #[inline(always)]
    fn is_return_address(&self, w: u32) -> bool {
        let a = w & !1;
        let region = (a >> 16) as usize;
        // The bitmap always has REGIONS bits.
        if self.bitmap[region / 64] & (1 << (region % 64)) == 0 {
            return false;
        }
        let i = self.exec.partition_point(|r| r.start <= a);
        let Some(seg) = i.checked_sub(1).map(|i| &self.exec[i]) else {
            return false;
        };
        if !seg.contains(&a) || a < seg.start.saturating_add(4) {
            return false;
        }
        let at = a as usize;
        // SAFETY: [a - 4, a) lies inside an executable segment (checked above), mapped
        // readable by the loader.
        unsafe {
            if w & 1 != 0 {
                let h1 = core::ptr::read_volatile((at - 4) as *const u16);
                let h2 = core::ptr::read_volatile((at - 2) as *const u16);
                // 16-bit `blx rm`, or 32-bit `bl`/`blx` (first halfword 11110, second 11x1x/11x0x).
                h2 & 0xff87 == 0x4780 || (h1 & 0xf800 == 0xf000 && h2 & 0xc000 == 0xc000)
            } else {
                let i = core::ptr::read_volatile((at - 4) as *const u32);
                (i & 0x0f00_0000 == 0x0b00_0000 && i >> 28 != 0xf)
                    || i & 0xfe00_0000 == 0xfa00_0000
                    || i & 0x0fff_fff0 == 0x012f_ff30
            }
        }
    }
}

/// Takes the module list (call outside any allocation, see [`phdr_list`]).
pub fn rescan() -> Modules {
    let me = rescan as fn() -> Modules as usize as u64;
    let (list, own) = phdr_list::take_with_own(me);
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

/// The registers as the chain of a hook entered with `regs` (lr, sp, r7, r11) depends on
/// them: r7 and r11 as 0 where they do not point into the stack above sp (see [`capture`]).
/// The key of the chain memo (`super::sparse_memo`). Signal-safe.
pub fn chain_registers(regs: [u64; 4], bounds: (usize, usize)) -> [u64; 4] {
    let [lr, sp, r7, r11] = regs;
    let inside = |r: u64| {
        if r >= sp && r < bounds.1 as u64 {
            r
        } else {
            0
        }
    };
    [lr, sp, inside(r7), inside(r11)]
}

/// Writes the sparse stack of a hook entered with `regs` (the caller's lr, sp, r7 and r11,
/// see `super::entry`) into `out`, innermost entry first, as `crossprof_heap_wire::sparse`
/// lays it out: the two register entries, then each kept word by rising stack address (stack
/// addresses as if the stack ended at `crossprof_heap_wire::sparse::TOP`), then
/// a [`cut_short::TOO_DEEP`] marker when `out` filled up before the scan ended. Reads stay
/// inside `bounds`, the thread's stack. Returns the entry count; with unknown registers
/// (zeros) nothing is scanned and the stack is the registers alone, whose unwind on the host
/// ends at the site. Signal-safe.
pub fn capture(m: &Modules, out: &mut [u64], bounds: (usize, usize), regs: [u64; 4]) -> usize {
    let [lr, sp, r7, r11] = chain_registers(regs, bounds).map(|r| r as u32);
    if out.len() < 3 {
        return 0;
    }
    let sp = sp as usize;
    let top = bounds.1;
    if sp == 0
        || sp < bounds.0
        || sp >= top
        || !sp.is_multiple_of(4)
        || top - sp >= sparse::TOP as usize
    {
        out[0] = sparse::registers_low(0, 0);
        out[1] = sparse::registers_high(lr, 0);
        return 2;
    }
    // Stack addresses as if the stack ended at TOP (see there); r7 and r11 that do not point
    // into the stack are no frame pointer of any frame here, and were left out (0) by
    // `chain_registers` so that what they held does not make each chain different.
    let below = |a: usize| (top - a) as u32;
    let moved = |r: u32| {
        if r == 0 {
            0
        } else {
            sparse::TOP - below(r as usize)
        }
    };
    out[0] = sparse::registers_low(moved(r7), moved(r11));
    out[1] = sparse::registers_high(lr, sparse::TOP - below(sp));
    let mut n = 2;
    let end = top.min(sp + MAX_SCAN_BYTES);
    let room = out.len() - 1;
    // Stack-address words seen in the last SAVED_SPAN bytes, waiting for a return address
    // above them (see SAVED_SPAN): (slot, entry), rising.
    let mut pending = [(0usize, 0u64); SAVED_SPAN / 4 + 1];
    let mut waiting = 0;
    let mut at = sp;
    while at + 4 <= end {
        // SAFETY: `at` is 4-aligned and inside this thread's stack, [sp, end).
        let w = unsafe { core::ptr::read_volatile(at as *const u32) };
        let up = w as usize;
        // Those too far below to be saved next to a return address found from here on.
        let keep_from = pending[..waiting]
            .iter()
            .position(|&(slot, _)| at - slot <= SAVED_SPAN)
            .unwrap_or(waiting);
        pending.copy_within(keep_from..waiting, 0);
        waiting -= keep_from;
        if up > at && up < top && up.is_multiple_of(4) {
            // At most one entry per word of the span below `at` waits: room for this one.
            pending[waiting] = (at, sparse::stack_word(below(at), below(up)));
            waiting += 1;
        } else if m.is_return_address(w) {
            for &(_, entry) in &pending[..waiting] {
                if n == room {
                    out[n] = cut_short::TOO_DEEP;
                    return n + 1;
                }
                out[n] = entry;
                n += 1;
            }
            waiting = 0;
            if n == room {
                out[n] = cut_short::TOO_DEEP;
                return n + 1;
            }
            out[n] = sparse::word(below(at), w);
            n += 1;
        }
        at += 4;
    }
    n
}
