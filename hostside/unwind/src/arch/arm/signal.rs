//! 32-bit ARM signal frames. glibc and musl pass the kernel a restorer: glibc's
//! `__default_rt_sa_restorer` (Thumb-2 on Debian armhf: `mov.w r7, #173; svc 0`), musl's
//! `__restore_rt` (ARM state: `mov r7, #173; swi 0`), and their non-rt twins (syscall 119)
//! for handlers installed without `SA_SIGINFO`; the kernel's own sigpage codes use the
//! 16-bit Thumb `movs r7, #N; svc 0`.
//!
//! The kernel pushes a `sigframe` (the ucontext, then the return code) for a handler without
//! `SA_SIGINFO` and an `rt_sigframe` (128 bytes of siginfo, then that `sigframe`) for one
//! with it; the stack pointer at the trampoline is the frame's start. In the ucontext,
//! uc_flags, uc_link and a 12-byte stack_t precede the sigcontext (at +20): trap_no,
//! error_code, oldmask, then r0..r10, fp, ip, sp, lr, pc (`arch/arm/include/asm/ucontext.h`,
//! `uapi/asm/sigcontext.h`; libunwind's `LINUX_UC_MCONTEXT_OFF` 0x14 and `LINUX_SC_R0_OFF`
//! 0x0c).

use crate::arch::{SignalFrame, Trampoline};

/// r0 in a `sigframe`: the sigcontext at +20, its registers after three words.
const SIGFRAME_R0: u64 = 20 + 12;
/// r0 in an `rt_sigframe`: after the siginfo.
const RT_SIGFRAME_R0: u64 = 128 + SIGFRAME_R0;

/// The layout with r0 at `r0`.
const fn frame(r0: u64) -> SignalFrame {
    SignalFrame {
        fp: r0 + 11 * 4,
        sp: r0 + 13 * 4,
        lr: Some(r0 + 14 * 4),
        pc: r0 + 15 * 4,
        words: Some((r0, 16)),
    }
}

/// The trampolines recognised, little-endian (big-endian ARM Linux boards are not built).
pub(super) const TRAMPOLINES: &[Trampoline] = &[
    // Thumb-2 `mov.w r7, #173; svc 0` (glibc armhf).
    Trampoline {
        code: &[0x4f, 0xf0, 0xad, 0x07, 0x00, 0xdf],
        frame: frame(RT_SIGFRAME_R0),
    },
    Trampoline {
        code: &[0x4f, 0xf0, 0x77, 0x07, 0x00, 0xdf],
        frame: frame(SIGFRAME_R0),
    },
    // ARM `mov r7, #173; swi 0` (musl, ARM-state glibc).
    Trampoline {
        code: &[0xad, 0x70, 0xa0, 0xe3, 0x00, 0x00, 0x00, 0xef],
        frame: frame(RT_SIGFRAME_R0),
    },
    Trampoline {
        code: &[0x77, 0x70, 0xa0, 0xe3, 0x00, 0x00, 0x00, 0xef],
        frame: frame(SIGFRAME_R0),
    },
    // Thumb `movs r7, #173; svc 0` (the kernel's sigpage).
    Trampoline {
        code: &[0xad, 0x27, 0x00, 0xdf],
        frame: frame(RT_SIGFRAME_R0),
    },
    Trampoline {
        code: &[0x77, 0x27, 0x00, 0xdf],
        frame: frame(SIGFRAME_R0),
    },
];
