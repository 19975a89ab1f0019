//! 32-bit x86 (i686): DWARF CFI evaluated by gimli (framehop does not cover it).

use crossprof_format::Arch;

use super::{Architecture, Trampoline};
use crate::outcome::Outcome;
use crate::regs::Registers;
use crate::space::AddressSpace;

mod signal;
mod unwinder;

/// 32-bit x86 (i386 System V ABI).
#[derive(Debug, Clone, Copy)]
pub struct X86;

impl Architecture for X86 {
    const ARCH: Arch = Arch::X86;
    const DWARF_SP: u16 = unwinder::ESP;
    const DWARF_FP: u16 = unwinder::EBP;
    const DWARF_RA: u16 = unwinder::EIP;
    const RA_IN_REGISTER: bool = false;
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
