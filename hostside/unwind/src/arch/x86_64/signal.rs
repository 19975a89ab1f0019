//! x86_64 signal frames: a handler returns into the C library's `__restore_rt`, whose unwind
//! info (where there is any) is a DWARF expression framehop does not evaluate. It is
//! recognised by its instructions, as perf's and libunwind's unwinders do, and the
//! interrupted registers come from the `ucontext` the kernel pushed.

use crate::arch::{SignalFrame, Trampoline};

/// `__restore_rt` (glibc and musl): `mov $15, %rax; syscall`.
const RESTORE_RT: [u8; 9] = [0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05];

/// At the trampoline the stack pointer is at the ucontext (the return address was popped):
/// uc_flags, uc_link and a 24-byte stack_t, then the sigcontext: r8..r15, rdi, rsi, rbp
/// (10), .., rsp (15), rip (16).
/// The saved registers' offsets.
const FRAME: SignalFrame = SignalFrame {
    fp: 40 + 10 * 8,
    sp: 40 + 15 * 8,
    pc: 40 + 16 * 8,
    lr: None,
    words: None,
};

/// The trampolines recognised.
pub(super) const TRAMPOLINES: &[Trampoline] = &[Trampoline {
    code: &RESTORE_RT,
    frame: FRAME,
}];
