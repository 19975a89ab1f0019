//! One directory per architecture, with the same files in each, behind one trait: what the
//! rest of the crate may know about an architecture is exactly [`Architecture`]'s constants
//! and methods. Adding an architecture means adding a directory and a line to each `match`
//! over [`crossprof_format::Arch`] (the compiler lists them: none has a default arm).
//!
//! In each directory: `mod.rs` implements [`Architecture`] (names, register numbers, word
//! size), `signal.rs` describes the sigreturn trampolines and the signal frame the kernel
//! pushes, and `unwinder.rs` is the stack walk (or the glue to a shared one: framehop's for
//! x86_64 and AArch64, gimli's DWARF CFI for i686 and RISC-V). 32-bit ARM adds its EHABI
//! table reader and prologue analysis next to them.

use std::ops::Range;
use std::sync::Arc;

use crossprof_format::{Arch, PerfRegs};

use crate::outcome::Outcome;
use crate::regs::Registers;
use crate::sections::UnwindSections;
use crate::space::AddressSpace;

pub mod aarch64;
pub mod arm;
pub mod riscv64;
pub mod x86;
pub mod x86_64;

pub use aarch64::Aarch64;
pub use arm::Arm;
pub use riscv64::Riscv64;
pub use x86::X86;
pub use x86_64::X86_64;

/// Where the kernel saved the interrupted registers in a signal frame, as byte offsets from
/// the stack pointer at the sigreturn trampoline (the handler's caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalFrame {
    /// Offset of the saved program counter.
    pub pc: u64,
    /// Offset of the saved stack pointer.
    pub sp: u64,
    /// Offset of the saved frame pointer.
    pub fp: u64,
    /// Offset of the saved link register, where the architecture has one.
    pub lr: Option<u64>,
    /// Where DWARF registers `0..n` sit in consecutive words, when the frame saves them all
    /// (ARM r0..r15, RISC-V x1..x31: unwind rules of the interrupted code may read any of
    /// them). RISC-V's slot 0 holds the pc; its x0 is always zero and no rule reads it.
    pub words: Option<(u64, u16)>,
}

/// A sigreturn trampoline (what a signal handler returns into) and the signal frame the
/// kernel pushed for a handler that returns there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trampoline {
    /// Its instruction bytes, as stored in the module file.
    pub code: &'static [u8],
    /// Where the interrupted registers are.
    pub frame: SignalFrame,
}

/// One target architecture: the numbers and layouts unwinding depends on, and its stack
/// walk. Implemented by the unit structs [`X86_64`], [`Aarch64`], [`Arm`], [`X86`] and
/// [`Riscv64`]; [`AddressSpace`] is generic over it, so the walk is monomorphized and the
/// architecture is chosen once per recording, never per sample.
pub trait Architecture: Sized + 'static {
    /// The recording header's architecture.
    const ARCH: Arch;
    /// Bytes in a pointer, a return address and a saved register on the stack.
    const WORD_SIZE: u8 = Self::ARCH.pointer_size();
    /// The perf register numbers a sample's registers are read by (shared with `rec`).
    const PERF_REGS: PerfRegs = PerfRegs::of(Self::ARCH);
    /// DWARF register number of the stack pointer.
    const DWARF_SP: u16;
    /// DWARF register number of the frame pointer.
    const DWARF_FP: u16;
    /// DWARF number of the return-address column: a real register where the return
    /// address lives in one (AArch64 x30, ARM lr, RISC-V ra), a pseudo-register on x86.
    const DWARF_RA: u16;
    /// Whether the return address lives in a register at a call (not on the stack), so
    /// that a CFI row without a rule for it means "still there".
    const RA_IN_REGISTER: bool;
    /// The C libraries' and the kernel's sigreturn trampolines, each with its signal
    /// frame: a handler's frame is followed by the interrupted code's, with the registers
    /// the kernel saved. Empty where signal frames are not stepped through yet (i686).
    const SIGNAL_TRAMPOLINES: &'static [Trampoline];

    /// The per-address-space unwinder state (framehop's unwinder and rule cache on x86_64
    /// and AArch64; nothing for the walks that look modules up in the address space).
    type State: UnwindState;

    /// Unwinds one sample (see [`AddressSpace::unwind`], which checks the sampled address
    /// first).
    fn unwind(
        space: &mut AddressSpace<Self>,
        regs: Registers,
        stack: &[u8],
        out: &mut Vec<u64>,
    ) -> Outcome;
}

/// What an address space keeps for its architecture's walk, told about each module as it is
/// mapped. One implementation per kind of walk (framehop's, and the stateless DWARF/EHABI
/// walks), not per architecture: architectures sharing a walk share its state.
pub trait UnwindState {
    /// A fresh state for an empty address space.
    fn new() -> Self;

    /// Tells the state about a module mapped at `avma` with load `bias`.
    fn add_module(&mut self, name: &str, avma: Range<u64>, bias: u64, s: &Arc<UnwindSections>);
}

/// The walks that find modules through the address space itself keep nothing.
impl UnwindState for () {
    fn new() {}

    fn add_module(&mut self, _: &str, _: Range<u64>, _: u64, _: &Arc<UnwindSections>) {}
}
