//! framehop's x86_64 registers, as the shared framehop walk ([`crate::framehop_walk`]) reads
//! and moves them.

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};

use super::X86_64;
use crate::cfi::CallerRegs;
use crate::framehop_walk::{Data, FramehopArch};
use crate::outcome::CutShort;
use crate::regs::Registers;
use crate::stack::StackCopy;

/// DWARF register numbers: rbp, rsp, and the return-address column.
pub(super) const BP: u16 = 6;
pub(super) const SP: u16 = 7;
pub(super) const RA: u16 = 16;

impl FramehopArch for X86_64 {
    type Regs = UnwindRegsX86_64;
    type Cache = CacheX86_64;
    type Fh = UnwinderX86_64<Data>;

    fn parts(state: &mut Self::State) -> (&Self::Fh, &mut Self::Cache) {
        (&state.unwinder, &mut state.cache)
    }

    const FP_REG: u16 = BP;
    const LINK_REGISTER: bool = false;

    fn initial(regs: &Registers, _max_avma: u64) -> Self::Regs {
        UnwindRegsX86_64::new(regs.pc, regs.sp, regs.fp)
    }

    fn sp(r: &Self::Regs) -> u64 {
        r.sp()
    }

    fn dwarf(r: &Self::Regs, n: u16, pc: u64) -> Option<u64> {
        match n {
            BP => Some(r.bp()),
            SP => Some(r.sp()),
            RA => Some(pc),
            _ => None,
        }
    }

    fn strip(_: &Self::Regs, ra: u64) -> u64 {
        ra
    }

    fn apply(r: &mut Self::Regs, caller: &CallerRegs) {
        r.set_sp(caller.cfa);
        if let Some(&(_, bp)) = caller.restored.iter().find(|(n, _)| *n == BP) {
            r.set_bp(bp);
        }
    }

    fn plt_return(r: &mut Self::Regs, copy: &StackCopy<'_>) -> Result<Option<u64>, CutShort> {
        let sp = r.sp();
        let ra = copy.u64(sp).ok_or(CutShort::StackCopyEnded)?;
        r.set_sp(sp.wrapping_add(8));
        Ok(Some(ra))
    }

    fn restore(r: &mut Self::Regs, pc: u64, sp: u64, fp: u64, _lr: u64) {
        r.set_ip(pc);
        r.set_sp(sp);
        r.set_bp(fp);
    }
}
