//! The RISC-V walk: the shared DWARF CFI walk ([`crate::cfi_walk`]) with RISC-V's DWARF
//! registers (the x registers by number).

use super::Riscv64;
use crate::outcome::Outcome;
use crate::regs::Registers;
use crate::space::AddressSpace;

/// DWARF register numbers: ra (x1), sp (x2), s0 (x8, the frame pointer).
pub(super) const RA: u16 = 1;
pub(super) const SP: u16 = 2;
pub(super) const S0: u16 = 8;

/// Unwinds one sample.
pub(super) fn unwind(
    space: &mut AddressSpace<Riscv64>,
    regs: Registers,
    stack: &[u8],
    out: &mut Vec<u64>,
) -> Outcome {
    crate::cfi_walk::unwind(space, regs, stack, out)
}
