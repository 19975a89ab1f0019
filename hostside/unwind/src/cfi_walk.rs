//! The stack walk over DWARF CFI with gimli, for i686 and RISC-V (framehop covers neither):
//! `.eh_frame` first, `.debug_frame` as the fallback. Generic over the architecture: its
//! word size, DWARF register numbers and signal frame are all it needs to know.

use crate::arch::{Architecture, SignalFrame};
use crate::outcome::{CutShort, Outcome};
use crate::regs::Registers;
use crate::space::{AddressSpace, MAX_FRAMES, START_CODE_BYTES};
use crate::stack::StackCopy;

/// Registers by DWARF number (the walk tracks the first 64).
type Regs = [Option<u64>; 64];

/// Restores the registers a signal frame saved at stack pointer `sp`; the interrupted pc.
fn signal_return(
    frame: &SignalFrame,
    sp: u64,
    r: &mut Regs,
    read: &mut dyn FnMut(u64) -> Option<u64>,
    word: u64,
    ra_reg: Option<u16>,
    (sp_reg, fp_reg): (u16, u16),
) -> Result<u64, CutShort> {
    let mut at = |off: u64| {
        sp.checked_add(off)
            .and_then(&mut *read)
            .ok_or(CutShort::StackCopyEnded)
    };
    if let Some((start, n)) = frame.words {
        for reg in 1..usize::from(n).min(r.len()) {
            r[reg] = Some(at(start + reg as u64 * word)?);
        }
    }
    let pc = at(frame.pc)?;
    r[usize::from(sp_reg)] = Some(at(frame.sp)?);
    r[usize::from(fp_reg)] = Some(at(frame.fp)?);
    if let (Some(ra), Some(off)) = (ra_reg, frame.lr) {
        r[usize::from(ra)] = Some(at(off)?);
    }
    Ok(pc)
}

/// DWARF CFI unwinding with gimli over one sample.
pub(crate) fn unwind<A: Architecture>(
    space: &mut AddressSpace<A>,
    regs: Registers,
    stack: &[u8],
    out: &mut Vec<u64>,
) -> Outcome {
    let (sp_reg, fp_reg) = (A::DWARF_SP, A::DWARF_FP);
    let ra_reg = A::RA_IN_REGISTER.then_some(A::DWARF_RA);
    let word = u64::from(A::WORD_SIZE);
    let copy = StackCopy::new(regs.sp, stack, space.big_endian);
    let mut read = |addr: u64| -> Option<u64> {
        if word == 4 {
            copy.u32(addr).map(u64::from)
        } else {
            copy.u64(addr)
        }
    };
    let mut r: Regs = [None; 64];
    r[usize::from(sp_reg)] = Some(regs.sp);
    r[usize::from(fp_reg)] = Some(regs.fp);
    if let Some(ra) = ra_reg {
        r[usize::from(ra)] = Some(regs.lr);
    }
    let mut pc = regs.pc;
    let start = out.len();
    out.push(pc);
    space.frame_sps.push(regs.sp);
    let mut first = true;
    loop {
        if out.len() - start >= MAX_FRAMES {
            return Outcome::CutShort(CutShort::TooDeep);
        }
        if let Some(frame) = (!first).then(|| space.trampoline_at(pc)).flatten() {
            let sp = r[usize::from(sp_reg)].unwrap_or(0);
            copy.reset();
            match signal_return(
                &frame,
                sp,
                &mut r,
                &mut read,
                word,
                ra_reg,
                (sp_reg, fp_reg),
            ) {
                Ok(interrupted) => {
                    // The interrupted code is unwound like a sampled leaf, not a caller.
                    pc = interrupted;
                    out.push(pc);
                    space.frame_sps.push(r[usize::from(sp_reg)].unwrap_or(0));
                    first = true;
                    continue;
                }
                Err(why) => return Outcome::CutShort(why),
            }
        }
        let lookup = if first { pc } else { pc.wrapping_sub(1) };
        first = false;
        let Some((bias, sections)) = space.module_at(lookup) else {
            return Outcome::CutShort(space.unknown_code(lookup));
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
        let Some(caller) = table.step(svma, &|n| now.get(n as usize).copied().flatten(), &mut read)
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
        let old_sp = r[usize::from(sp_reg)];
        r[usize::from(sp_reg)] = Some(caller.cfa);
        let Some(ra) = caller.ra.filter(|&a| a != 0) else {
            return Outcome::Complete;
        };
        if ra == pc && old_sp == Some(caller.cfa) {
            return Outcome::CutShort(CutShort::BadFrame);
        }
        if !space.is_mapped(ra.wrapping_sub(1)) {
            return Outcome::CutShort(CutShort::OutsideMappings);
        }
        pc = ra;
        out.push(ra);
        space.frame_sps.push(caller.cfa);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::arch::Riscv64;
    use crate::cfi::{CfiTable, Layout};
    use crate::outcome::Outcome;
    use crate::regs::Registers;
    use crate::sections::UnwindSections;
    use crate::space::AddressSpace;

    const BIAS: u64 = 0x4000_0000;

    /// A `.debug_frame` (version 1, 64-bit addresses) with one CIE, "CFA = sp, the return
    /// address in ra" (a leaf's rule), and one FDE over 0x1000..0x1100.
    fn leaf_debug_frame() -> Vec<u8> {
        let mut cie = vec![0xff, 0xff, 0xff, 0xff, 1, 0, 1, 0x78, 1, 0x0c, 2, 0];
        cie.resize(20, 0);
        let mut d = (cie.len() as u32).to_le_bytes().to_vec();
        d.extend(cie);
        let mut fde = 0u32.to_le_bytes().to_vec();
        fde.extend(0x1000u64.to_le_bytes());
        fde.extend(0x100u64.to_le_bytes());
        d.extend((fde.len() as u32).to_le_bytes());
        d.extend(fde);
        d
    }

    /// A signal handler (sampled at 0x1010) returns into the vDSO's `__vdso_rt_sigreturn`
    /// at 0x1800; the kernel's `rt_sigframe` at its stack pointer holds the interrupted pc
    /// (0x1020), sp and ra (0x1f04, in the start code at the entry point 0x1f00).
    #[test]
    fn a_signal_frame_is_stepped_through_into_the_interrupted_code() {
        let mut code = vec![0u8; 0x1000];
        code[0x800..0x808].copy_from_slice(&[0x93, 0x08, 0xb0, 0x08, 0x73, 0x00, 0x00, 0x00]);
        let layout = Layout {
            big_endian: false,
            address_size: 8,
            ra_in_register: true,
        };
        let s = UnwindSections {
            cfi: Some(Arc::new(CfiTable::debug_frame(
                leaf_debug_frame().into(),
                &layout,
            ))),
            entry: Some(0x1f00),
            text_segment_svma: Some(0x1000..0x2000),
            text_segment: Some(code.into()),
            ..Default::default()
        };
        let mut space = AddressSpace::<Riscv64>::new(false);
        space.add_module("m", (BIAS + 0x1000)..(BIAS + 0x2000), BIAS, &Arc::new(s));
        let sp = 0x7fff_0000u64;
        // pc, then x1..x31 at +304; the interrupted sp points past the frame.
        let mut stack = vec![0u8; 304 + 32 * 8];
        let mut put = |slot: usize, v: u64| {
            stack[304 + 8 * slot..312 + 8 * slot].copy_from_slice(&v.to_le_bytes())
        };
        put(0, BIAS + 0x1020);
        put(1, BIAS + 0x1f04);
        put(2, sp + 0x1000);
        put(8, 0x5555);
        let regs = Registers {
            pc: BIAS + 0x1010,
            sp,
            fp: 0,
            lr: BIAS + 0x1800,
            arm: [0; 16],
        };
        let mut out = Vec::new();
        assert_eq!(space.unwind(regs, &stack, &mut out), Outcome::Complete);
        assert_eq!(
            out,
            [BIAS + 0x1010, BIAS + 0x1800, BIAS + 0x1020, BIAS + 0x1f04]
        );
        // The same frame cut off by the end of the copy says so.
        out.clear();
        assert_eq!(
            space.unwind(regs, &stack[..320], &mut out),
            Outcome::CutShort(crate::outcome::CutShort::StackCopyEnded)
        );
        assert_eq!(out, [BIAS + 0x1010, BIAS + 0x1800]);
    }
}
