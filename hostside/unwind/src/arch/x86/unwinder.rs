//! The i686 walk: the shared DWARF CFI walk ([`crate::cfi_walk`]) with i386's DWARF
//! registers.

use super::X86;
use crate::outcome::Outcome;
use crate::regs::Registers;
use crate::space::AddressSpace;

/// DWARF register numbers: esp, ebp, and eip (the return-address column).
pub(super) const ESP: u16 = 4;
pub(super) const EBP: u16 = 5;
pub(super) const EIP: u16 = 8;

/// Unwinds one sample.
pub(super) fn unwind(
    space: &mut AddressSpace<X86>,
    regs: Registers,
    stack: &[u8],
    out: &mut Vec<u64>,
) -> Outcome {
    crate::cfi_walk::unwind(space, regs, stack, out)
}
