//! 64-bit ARM: unwound by framehop from `.eh_frame`, checked and completed by gimli (see
//! the `space` module); return addresses lose their pointer-authentication bits.

use crossprof_format::Arch;
use framehop::aarch64::{CacheAarch64, UnwinderAarch64};

use super::{Architecture, Trampoline};
use crate::framehop_walk::{self, Data, FramehopState};
use crate::outcome::Outcome;
use crate::regs::Registers;
use crate::space::AddressSpace;

mod signal;
mod unwinder;

/// 64-bit ARM (AAPCS64).
#[derive(Debug, Clone, Copy)]
pub struct Aarch64;

impl Architecture for Aarch64 {
    const ARCH: Arch = Arch::Aarch64;
    const DWARF_SP: u16 = unwinder::SP;
    const DWARF_FP: u16 = unwinder::FP;
    const DWARF_RA: u16 = unwinder::LR;
    const RA_IN_REGISTER: bool = true;
    const SIGNAL_TRAMPOLINES: &'static [Trampoline] = signal::TRAMPOLINES;

    type State = FramehopState<UnwinderAarch64<Data>, CacheAarch64>;

    fn unwind(
        space: &mut AddressSpace<Self>,
        regs: Registers,
        stack: &[u8],
        out: &mut Vec<u64>,
    ) -> Outcome {
        framehop_walk::unwind(space, regs, stack, out)
    }
}
