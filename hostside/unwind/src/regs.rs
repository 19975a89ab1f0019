//! The registers of a sample, by name, from perf's per-architecture numbering (defined once,
//! in the format crate, for `rec` and this crate both).

use crossprof_format::{Arch, PerfRegs};

use crate::arch::Architecture;

/// The registers unwinding starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Registers {
    /// Program counter.
    pub pc: u64,
    /// Stack pointer (the address of the first byte of the stack copy).
    pub sp: u64,
    /// Frame pointer (rbp, x29, r11/r7, s0).
    pub fp: u64,
    /// Link register (x30, r14, ra); 0 where the architecture has none.
    pub lr: u64,
    /// All sixteen core registers on 32-bit ARM (EHABI may restore sp from any of them).
    pub arm: [u32; 16],
}

impl Registers {
    /// Picks pc, sp, fp and lr out of a sample's registers (`regs`, one value per set bit of
    /// `mask`) by `A`'s perf numbering; `None` when one that unwinding needs was not
    /// captured.
    pub fn from_sample<A: Architecture>(mask: u64, regs: &[u64]) -> Option<Registers> {
        let n = A::PERF_REGS;
        let mut arm = [0u32; 16];
        if A::ARCH == Arch::Arm {
            for (i, r) in arm.iter_mut().enumerate() {
                *r = PerfRegs::get(mask, regs, i as u32).unwrap_or(0) as u32;
            }
        }
        Some(Registers {
            pc: PerfRegs::get(mask, regs, n.pc)?,
            sp: PerfRegs::get(mask, regs, n.sp)?,
            fp: PerfRegs::get(mask, regs, n.fp).unwrap_or(0),
            lr: n.lr.and_then(|l| PerfRegs::get(mask, regs, l)).unwrap_or(0),
            arm,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::{Aarch64, X86_64};

    #[test]
    fn registers_follow_the_mask_order() {
        // x86_64 with bp, sp, ip captured, in mask order.
        let r = Registers::from_sample::<X86_64>(0b1_1100_0000, &[0x10, 0x20, 0x30]).unwrap();
        assert_eq!((r.fp, r.sp, r.pc), (0x10, 0x20, 0x30));
        // aarch64 fp, lr, sp, pc.
        let mask = (1 << 29) | (1 << 30) | (1 << 31) | (1 << 32);
        let r = Registers::from_sample::<Aarch64>(mask, &[1, 2, 3, 4]).unwrap();
        assert_eq!((r.fp, r.lr, r.sp, r.pc), (1, 2, 3, 4));
        // Missing pc, or fewer values than bits: no registers, no panic.
        assert_eq!(Registers::from_sample::<X86_64>(0b1100_0000, &[1, 2]), None);
        assert_eq!(Registers::from_sample::<X86_64>(0b1_1100_0000, &[1]), None);
    }
}
