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
//! ```no_run
//! use std::sync::Arc;
//! use crossprof_unwind::arch::Aarch64;
//! use crossprof_unwind::{AddressSpace, Registers, UnwindSections};
//! # fn f(image: &[u8], mask: u64, values: &[u64], stack: &[u8]) -> Option<()> {
//! let sections = Arc::new(UnwindSections::from_elf(image, None).ok()?);
//! let mut space = AddressSpace::<Aarch64>::new(false);
//! space.add_module("/usr/bin/app", 0x40_0000..0x48_0000, 0x40_0000, &sections);
//! let mut frames = Vec::new();
//! let outcome = space.unwind(Registers::from_sample::<Aarch64>(mask, values)?, stack, &mut frames);
//! # Some(()) }
//! ```
//!
//! Architectures, one directory each under [`arch`], behind the [`Architecture`] trait; the
//! caller picks one type per recording (from its header) and everything below is
//! monomorphized. x86_64 and AArch64 go through `framehop` (a well-kept unwinder), checked
//! and completed by gimli; 32-bit ARM through the EHABI tables (`.ARM.exidx`/`.ARM.extab`,
//! see [`arch::arm`] for why it is hand-written), with `.debug_frame` (read by gimli) first
//! where it covers the address: gcc emits no EHABI entries for C code by default; i686 and
//! RISC-V through DWARF CFI read and evaluated with gimli (`.eh_frame`, then
//! `.debug_frame`), since framehop does not cover them. Go code (x86_64, AArch64) goes
//! through Go's own function table (`.gopclntab`, see `go_walk`), which every Go binary keeps
//! when stripped. Signal frames are stepped through on
//! x86_64, AArch64, ARM and RISC-V.
#![deny(missing_docs)]

pub mod arch;
mod bytes;
mod cfi;
mod cfi_walk;
mod framehop_walk;
mod go_walk;
mod outcome;
mod regs;
mod scan;
mod sections;
mod space;
mod stack;

pub use arch::{Architecture, UnwindState};
pub use bytes::SharedFile;
pub use outcome::{CutShort, Outcome};
pub use regs::Registers;
pub use sections::{Error, UnwindSections};
pub use space::{AddressSpace, MAX_FRAMES};
