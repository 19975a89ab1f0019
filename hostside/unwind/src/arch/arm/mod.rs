//! 32-bit ARM unwinding from the ARM exception-handling ABI tables (`.ARM.exidx` and
//! `.ARM.extab`), which every ARMv7 compiler emits and strip keeps (they are allocated).
//!
//! Written here because no maintained crate unwinds EHABI: framehop covers x86_64 and
//! AArch64 only, gimli reads DWARF CFI but not EHABI, and the ARM-capable unwinders in other
//! profilers are not published as libraries. The format is small: a sorted table of
//! (function start, unwind entry) pairs and a byte-coded list of "pop these registers /
//! adjust the stack pointer" instructions (ARM IHI 0038, section 10). Code no table covers
//! (libgcc's helpers, linked statically) is unwound by prologue analysis.

use std::sync::Arc;

use crossprof_format::Arch;

use super::{Architecture, Trampoline};
use crate::bytes::Section;
use crate::outcome::Outcome;
use crate::regs::Registers;
use crate::sections::Found;
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

/// What a 32-bit ARM module holds for its unwinder besides the CFI every architecture reads:
/// its EHABI table and its functions (for prologue analysis where no table applies).
#[derive(Debug, Clone, Default)]
pub struct Tables {
    /// `.ARM.exidx` and `.ARM.extab` as one lookup table.
    pub(crate) exidx: Option<Arc<ExidxTable>>,
    /// The function symbols of the image and its debug file.
    pub(crate) functions: Functions,
}

impl Tables {
    /// The tables of an ARM `image` (with its `debug` file, whose symbols name more
    /// functions); `section` finds one of the image's sections by name.
    pub(crate) fn of(
        image: &object::File<'_>,
        debug: Option<&object::File<'_>>,
        section: impl Fn(&str) -> Found,
    ) -> Tables {
        use object::Object;
        let exidx = section(".ARM.exidx").map(|(r, d)| {
            let (extab_svma, extab) = match section(".ARM.extab") {
                Some((er, ed)) => (er.start, ed),
                None => (0, Section::from(Vec::new())),
            };
            Arc::new(ExidxTable::new(
                r.start,
                &d,
                extab_svma,
                &extab,
                !image.is_little_endian(),
            ))
        });
        let mut files = vec![image];
        files.extend(debug);
        Tables {
            exidx,
            functions: Functions::from_files(&files),
        }
    }
}

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
