//! The 32-bit ARM stack walk: DWARF CFI where an FDE covers the address (exact ranges), else
//! the EHABI tables.

use super::{execute, Entry, Frame, Step};
use crate::outcome::{CutShort, Outcome};
use crate::regs::Registers;
use crate::space::{AddressSpace, MAX_FRAMES};
use crate::stack::StackCopy;

impl AddressSpace {
    /// EHABI unwinding over the stack copy, 32-bit words.
    pub(crate) fn unwind_arm(&self, regs: Registers, stack: &[u8], out: &mut Vec<u64>) -> Outcome {
        let copy = StackCopy::new(regs.sp & 0xffff_ffff, stack, self.big_endian);
        let mut read = |addr: u32| copy.u32(u64::from(addr));
        let mut f = Frame { r: regs.arm };
        f.r[15] = regs.pc as u32;
        f.r[13] = regs.sp as u32;
        let start = out.len();
        out.push(u64::from(f.r[15] & !1));
        let mut first = true;
        loop {
            if out.len() - start >= MAX_FRAMES {
                return Outcome::CutShort(CutShort::TooDeep);
            }
            let pc = u64::from(f.r[15] & !1);
            // A return address is looked up inside the call, not at the next instruction.
            let lookup = if first { pc } else { pc.wrapping_sub(1) };
            first = false;
            let Some((bias, sections)) = self.module_at(lookup) else {
                return Outcome::CutShort(self.unknown_code(lookup));
            };
            let svma = lookup.wrapping_sub(bias) & 0xffff_ffff;
            let (old_pc, old_sp) = (f.r[15] & !1, f.r[13]);
            copy.reset();
            let failed = |copy: &StackCopy<'_>| {
                Outcome::CutShort(if copy.ran_off() {
                    CutShort::StackCopyEnded
                } else {
                    CutShort::BadFrame
                })
            };
            if let Some(cfi) = sections.cfi.as_ref().filter(|c| c.covers(svma)) {
                let regs_now = f.r;
                let mut read64 = |a: u64| read(a as u32).map(u64::from);
                let Some(caller) = cfi.step(
                    svma,
                    &|n| regs_now.get(n as usize).map(|&v| u64::from(v)),
                    &mut read64,
                ) else {
                    return failed(&copy);
                };
                for (reg, v) in caller.restored {
                    if let Some(r) = f.r.get_mut(reg as usize) {
                        *r = v as u32;
                    }
                }
                let Some(ra) = caller.ra else {
                    return Outcome::Complete;
                };
                f.r[15] = ra as u32;
                f.r[13] = caller.cfa as u32;
            } else {
                let entry = sections.arm_exidx.as_ref().and_then(|t| t.lookup(svma));
                match entry {
                    None => return Outcome::CutShort(CutShort::NoUnwindInfo),
                    Some(Entry::CantUnwind) => return Outcome::Complete,
                    Some(Entry::Instructions(bytes)) => match execute(&bytes, &mut f, &mut read) {
                        Step::Caller => {}
                        Step::Refuse => return Outcome::Complete,
                        Step::Failed => return failed(&copy),
                    },
                }
            }
            let new_pc = f.r[15] & !1;
            if new_pc == 0 {
                return Outcome::Complete;
            }
            if new_pc == old_pc && f.r[13] == old_sp {
                return Outcome::CutShort(CutShort::BadFrame);
            }
            if !self.is_mapped(u64::from(new_pc).wrapping_sub(1)) {
                return Outcome::CutShort(CutShort::OutsideMappings);
            }
            out.push(u64::from(new_pc));
        }
    }
}
