//! The 32-bit ARM stack walk: DWARF CFI where an FDE covers the address (exact ranges), else
//! the EHABI tables; a sampled PLT stub returns to the link register, and the entry point's
//! start code is the outermost frame; code no table covers is unwound by prologue analysis.

use std::sync::atomic::Ordering;

use super::{analyze, execute, Arm, Entry, Frame, Step};
use crate::arch::SignalFrame;
use crate::outcome::{CutShort, Outcome};
use crate::regs::Registers;
use crate::sections::UnwindSections;
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

/// Unwinds the frame of the function holding stated address `svma` by analysing its
/// instructions up to `limit` (see [`super::prologue`]): `None` when its function is unknown
/// or the analysis gives up, `Some(false)` when a saved register lies outside the stack copy.
fn prologue_step(
    s: &UnwindSections,
    svma: u64,
    limit: u64,
    leaf: bool,
    f: &mut Frame,
    read: &mut dyn FnMut(u32) -> Option<u32>,
) -> Option<bool> {
    let (start, thumb) = s.arm.functions.at(svma)?;
    let (code_svma, code) = (s.text_segment_svma.as_ref()?, s.text_segment.as_ref()?);
    let p = analyze(code, code_svma.start, start, thumb, limit)?;
    let lr_saved = p.saved.iter().any(|&(reg, _)| reg == 14);
    // A caller has made a call since it started, which overwrote lr: it must have saved it.
    if !leaf && !lr_saved {
        return None;
    }
    let sp = f.r[13];
    for &(reg, off) in &p.saved {
        let Some(v) = read(sp.wrapping_add(off)) else {
            return Some(false);
        };
        f.r[usize::from(reg) & 15] = v;
    }
    f.r[15] = f.r[14];
    f.r[13] = sp.wrapping_add(p.frame);
    Some(true)
}

/// Restores all sixteen core registers from the signal frame at the stack pointer.
fn signal_return(
    frame: &SignalFrame,
    f: &mut Frame,
    read: &mut dyn FnMut(u32) -> Option<u32>,
) -> Result<(), CutShort> {
    let sp = f.r[13];
    // Every ARM signal frame saves all sixteen core registers in a row.
    let (start, n) = frame.words.ok_or(CutShort::BadFrame)?;
    let mut saved = [0u32; 16];
    for (i, r) in saved.iter_mut().enumerate().take(usize::from(n)) {
        let at = u32::try_from(start + 4 * i as u64)
            .ok()
            .and_then(|off| sp.checked_add(off))
            .ok_or(CutShort::BadFrame)?;
        *r = read(at).ok_or(CutShort::StackCopyEnded)?;
    }
    f.r = saved;
    Ok(())
}

/// EHABI unwinding over the stack copy, 32-bit words.
pub(super) fn unwind(
    space: &mut AddressSpace<Arm>,
    regs: Registers,
    stack: &[u8],
    out: &mut Vec<u64>,
) -> Outcome {
    let copy = StackCopy::new(regs.sp & 0xffff_ffff, stack, space.big_endian);
    let mut read = |addr: u32| copy.u32(u64::from(addr));
    let mut f = Frame { r: regs.arm };
    f.r[15] = regs.pc as u32;
    f.r[13] = regs.sp as u32;
    let start = out.len();
    out.push(u64::from(f.r[15] & !1));
    space.frame_sps.push(u64::from(f.r[13]));
    let mut first = true;
    loop {
        if out.len() - start >= MAX_FRAMES {
            return Outcome::CutShort(CutShort::TooDeep);
        }
        let pc = u64::from(f.r[15] & !1);
        // A handler returns into a sigreturn trampoline: the caller is the interrupted
        // code, with every register the kernel saved.
        if let Some(frame) = (!first).then(|| space.trampoline_at(pc)).flatten() {
            copy.reset();
            if let Err(why) = signal_return(&frame, &mut f, &mut read) {
                return Outcome::CutShort(why);
            }
            let interrupted = u64::from(f.r[15] & !1);
            if !space.is_mapped(interrupted) {
                return Outcome::CutShort(CutShort::OutsideMappings);
            }
            out.push(interrupted);
            space.frame_sps.push(u64::from(f.r[13]));
            // The interrupted code is unwound like a sampled leaf, not a caller.
            first = true;
            continue;
        }
        // A return address is looked up inside the call, not at the next instruction.
        let (leaf, lookup) = (first, if first { pc } else { pc.wrapping_sub(1) });
        first = false;
        let Some((bias, sections)) = space.module_at(lookup) else {
            return Outcome::CutShort(space.unknown_code(lookup));
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
            // Such code is unwound by prologue analysis where its function is known.
            let entry = sections.arm.exidx.as_ref().and_then(|t| t.lookup(svma));
            let step = match entry {
                None | Some(Entry::CantUnwind) => Step::Refuse,
                Some(Entry::Instructions(bytes)) => execute(&bytes, &mut f, &mut read),
            };
            match step {
                Step::Caller => {}
                Step::Failed => return failed(&copy),
                Step::Refuse => {
                    let limit = pc.wrapping_sub(bias) & 0xffff_ffff;
                    match prologue_step(sections, svma, limit, leaf, &mut f, &mut read) {
                        None => return Outcome::CutShort(CutShort::NoUnwindInfo),
                        Some(false) => return failed(&copy),
                        Some(true) => {
                            space.prologue_frames.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
        }
        let new_pc = f.r[15] & !1;
        if new_pc == 0 {
            return Outcome::Complete;
        }
        if new_pc == old_pc && f.r[13] == old_sp {
            return Outcome::CutShort(CutShort::BadFrame);
        }
        if !space.is_mapped(u64::from(new_pc).wrapping_sub(1)) {
            return Outcome::CutShort(CutShort::OutsideMappings);
        }
        out.push(u64::from(new_pc));
        space.frame_sps.push(u64::from(f.r[13]));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::arch::arm::{Arm, ExidxTable, Functions};
    use crate::outcome::{CutShort, Outcome};
    use crate::regs::Registers;
    use crate::sections::UnwindSections;
    use crate::space::AddressSpace;

    const BIAS: u64 = 0x40_0000;

    /// A Thumb module laid out like armhf's sqlite3 (bfd, -mthumb, no -funwind-tables): PLT
    /// stubs at 0x1000, the Thumb entry point `_start` at 0x2000 (e_entry 0x2001), whose
    /// `.cantunwind` index entry runs on over every function after it, and one function at
    /// 0x2400 with real unwind instructions (`pop {r4, lr}`).
    fn space() -> AddressSpace<Arm> {
        let mut exidx = Vec::new();
        for (i, (start, data)) in [(0x2000u32, 1u32), (0x2400, 0x8084_01b0)]
            .into_iter()
            .enumerate()
        {
            let at = 0x5000 + 8 * i as u32;
            exidx.extend((start.wrapping_sub(at) & 0x7fff_ffff).to_le_bytes());
            exidx.extend(data.to_le_bytes());
        }
        // libgcc's __aeabi_uidivmod at 0x2200, without any table: `cmp r1, #0; beq.n;
        // stmdb sp!, {r0, r1, lr}; bl __udivsi3; ...`.
        let mut code = vec![0u8; 0x3000];
        let helper: [u16; 6] = [0x2900, 0xd0f8, 0xe92d, 0x4003, 0xf7ff, 0xfecc];
        for (i, h) in helper.iter().enumerate() {
            code[0x1200 + 2 * i..0x1202 + 2 * i].copy_from_slice(&h.to_le_bytes());
        }
        // Sigreturn trampolines: musl's ARM-state `__restore_rt` at 0x1800, glibc's Thumb-2
        // `__default_sa_restorer` (no SA_SIGINFO) at 0x1900.
        code[0x800..0x808].copy_from_slice(&[0xad, 0x70, 0xa0, 0xe3, 0x00, 0x00, 0x00, 0xef]);
        code[0x900..0x906].copy_from_slice(&[0x4f, 0xf0, 0x77, 0x07, 0x00, 0xdf]);
        let s = UnwindSections {
            arm: crate::arch::arm::Tables {
                exidx: Some(Arc::new(ExidxTable::new(0x5000, &exidx, 0, &[], false))),
                functions: Functions::from_ranges(vec![(0x2200, 0x2300, true)]),
            },
            plt: std::iter::once(0x1000..0x1100).collect(),
            entry: Some(0x2001),
            text_segment_svma: Some(0x1000..0x4000),
            text_segment: Some(code.into()),
            ..Default::default()
        };
        let mut space = AddressSpace::<Arm>::new(false);
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

    /// A statically linked libgcc helper has no table at all, not even its own index entry
    /// (it lies under _start's "cannot unwind"): its prologue tells where lr went.
    #[test]
    fn code_without_tables_is_unwound_by_its_prologue() {
        let mut space = space();
        // Sampled in the helper just after its call to __udivsi3 returned.
        let stack: Vec<u8> = [1u32, 2, (BIAS + 0x2015) as u32]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let mut out = Vec::new();
        // Past the push, lr (the helper's caller, in _start) is at sp+8.
        let r = regs(BIAS + 0x220c, BIAS + 0x220d, 0x7000);
        assert_eq!(space.unwind(r, &stack, &mut out), Outcome::Complete);
        assert_eq!(out, [BIAS + 0x220c, BIAS + 0x2014]);
        assert_eq!(space.take_prologue_frames(), 1);
        // Before the push, lr still holds the return address.
        out.clear();
        let r = regs(BIAS + 0x2202, BIAS + 0x2015, 0x7000);
        assert_eq!(space.unwind(r, &[], &mut out), Outcome::Complete);
        assert_eq!(out, [BIAS + 0x2202, BIAS + 0x2014]);
        // A caller without a saved lr cannot be: cut short, not guessed.
        out.clear();
        let r = regs(BIAS + 0x2410, 0, 0x7000);
        let stack: Vec<u8> = [7u32, (BIAS + 0x2203) as u32]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        assert_eq!(
            space.unwind(r, &stack, &mut out),
            Outcome::CutShort(CutShort::NoUnwindInfo)
        );
        assert_eq!(out, [BIAS + 0x2410, BIAS + 0x2202]);
    }

    /// A handler (here a sampled PLT stub) returns into a sigreturn trampoline: the kernel's
    /// frame at the stack pointer gives the interrupted function (0x2410, whose EHABI entry
    /// pops r4 and lr) all sixteen registers, and its caller is found from there. An
    /// `rt_sigframe` keeps r0 at +160, a `sigframe` at +32.
    #[test]
    fn signal_frames_are_stepped_through_into_the_interrupted_code() {
        for (trampoline, lr, r0_at) in [(0x1800u64, 0x1800u64, 160usize), (0x1900, 0x1901, 32)] {
            let sp = 0x7000u64;
            let mut r = [0u32; 16];
            r[4] = 0x44;
            r[13] = (sp as usize + r0_at + 64) as u32;
            r[14] = 0x1234;
            r[15] = (BIAS + 0x2410) as u32;
            let mut words = vec![0u32; r0_at / 4];
            words.extend(r);
            // The interrupted function's frame: r4, then lr into _start.
            words.extend([7, (BIAS + 0x2011) as u32]);
            let stack: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let mut out = Vec::new();
            let regs = regs(BIAS + 0x1010, BIAS + lr, sp);
            assert_eq!(space().unwind(regs, &stack, &mut out), Outcome::Complete);
            assert_eq!(
                out,
                [
                    BIAS + 0x1010,
                    BIAS + trampoline,
                    BIAS + 0x2410,
                    BIAS + 0x2010
                ]
            );
            // A copy that ends inside the signal frame cuts the stack short, and says why.
            out.clear();
            let cut = &stack[..r0_at + 8];
            assert_eq!(
                space().unwind(regs, cut, &mut out),
                Outcome::CutShort(CutShort::StackCopyEnded)
            );
            assert_eq!(out, [BIAS + 0x1010, BIAS + trampoline]);
        }
    }
}
