//! Which user registers a stack-copy sample captures, per architecture, in the kernel's
//! `perf_regs.h` numbering. Only what unwinding needs: the program counter, stack pointer,
//! frame pointer and link register (all sixteen core registers on 32-bit ARM, where EHABI
//! unwinding may restore the stack pointer from any of them).

/// `sample_regs_user` for the architecture rec was built for.
pub const USER_MASK: u64 = mask();

const fn mask() -> u64 {
    if cfg!(target_arch = "x86_64") || cfg!(target_arch = "x86") {
        // BP=6, SP=7, IP=8.
        (1 << 6) | (1 << 7) | (1 << 8)
    } else if cfg!(target_arch = "aarch64") {
        // X29 (frame pointer)=29, LR=30, SP=31, PC=32.
        (1 << 29) | (1 << 30) | (1 << 31) | (1 << 32)
    } else if cfg!(target_arch = "arm") {
        // R0..R10, FP=11, IP=12, SP=13, LR=14, PC=15.
        0xffff
    } else if cfg!(target_arch = "riscv64") {
        // PC=0, RA=1, SP=2, S0 (frame pointer)=8.
        (1 << 0) | (1 << 1) | (1 << 2) | (1 << 8)
    } else {
        0
    }
}
