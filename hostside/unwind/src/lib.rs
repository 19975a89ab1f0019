//! crossprof-unwind: offline unwinding of stack-copy samples (`rec --call-graph dwarf`).
//!
//! A board records, with each sample, the user registers and the used top of the user stack;
//! the unwind tables are not read there. On the host this crate takes those bytes plus the
//! unwind sections of each mapped module (from the debug sysroot: `.eh_frame`,
//! `.eh_frame_hdr`, `.debug_frame`) and produces the return addresses, innermost first, the
//! same shape as a frame-pointer chain, so the rest of hostside does not care how a stack was
//! captured.
//!
//! Use [`UnwindSections::from_elf`] once per module file, [`AddressSpace`] once per process
//! image (add each module at its load bias), then [`AddressSpace::unwind`] per sample. The
//! per-address-space unwinder caches unwind rules, so repeated samples at the same addresses
//! are cheap.
//!
//! Architectures: x86_64 and AArch64 through `framehop` (a well-kept unwinder that also falls
//! back to frame pointers where a module has no unwind info); 32-bit ARM through the EHABI
//! tables (`.ARM.exidx`/`.ARM.extab`, see the `arm` module for why it is hand-written), with
//! `.debug_frame` (read by gimli) first where it covers the address: gcc emits no EHABI
//! entries for C code by default; i686 and RISC-V through DWARF CFI read and evaluated with
//! gimli (`.eh_frame`, then `.debug_frame`), since framehop does not cover them.
#![deny(missing_docs)]

mod arm;
mod cfi;
mod cfi_walk;
mod outcome;
mod regs;
mod sections;
mod signal;
mod space;
mod stack;
mod walk;

pub use outcome::{CutShort, Outcome};
pub use regs::Registers;
pub use sections::{Error, UnwindSections};
pub use space::{AddressSpace, MAX_FRAMES};
