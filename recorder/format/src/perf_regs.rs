//! The kernel's user-register numbering for stack-copy samples (`perf_regs.h` of each
//! architecture), written once here: `rec` asks the kernel for these registers
//! (`sample_regs_user`) and the host's unwinder reads them back out of a sample by the same
//! numbers. The recording stores the mask next to the values, so both sides must agree on
//! what each bit means; one definition keeps them from drifting apart.

use crate::Arch;

/// Which perf registers unwinding needs on one architecture, by the kernel's numbers
/// (`arch/*/include/uapi/asm/perf_regs.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerfRegs {
    /// Program counter.
    pub pc: u32,
    /// Stack pointer: the address of the first byte of the stack copy.
    pub sp: u32,
    /// Frame pointer (rbp/ebp, x29, r11 in ARM state, s0).
    pub fp: u32,
    /// Link register (x30, r14, ra); `None` where the return address lives on the stack.
    pub lr: Option<u32>,
    /// `sample_regs_user`: the registers `rec` asks for. On 32-bit ARM all sixteen core
    /// registers, since EHABI unwinding may restore the stack pointer from any of them.
    pub user_mask: u64,
}

/// x86_64 and i686 share the numbering: BP=6, SP=7, IP=8.
const X86: PerfRegs = PerfRegs {
    pc: 8,
    sp: 7,
    fp: 6,
    lr: None,
    user_mask: (1 << 6) | (1 << 7) | (1 << 8),
};

/// AArch64: X29 (frame pointer)=29, LR=30, SP=31, PC=32.
const AARCH64: PerfRegs = PerfRegs {
    pc: 32,
    sp: 31,
    fp: 29,
    lr: Some(30),
    user_mask: (1 << 29) | (1 << 30) | (1 << 31) | (1 << 32),
};

/// 32-bit ARM: R0..R10, FP=11, IP=12, SP=13, LR=14, PC=15. Thumb-2 code uses r7 as its frame
/// pointer, ARM code r11; EHABI unwinding uses all registers, this names the ARM-state one.
const ARM: PerfRegs = PerfRegs {
    pc: 15,
    sp: 13,
    fp: 11,
    lr: Some(14),
    user_mask: 0xffff,
};

/// RISC-V 64: PC=0, RA=1, SP=2, S0 (frame pointer)=8.
const RISCV64: PerfRegs = PerfRegs {
    pc: 0,
    sp: 2,
    fp: 8,
    lr: Some(1),
    user_mask: (1 << 0) | (1 << 1) | (1 << 2) | (1 << 8),
};

impl PerfRegs {
    /// The numbering of `arch`. Usable in constants (`rec` builds its mask at compile time).
    pub const fn of(arch: Arch) -> PerfRegs {
        match arch {
            Arch::X86_64 | Arch::X86 => X86,
            Arch::Aarch64 => AARCH64,
            Arch::Arm => ARM,
            Arch::Riscv64 => RISCV64,
        }
    }

    /// The value of perf register `n` in a sample's `values` (one value per set bit of
    /// `mask`, in bit order); `None` when the bit is clear or the values run short.
    pub fn get(mask: u64, values: &[u64], n: u32) -> Option<u64> {
        if n >= 64 || mask & (1 << n) == 0 {
            return None;
        }
        let index = (mask & ((1u64 << n) - 1)).count_ones() as usize;
        values.get(index).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_register_is_in_its_mask() {
        for arch in Arch::ALL {
            let r = PerfRegs::of(arch);
            for n in [Some(r.pc), Some(r.sp), Some(r.fp), r.lr]
                .into_iter()
                .flatten()
            {
                assert_ne!(r.user_mask & (1 << n), 0, "{arch:?} register {n}");
            }
        }
    }

    #[test]
    fn values_follow_the_mask_order() {
        // x86_64 with bp, sp, ip captured, in mask order.
        let (m, v) = (0b1_1100_0000, [0x10, 0x20, 0x30]);
        assert_eq!(PerfRegs::get(m, &v, 6), Some(0x10));
        assert_eq!(PerfRegs::get(m, &v, 8), Some(0x30));
        assert_eq!(PerfRegs::get(m, &v, 5), None);
        assert_eq!(PerfRegs::get(m, &v[..1], 8), None);
        assert_eq!(PerfRegs::get(u64::MAX, &[], 63), None);
        assert_eq!(PerfRegs::get(u64::MAX, &[1], 64), None);
    }
}
