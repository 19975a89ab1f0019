//! The 32-bit ARM stack walk: DWARF CFI where an FDE covers the address (exact ranges), else
//! the EHABI tables; a sampled PLT stub returns to the link register, and the entry point's
//! start code is the outermost frame.

use super::{execute, Entry, Frame, Step};
use crate::outcome::{CutShort, Outcome};
use crate::regs::Registers;
use crate::space::{AddressSpace, MAX_FRAMES, START_CODE_BYTES};
use crate::stack::StackCopy;

/// Whether stated address `svma` lies in the entry point's start code (`_start`), the
/// outermost frame. A Thumb entry point has its low bit set.
fn at_start_code(entry: Option<u64>, svma: u64) -> bool {
    entry.is_some_and(|e| {
        let e = e & !1;
        svma >= e && svma < e.saturating_add(START_CODE_BYTES)
    })
}

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
            let (leaf, lookup) = (first, if first { pc } else { pc.wrapping_sub(1) });
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
            if leaf && sections.plt.iter().any(|r| r.contains(&svma)) {
                // A sampled PLT stub (ARM code that only computes the target and jumps) has
                // touched neither sp nor lr: the caller is a plain return. No table covers
                // the stubs.
                f.r[15] = f.r[14];
            } else if let Some(cfi) = sections.cfi.as_ref().filter(|c| c.covers(svma)) {
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
            } else if at_start_code(sections.entry, svma) {
                return Outcome::Complete;
            } else {
                // "Cannot unwind" is no end of the stack: the linker writes it for every stretch
                // of code without an index entry of its own (C built without unwind tables,
                // assembly), and such a stretch runs on to the next entry. Only the entry
                // point's start code, above, is the outermost frame.
                let entry = sections.arm_exidx.as_ref().and_then(|t| t.lookup(svma));
                match entry {
                    None | Some(Entry::CantUnwind) => {
                        return Outcome::CutShort(CutShort::NoUnwindInfo)
                    }
                    Some(Entry::Instructions(bytes)) => match execute(&bytes, &mut f, &mut read) {
                        Step::Caller => {}
                        Step::Refuse => return Outcome::CutShort(CutShort::NoUnwindInfo),
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crossprof_format::Arch;

    use crate::arm::ExidxTable;
    use crate::outcome::{CutShort, Outcome};
    use crate::regs::Registers;
    use crate::sections::UnwindSections;
    use crate::space::AddressSpace;

    const BIAS: u64 = 0x40_0000;

    /// A Thumb module laid out like armhf's sqlite3 (bfd, -mthumb, no -funwind-tables): PLT
    /// stubs at 0x1000, the Thumb entry point `_start` at 0x2000 (e_entry 0x2001), whose
    /// `.cantunwind` index entry runs on over every function after it, and one function at
    /// 0x2400 with real unwind instructions (`pop {r4, lr}`).
    fn space() -> AddressSpace {
        let mut exidx = Vec::new();
        for (i, (start, data)) in [(0x2000u32, 1u32), (0x2400, 0x8084_01b0)]
            .into_iter()
            .enumerate()
        {
            let at = 0x5000 + 8 * i as u32;
            exidx.extend((start.wrapping_sub(at) & 0x7fff_ffff).to_le_bytes());
            exidx.extend(data.to_le_bytes());
        }
        let s = UnwindSections {
            arm_exidx: Some(Arc::new(ExidxTable::new(0x5000, &exidx, 0, &[], false))),
            plt: vec![0x1000..0x1100],
            entry: Some(0x2001),
            ..Default::default()
        };
        let mut space = AddressSpace::new(Arch::Arm, false);
        space.add_module("m", (BIAS + 0x1000)..(BIAS + 0x4000), BIAS, &Arc::new(s));
        space
    }

    fn regs(pc: u64, lr: u64, sp: u64) -> Registers {
        let mut arm = [0u32; 16];
        arm[13] = sp as u32;
        arm[14] = lr as u32;
        arm[15] = pc as u32;
        Registers {
            pc,
            sp,
            fp: 0,
            lr,
            arm,
        }
    }

    #[test]
    fn a_sampled_plt_stub_returns_to_the_link_register() {
        let mut out = Vec::new();
        // Called from `_start` (Thumb: the return address has its low bit set).
        let r = regs(BIAS + 0x1010, BIAS + 0x2015, 0x7000);
        assert_eq!(space().unwind(r, &[], &mut out), Outcome::Complete);
        assert_eq!(out, [BIAS + 0x1010, BIAS + 0x2014]);
    }

    #[test]
    fn cantunwind_past_the_start_code_is_no_end_of_the_stack() {
        let mut out = Vec::new();
        // Inside _start itself: the outermost frame, though its Thumb entry is odd.
        let r = regs(BIAS + 0x2000, 0, 0x7000);
        assert_eq!(space().unwind(r, &[], &mut out), Outcome::Complete);
        // A function under _start's index entry, far past the start code: no unwind info.
        out.clear();
        let r = regs(BIAS + 0x2300, BIAS + 0x2015, 0x7000);
        assert_eq!(
            space().unwind(r, &[], &mut out),
            Outcome::CutShort(CutShort::NoUnwindInfo)
        );
        assert_eq!(out, [BIAS + 0x2300]);
        // A function with instructions unwinds into _start: r4 and lr come off the stack.
        out.clear();
        let stack: Vec<u8> = [7u32, (BIAS + 0x2011) as u32]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let r = regs(BIAS + 0x2410, 0, 0x7000);
        assert_eq!(space().unwind(r, &stack, &mut out), Outcome::Complete);
        assert_eq!(out, [BIAS + 0x2410, BIAS + 0x2010]);
    }
}
