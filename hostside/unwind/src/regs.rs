//! The registers of a sample, by name, from perf's per-architecture numbering.

use crossprof_format::Arch;

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

/// perf register numbers (`arch/*/include/uapi/asm/perf_regs.h`) of pc, sp, fp, lr.
fn numbers(arch: Arch) -> Option<(u32, u32, u32, Option<u32>)> {
    Some(match arch {
        Arch::X86_64 | Arch::X86 => (8, 7, 6, None),
        Arch::Aarch64 => (32, 31, 29, Some(30)),
        // Thumb-2 code uses r7 as its frame pointer, ARM code r11; EHABI unwinding uses all
        // registers, this picks the ARM-state one.
        Arch::Arm => (15, 13, 11, Some(14)),
        Arch::Riscv64 => (0, 2, 8, Some(1)),
    })
}

/// The value of perf register `n` in a sample's `regs` (one value per set bit of `mask`).
pub fn get(mask: u64, regs: &[u64], n: u32) -> Option<u64> {
    if n >= 64 || mask & (1 << n) == 0 {
        return None;
    }
    let index = (mask & ((1u64 << n) - 1)).count_ones() as usize;
    regs.get(index).copied()
}

impl Registers {
    /// Picks pc, sp, fp and lr out of a sample's registers; `None` when one that unwinding
    /// needs was not captured.
    pub fn from_sample(arch: Arch, mask: u64, regs: &[u64]) -> Option<Registers> {
        let (pc, sp, fp, lr) = numbers(arch)?;
        let mut arm = [0u32; 16];
        if arch == Arch::Arm {
            for (n, r) in arm.iter_mut().enumerate() {
                *r = get(mask, regs, n as u32).unwrap_or(0) as u32;
            }
        }
        Some(Registers {
            pc: get(mask, regs, pc)?,
            sp: get(mask, regs, sp)?,
            fp: get(mask, regs, fp).unwrap_or(0),
            lr: lr.and_then(|n| get(mask, regs, n)).unwrap_or(0),
            arm,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_follow_the_mask_order() {
        // x86_64 with bp, sp, ip captured, in mask order.
        let r = Registers::from_sample(Arch::X86_64, 0b1_1100_0000, &[0x10, 0x20, 0x30]).unwrap();
        assert_eq!((r.fp, r.sp, r.pc), (0x10, 0x20, 0x30));
        // aarch64 fp, lr, sp, pc.
        let mask = (1 << 29) | (1 << 30) | (1 << 31) | (1 << 32);
        let r = Registers::from_sample(Arch::Aarch64, mask, &[1, 2, 3, 4]).unwrap();
        assert_eq!((r.fp, r.lr, r.sp, r.pc), (1, 2, 3, 4));
        // Missing pc, or fewer values than bits: no registers, no panic.
        assert_eq!(
            Registers::from_sample(Arch::X86_64, 0b1100_0000, &[1, 2]),
            None
        );
        assert_eq!(
            Registers::from_sample(Arch::X86_64, 0b1_1100_0000, &[1]),
            None
        );
        assert_eq!(get(u64::MAX, &[], 63), None);
    }
}
