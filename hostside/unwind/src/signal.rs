//! Signal frames. A signal handler returns into a `sigreturn` trampoline whose unwind info
//! (where it exists at all) is a DWARF expression framehop does not evaluate, so the unwind
//! would stop at the handler. We recognise the trampoline by its two instructions, as perf's
//! and libunwind's unwinders do, and restore the interrupted registers from the `ucontext`
//! the kernel saved on the stack.

use crossprof_format::Arch;

/// x86_64 `__restore_rt` (glibc and musl): `mov $15, %rax; syscall`.
const X86_64_TRAMPOLINE: [u8; 9] = [0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05];
/// AArch64 `__kernel_rt_sigreturn` (vDSO) and musl's `__restore_rt`: `mov x8, #139; svc #0`.
const AARCH64_TRAMPOLINE: [u8; 8] = [0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4];

/// Where the saved registers sit, relative to the stack pointer at the trampoline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedRegs {
    /// Offset of the saved program counter.
    pub pc: u64,
    /// Offset of the saved stack pointer.
    pub sp: u64,
    /// Offset of the saved frame pointer.
    pub fp: u64,
    /// Offset of the saved link register, if the architecture has one.
    pub lr: Option<u64>,
}

/// The trampoline's instruction bytes for `arch`, if known.
pub fn trampoline(arch: Arch) -> Option<&'static [u8]> {
    match arch {
        Arch::X86_64 => Some(&X86_64_TRAMPOLINE),
        Arch::Aarch64 => Some(&AARCH64_TRAMPOLINE),
        _ => None,
    }
}

/// Offsets of the interrupted registers from the trampoline's stack pointer.
pub fn saved_regs(arch: Arch) -> Option<SavedRegs> {
    match arch {
        // sp points at the ucontext (the return address was popped): uc_flags, uc_link and a
        // 24-byte stack_t, then the sigcontext: r8..r15, rdi, rsi, rbp (10), .., rsp (15),
        // rip (16).
        Arch::X86_64 => Some(SavedRegs {
            fp: 40 + 10 * 8,
            sp: 40 + 15 * 8,
            pc: 40 + 16 * 8,
            lr: None,
        }),
        // sp points at the rt_sigframe: 128 bytes of siginfo, then the ucontext whose
        // 16-aligned sigcontext starts at +176: fault_address, x0..x30, sp, pc.
        Arch::Aarch64 => {
            let sc = 128 + 176 + 8;
            Some(SavedRegs {
                fp: sc + 29 * 8,
                lr: Some(sc + 30 * 8),
                sp: sc + 31 * 8,
                pc: sc + 32 * 8,
            })
        }
        _ => None,
    }
}
