//! 64-bit x86: unwound by framehop from `.eh_frame`, checked and completed by gimli (see
//! the `space` module).

use crossprof_format::Arch;
use framehop::x86_64::{CacheX86_64, UnwinderX86_64};

use super::{Architecture, Trampoline};
use crate::framehop_walk::{self, Data, FramehopState};
use crate::outcome::Outcome;
use crate::regs::Registers;
use crate::space::AddressSpace;

mod signal;
mod unwinder;

/// 64-bit x86 (System V ABI).
#[derive(Debug, Clone, Copy)]
pub struct X86_64;

impl Architecture for X86_64 {
    const ARCH: Arch = Arch::X86_64;
    const DWARF_SP: u16 = unwinder::SP;
    const DWARF_FP: u16 = unwinder::BP;
    const DWARF_RA: u16 = unwinder::RA;
    const RA_IN_REGISTER: bool = false;
    const SIGNAL_TRAMPOLINES: &'static [Trampoline] = signal::TRAMPOLINES;

    type State = FramehopState<UnwinderX86_64<Data>, CacheX86_64>;

    fn unwind(
        space: &mut AddressSpace<Self>,
        regs: Registers,
        stack: &[u8],
        out: &mut Vec<u64>,
    ) -> Outcome {
        framehop_walk::unwind(space, regs, stack, out)
    }
}
