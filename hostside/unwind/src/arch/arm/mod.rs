//! 32-bit ARM unwinding from the ARM exception-handling ABI tables (`.ARM.exidx` and
//! `.ARM.extab`), which every ARMv7 compiler emits and strip keeps (they are allocated).
//!
//! Written here because no maintained crate unwinds EHABI: framehop covers x86_64 and
//! AArch64 only, gimli reads DWARF CFI but not EHABI, and the ARM-capable unwinders in other
//! profilers are not published as libraries. The format is small: a sorted table of
//! (function start, unwind entry) pairs and a byte-coded list of "pop these registers /
//! adjust the stack pointer" instructions (ARM IHI 0038, section 10). Code no table covers
//! (libgcc's helpers, linked statically) is unwound by prologue analysis.

use crossprof_format::Arch;

use super::{Architecture, Trampoline};
use crate::outcome::Outcome;
use crate::regs::Registers;
use crate::space::AddressSpace;

mod exidx;
mod functions;
mod program;
mod prologue;
mod signal;
mod unwinder;

pub(crate) use exidx::{Entry, ExidxTable};
pub(crate) use functions::Functions;
pub(crate) use program::{execute, Frame, Step};
pub(crate) use prologue::analyze;

/// 32-bit ARM (ARMv7, EABI hard- or soft-float; ARM and Thumb-2 code).
#[derive(Debug, Clone, Copy)]
pub struct Arm;

impl Architecture for Arm {
    const ARCH: Arch = Arch::Arm;
    const DWARF_SP: u16 = 13;
    const DWARF_FP: u16 = 11;
    const DWARF_RA: u16 = 14;
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
