//! 32-bit ARM unwinding from the ARM exception-handling ABI tables (`.ARM.exidx` and
//! `.ARM.extab`), which every ARMv7 compiler emits and strip keeps (they are allocated).
//!
//! Written here because no maintained crate unwinds EHABI: framehop covers x86_64 and
//! AArch64 only, gimli reads DWARF CFI but not EHABI, and the ARM-capable unwinders in other
//! profilers are not published as libraries. The format is small: a sorted table of
//! (function start, unwind entry) pairs and a byte-coded list of "pop these registers /
//! adjust the stack pointer" instructions (ARM IHI 0038, section 10). Code no table covers
//! (libgcc's helpers, linked statically) is unwound by prologue analysis.

mod exidx;
mod functions;
mod program;
mod prologue;
mod walk;

pub use exidx::{Entry, ExidxTable};
pub use functions::Functions;
pub use program::{execute, Frame, Step};
pub use prologue::analyze;
