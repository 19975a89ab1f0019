//! Where a hook was entered: the allocation site (its return address) and the registers an
//! unwind starts from, read first thing in each hook before any call can change them.

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
    entry_from(entry_return_address())
}

/// What a hook reads of its entry first thing, before it decides whether the call is an event
/// at all: the return address ([`entry_return_address`]), from which the event's own function
/// makes the [`Entry`] ([`entry_finish`]). On ARMv7 the whole [`Entry`]: its registers come
/// from the hook's own frame record ([`arm_entry_registers`]), which a function the hook calls
/// (without a tail call) cannot reach.
#[cfg(target_arch = "arm")]
pub type EntryStart = Entry;
/// See the ARMv7 definition.
#[cfg(not(target_arch = "arm"))]
pub type EntryStart = u64;

/// The [`EntryStart`] of the hook this is inlined into; its first statement. Signal-safe.
#[inline(always)]
pub fn entry_start() -> EntryStart {
    #[cfg(target_arch = "arm")]
    return entry();
    #[cfg(not(target_arch = "arm"))]
    return entry_return_address();
}

/// The event's [`Entry`], in the function the hook handed an event to (inlined there).
#[inline(always)]
pub fn entry_finish(start: EntryStart) -> Entry {
    #[cfg(target_arch = "arm")]
    return start;
    #[cfg(not(target_arch = "arm"))]
    return entry_from(start);
}

/// The [`Entry`] of an event whose hook read its return address `ra` first thing
/// ([`entry_return_address`]) and then called the function this is inlined into: the
/// registers are that function's, from which the unwinder passes through the hook's frame (if
/// it is still there) as through any frame of the interposer's own. Signal-safe.
#[inline(always)]
pub fn entry_from(ra: u64) -> Entry {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    let regs = {
        let (pc, sp, fp, lr) = super::framehop_unwind::registers();
        [pc, sp, fp, lr]
    };
    #[cfg(target_arch = "arm")]
    let regs = arm_entry_registers();
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "arm")))]
    let regs = [0; 4];
    Entry { ra, regs }
}

/// The caller's registers at the call of the hook this is inlined into, as
/// `[lr, sp, r7, r11]` for [`super::sparse::capture`]; zeros when they cannot be told.
///
/// The hook's prologue has moved sp and may have reused r11 before its first statement runs,
/// so they are found through the hook's frame record: the ARMv7 interposer is built with
/// frame pointers (`targets/build.sh`), and LLVM's ARM-mode prologue pushes the callee-saved
/// registers with r11 and lr on top and points r11 at the saved r11, so the saved r11 is at
/// `[r11]`, the saved lr at `[r11 + 4]` and the caller's sp is `r11 + 8` (no hook takes
/// arguments on the stack). The record is trusted only when it lies a little above sp and its
/// saved lr equals the link register, which the prologue saved but did not change; otherwise
/// (a build without frame pointers) the registers are unknown and the stack is the site
/// alone (only lr is given). r7 is read as it stands: the prologue saves it but does not change it.
/// Signal-safe (reads registers and the hook's own frame).
#[cfg(target_arch = "arm")]
#[inline(always)]
fn arm_entry_registers() -> [u64; 4] {
    let (fp, sp, lr, r7): (usize, usize, usize, usize);
    // SAFETY: reads registers only. Not `nomem`: it must stay before the hook's calls.
    unsafe {
        core::arch::asm!(
            // r7 first: an output may be given r7's register, and must not be written
            // before r7 is read.
            "mov {3}, r7",
            "mov {0}, r11",
            "mov {1}, sp",
            "mov {2}, lr",
            out(reg) fp,
            out(reg) sp,
            out(reg) lr,
            out(reg) r7,
            options(nostack, preserves_flags)
        )
    };
    // Unknown registers keep the return address: the stack is then the site alone.
    let unknown = [lr as u64, 0, 0, 0];
    if fp < sp || fp - sp > 256 || fp % 4 != 0 {
        return unknown;
    }
    // SAFETY: fp lies in the hook's own frame, between sp and sp + 256 (checked above),
    // which the prologue has written.
    let (saved_fp, saved_lr) = unsafe {
        let p = fp as *const usize;
        (
            core::ptr::read_volatile(p),
            core::ptr::read_volatile(p.add(1)),
        )
    };
    if saved_lr != lr {
        return unknown;
    }
    [lr as u64, (fp + 8) as u64, r7 as u64, saved_fp as u64]
}
