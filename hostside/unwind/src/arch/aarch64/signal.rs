//! AArch64 signal frames: a handler returns into the vDSO's `__kernel_rt_sigreturn` (glibc)
//! or musl's `__restore_rt`, recognised by their instructions; the interrupted registers come
//! from the `rt_sigframe` the kernel pushed.

use crate::arch::{SignalFrame, Trampoline};

/// `__kernel_rt_sigreturn` and musl's `__restore_rt`: `mov x8, #139; svc #0`.
const RT_SIGRETURN: [u8; 8] = [0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4];

/// Start of the sigcontext's registers: the stack pointer is at the rt_sigframe, 128 bytes of
/// siginfo, then the ucontext whose 16-aligned sigcontext starts at +176: fault_address,
/// then x0..x30, sp, pc.
const SC_X0: u64 = 128 + 176 + 8;

/// The saved registers' offsets.
const FRAME: SignalFrame = SignalFrame {
    fp: SC_X0 + 29 * 8,
    lr: Some(SC_X0 + 30 * 8),
    sp: SC_X0 + 31 * 8,
    pc: SC_X0 + 32 * 8,
    words: None,
};

/// The trampolines recognised.
pub(super) const TRAMPOLINES: &[Trampoline] = &[Trampoline {
    code: &RT_SIGRETURN,
    frame: FRAME,
}];
