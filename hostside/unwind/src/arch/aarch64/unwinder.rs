//! framehop's AArch64 registers, as the shared framehop walk ([`crate::framehop_walk`])
//! reads and moves them.

use framehop::aarch64::{CacheAarch64, PtrAuthMask, UnwindRegsAarch64, UnwinderAarch64};

use super::Aarch64;
use crate::cfi::CallerRegs;
use crate::framehop_walk::{Data, FramehopArch};
use crate::outcome::CutShort;
use crate::regs::Registers;
use crate::stack::StackCopy;

/// DWARF register numbers: x29, x30, sp.
pub(super) const FP: u16 = 29;
pub(super) const LR: u16 = 30;
pub(super) const SP: u16 = 31;

impl FramehopArch for Aarch64 {
    type Regs = UnwindRegsAarch64;
    type Cache = CacheAarch64;
    type Fh = UnwinderAarch64<Data>;

    fn parts(state: &mut Self::State) -> (&Self::Fh, &mut Self::Cache) {
        (&state.unwinder, &mut state.cache)
    }

    const FP_REG: u16 = FP;
    const LINK_REGISTER: bool = true;

    fn initial(regs: &Registers, max_avma: u64) -> Self::Regs {
        UnwindRegsAarch64::new_with_ptr_auth_mask(
            PtrAuthMask::from_max_known_address(max_avma),
            regs.lr,
            regs.sp,
            regs.fp,
        )
    }

    fn sp(r: &Self::Regs) -> u64 {
        r.sp()
    }

    fn dwarf(r: &Self::Regs, n: u16, _pc: u64) -> Option<u64> {
        match n {
            FP => Some(r.fp()),
            LR => Some(r.lr()),
            SP => Some(r.sp()),
            _ => None,
        }
    }

    fn strip(r: &Self::Regs, ra: u64) -> u64 {
        r.lr_mask().strip_ptr_auth(ra)
    }

    fn apply(r: &mut Self::Regs, caller: &CallerRegs) {
        r.set_sp(caller.cfa);
        for &(n, v) in &caller.restored {
            match n {
                FP => r.set_fp(v),
                LR => r.set_lr(v),
                _ => {}
            }
        }
    }

    /// A PLT stub has not touched the link register: it still holds the return address.
    fn plt_return(r: &mut Self::Regs, _copy: &StackCopy<'_>) -> Result<Option<u64>, CutShort> {
        Ok(Some(r.lr()))
    }

    fn restore(r: &mut Self::Regs, _pc: u64, sp: u64, fp: u64, lr: u64) {
        r.set_sp(sp);
        r.set_fp(fp);
        r.set_lr(lr);
    }
}
