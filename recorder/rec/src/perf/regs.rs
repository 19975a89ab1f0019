//! Which user registers a stack-copy sample captures: the numbering and the mask live in the
//! format crate ([`crossprof_format::PerfRegs`]), shared with the host's unwinder that reads
//! them back.

use crossprof_format::{Arch, PerfRegs};

/// `sample_regs_user` for the architecture rec was built for (0, no registers, on one the
/// format does not know).
pub const USER_MASK: u64 = match Arch::NATIVE {
    Some(arch) => PerfRegs::of(arch).user_mask,
    None => 0,
};
