//! RISC-V signal frames. A handler returns into the vDSO's `__vdso_rt_sigreturn` (glibc,
//! which passes no restorer) or musl's `__restore_rt`; both are `li a7, 139; ecall`. The
//! kernel's `rt_sigframe` at the trampoline's stack pointer holds 128 bytes of siginfo, then
//! the ucontext: uc_flags, uc_link, a 24-byte stack_t, the sigset and its padding to 168
//! bytes, then the 16-aligned sigcontext at +176, whose `user_regs_struct` is pc, then x1
//! (ra) to x31 (`arch/riscv/include/uapi/asm/{ucontext,ptrace}.h`; libunwind's
//! `LINUX_UC_MCONTEXT_OFF` is the same 176).

use crate::arch::{SignalFrame, Trampoline};

/// `li a7, 139` (`addi a7, zero, 139`: 0x08b00893) then `ecall` (0x00000073), little-endian.
const RT_SIGRETURN: [u8; 8] = [0x93, 0x08, 0xb0, 0x08, 0x73, 0x00, 0x00, 0x00];

/// Start of the sigcontext's registers: pc, then x1..x31.
const SC: u64 = 128 + 176;

/// The saved registers' offsets.
const FRAME: SignalFrame = SignalFrame {
    pc: SC,
    lr: Some(SC + 8),
    sp: SC + 2 * 8,
    fp: SC + 8 * 8,
    words: Some((SC, 32)),
};

/// The trampolines recognised.
pub(super) const TRAMPOLINES: &[Trampoline] = &[Trampoline {
    code: &RT_SIGRETURN,
    frame: FRAME,
}];
