//! 64-bit RISC-V: DWARF CFI evaluated by gimli (framehop does not cover it); signal frames
//! through the vDSO's `__vdso_rt_sigreturn`.

use crossprof_format::Arch;

use super::{Architecture, Trampoline};
use crate::outcome::Outcome;
use crate::regs::Registers;
use crate::space::AddressSpace;

mod signal;
mod unwinder;

/// 64-bit RISC-V (LP64D ABI).
#[derive(Debug, Clone, Copy)]
pub struct Riscv64;

impl Architecture for Riscv64 {
    const ARCH: Arch = Arch::Riscv64;
    const DWARF_SP: u16 = unwinder::SP;
    const DWARF_FP: u16 = unwinder::S0;
    const DWARF_RA: u16 = unwinder::RA;
    const RA_IN_REGISTER: bool = true;
    const SIGNAL_TRAMPOLINES: &'static [Trampoline] = signal::TRAMPOLINES;

    type State = ();

    fn unwind(
        space: &mut AddressSpace<Self>,
        regs: Registers,
        stack: &[u8],
        out: &mut Vec<u64>,
    ) -> Outcome {
        unwinder::unwind(space, regs, stack, out)
    }
}
