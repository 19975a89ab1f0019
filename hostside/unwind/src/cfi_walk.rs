//! The stack walk over DWARF CFI with gimli, for i686 and RISC-V (framehop covers neither):
//! `.eh_frame` first, `.debug_frame` as the fallback.

use crossprof_format::Arch;

use crate::outcome::{CutShort, Outcome};
use crate::regs::Registers;
use crate::space::{AddressSpace, MAX_FRAMES, START_CODE_BYTES};
use crate::stack::StackCopy;

impl AddressSpace {
    /// DWARF CFI unwinding with gimli for i686 (DWARF registers: esp 4, ebp 5, eip 8) and
    /// RISC-V (ra 1, sp 2, s0 8).
    pub(crate) fn unwind_cfi(&self, regs: Registers, stack: &[u8], out: &mut Vec<u64>) -> Outcome {
        let (sp_reg, fp_reg, ra_reg, word) = match self.arch {
            Arch::X86 => (4u16, 5u16, None, 4usize),
            _ => (2, 8, Some(1u16), 8),
        };
        let copy = StackCopy::new(regs.sp, stack, self.big_endian);
        let mut read = |addr: u64| -> Option<u64> {
            if word == 4 {
                copy.u32(addr).map(u64::from)
            } else {
                copy.u64(addr)
            }
        };
        let mut r = [None::<u64>; 64];
        r[sp_reg as usize] = Some(regs.sp);
        r[fp_reg as usize] = Some(regs.fp);
        if let Some(ra) = ra_reg {
            r[ra as usize] = Some(regs.lr);
        }
        let mut pc = regs.pc;
        let start = out.len();
        out.push(pc);
        let mut first = true;
        loop {
            if out.len() - start >= MAX_FRAMES {
                return Outcome::CutShort(CutShort::TooDeep);
            }
            let lookup = if first { pc } else { pc.wrapping_sub(1) };
            first = false;
            let Some((bias, sections)) = self.module_at(lookup) else {
                return Outcome::CutShort(self.unknown_code(lookup));
            };
            let svma = lookup.wrapping_sub(bias);
            let table = [&sections.cfi_eh, &sections.cfi]
                .into_iter()
                .flatten()
                .find(|t| t.covers(svma));
            // The entry point's start code is the outermost frame; its CFI, if any, often
            // describes no caller (or a bogus one).
            let at_entry = sections
                .entry
                .is_some_and(|e| svma >= e && svma < e.saturating_add(START_CODE_BYTES));
            if at_entry {
                return Outcome::Complete;
            }
            let Some(table) = table else {
                return Outcome::CutShort(CutShort::NoUnwindInfo);
            };
            let now = r;
            copy.reset();
            let Some(caller) =
                table.step(svma, &|n| now.get(n as usize).copied().flatten(), &mut read)
            else {
                return Outcome::CutShort(if copy.ran_off() {
                    CutShort::StackCopyEnded
                } else {
                    CutShort::BadFrame
                });
            };
            for (reg, v) in caller.restored {
                if let Some(slot) = r.get_mut(reg as usize) {
                    *slot = Some(v);
                }
            }
            let old_sp = r[sp_reg as usize];
            r[sp_reg as usize] = Some(caller.cfa);
            let Some(ra) = caller.ra.filter(|&a| a != 0) else {
                return Outcome::Complete;
            };
            if ra == pc && old_sp == Some(caller.cfa) {
                return Outcome::CutShort(CutShort::BadFrame);
            }
            if !self.is_mapped(ra.wrapping_sub(1)) {
                return Outcome::CutShort(CutShort::OutsideMappings);
            }
            pc = ra;
            out.push(ra);
        }
    }
}
