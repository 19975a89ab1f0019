//! One process image's modules and the unwinder over them.

use std::ops::Range;
use std::sync::Arc;

use crossprof_format::Arch;
use framehop::aarch64::{CacheAarch64, PtrAuthMask, UnwindRegsAarch64, UnwinderAarch64};
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};

use crate::regs::Registers;
use crate::sections::UnwindSections;
use crate::signal;

/// Unwinding stops after this many frames: deep recursion is still shown this deep, and a
/// corrupt stack cannot make a sample cost unbounded time or memory.
pub const MAX_FRAMES: usize = 1024;

/// How far past the ELF entry point an address still counts as the start code (`_start` is a
/// few dozen instructions on every ABI).
const START_CODE_BYTES: u64 = 128;

/// How an unwind ended. Reports count the outcomes, so a weak stack is never silent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The outermost frame was reached (the unwind tables said the stack ends there).
    Complete,
    /// Stopped early: the stack copy ended, a frame could not be unwound, or [`MAX_FRAMES`].
    Truncated,
    /// No unwinder for this architecture yet: only the sampled instruction pointer is known.
    Unsupported,
}

type Data = Arc<[u8]>;

enum Inner {
    X86_64(UnwinderX86_64<Data>, Box<CacheX86_64>),
    Aarch64(UnwinderAarch64<Data>, Box<CacheAarch64>),
    /// EHABI: modules are looked up in `AddressSpace::code`.
    Arm,
    /// DWARF CFI through gimli (i686, RISC-V): modules are looked up in `AddressSpace::code`.
    Cfi,
}

/// The modules of one process image (one exec of one process) and a rule cache.
pub struct AddressSpace {
    inner: Inner,
    arch: Arch,
    big_endian: bool,
    max_avma: u64,
    /// Each module's range, bias and code, to recognise signal trampolines.
    code: Vec<(Range<u64>, u64, Arc<UnwindSections>)>,
}

fn section_info(s: &UnwindSections) -> ExplicitModuleSectionInfo<Data> {
    ExplicitModuleSectionInfo {
        // ELF unwind tables hold absolute stated addresses.
        base_svma: 0,
        text_svma: s.text_svma.clone(),
        text: s.text.clone(),
        eh_frame_svma: s.eh_frame_svma.clone(),
        eh_frame: s.eh_frame.clone(),
        eh_frame_hdr_svma: s.eh_frame_hdr_svma.clone(),
        eh_frame_hdr: s.eh_frame_hdr.clone(),
        debug_frame: s.debug_frame.clone(),
        text_segment_svma: s.text_segment_svma.clone(),
        text_segment: s.text_segment.clone(),
        ..Default::default()
    }
}

impl AddressSpace {
    /// An empty address space for a recording of `arch`.
    pub fn new(arch: Arch, big_endian: bool) -> AddressSpace {
        let inner = match arch {
            Arch::X86_64 => Inner::X86_64(UnwinderX86_64::new(), Box::new(CacheX86_64::new())),
            Arch::Aarch64 => Inner::Aarch64(UnwinderAarch64::new(), Box::new(CacheAarch64::new())),
            Arch::Arm => Inner::Arm,
            Arch::X86 | Arch::Riscv64 => Inner::Cfi,
        };
        AddressSpace {
            inner,
            arch,
            big_endian,
            max_avma: 0,
            code: Vec::new(),
        }
    }

    /// Adds a module mapped at `avma` (its executable range on the board) with load `bias`.
    pub fn add_module(&mut self, name: &str, avma: Range<u64>, bias: u64, s: &Arc<UnwindSections>) {
        self.max_avma = self.max_avma.max(avma.end);
        self.code.push((avma.clone(), bias, s.clone()));
        match &mut self.inner {
            Inner::X86_64(u, _) => {
                u.add_module(Module::new(name.to_string(), avma, bias, section_info(s)))
            }
            Inner::Aarch64(u, _) => {
                u.add_module(Module::new(name.to_string(), avma, bias, section_info(s)))
            }
            Inner::Arm | Inner::Cfi => {}
        }
    }

    /// Whether the code at `avma` is this architecture's sigreturn trampoline.
    fn is_trampoline(&self, avma: u64) -> bool {
        let Some(pattern) = signal::trampoline(self.arch) else {
            return false;
        };
        let Some((bias, s)) = self.module_at(avma) else {
            return false;
        };
        let (Some(svma), Some(data)) = (s.text_segment_svma.as_ref(), s.text_segment.as_ref())
        else {
            return false;
        };
        let at = avma.wrapping_sub(bias);
        if at < svma.start {
            return false;
        }
        let off = (at - svma.start) as usize;
        data.get(off..off.saturating_add(pattern.len())) == Some(pattern)
    }

    /// The module mapped at `avma`: its load bias and unwind sections.
    fn module_at(&self, avma: u64) -> Option<(u64, &UnwindSections)> {
        self.code
            .iter()
            .find(|(range, _, _)| range.contains(&avma))
            .map(|(_, bias, s)| (*bias, &**s))
    }

    /// Unwinds one sample: appends the instruction pointer and then each return address to
    /// `out`, innermost first. `stack` holds the bytes from `regs.sp` upward. A frame
    /// interrupted by a signal appears as its interrupted instruction address.
    pub fn unwind(&mut self, regs: Registers, stack: &[u8], out: &mut Vec<u64>) -> Outcome {
        let big_endian = self.big_endian;
        let read = |addr: u64| -> Result<u64, ()> {
            let off = usize::try_from(addr.checked_sub(regs.sp).ok_or(())?).map_err(|_| ())?;
            let bytes: [u8; 8] = stack
                .get(off..off.checked_add(8).ok_or(())?)
                .ok_or(())?
                .try_into()
                .map_err(|_| ())?;
            Ok(if big_endian {
                u64::from_be_bytes(bytes)
            } else {
                u64::from_le_bytes(bytes)
            })
        };
        if let Inner::Arm = self.inner {
            return self.unwind_arm(regs, stack, out);
        }
        if let Inner::Cfi = self.inner {
            return self.unwind_cfi(regs, stack, out);
        }
        let saved = signal::saved_regs(self.arch);
        let start = out.len();
        out.push(regs.pc);
        let mut address = FrameAddress::from_instruction_pointer(regs.pc);
        let mut state = State::new(&self.inner, regs, self.max_avma);
        loop {
            if out.len() - start >= MAX_FRAMES {
                return Outcome::Truncated;
            }
            if let (FrameAddress::ReturnAddress(ra), Some(saved)) = (address, saved) {
                if self.is_trampoline(ra.get()) {
                    let sp = state.sp();
                    let restored = (|| {
                        let pc = read(sp.checked_add(saved.pc).ok_or(())?)?;
                        let new_sp = read(sp.checked_add(saved.sp).ok_or(())?)?;
                        let fp = read(sp.checked_add(saved.fp).ok_or(())?)?;
                        let lr = match saved.lr {
                            Some(off) => read(sp.checked_add(off).ok_or(())?)?,
                            None => 0,
                        };
                        Ok::<_, ()>((pc, new_sp, fp, lr))
                    })();
                    let Ok((pc, new_sp, fp, lr)) = restored else {
                        return Outcome::Truncated;
                    };
                    state.restore(pc, new_sp, fp, lr);
                    out.push(pc);
                    // The interrupted code is unwound like a sampled leaf, not a caller.
                    address = FrameAddress::from_instruction_pointer(pc);
                    continue;
                }
            }
            let mut read_stack = read;
            let next = match (&mut self.inner, &mut state) {
                (Inner::X86_64(u, cache), State::X86_64(r)) => {
                    u.unwind_frame(address, r, cache, &mut read_stack)
                }
                (Inner::Aarch64(u, cache), State::Aarch64(r)) => {
                    u.unwind_frame(address, r, cache, &mut read_stack)
                }
                _ => return Outcome::Unsupported,
            };
            match next {
                Ok(Some(ra)) => match FrameAddress::from_return_address(ra) {
                    Some(a) => {
                        out.push(ra);
                        address = a;
                    }
                    None => return Outcome::Complete,
                },
                Ok(None) => return Outcome::Complete,
                Err(_) => return Outcome::Truncated,
            }
        }
    }
}

impl AddressSpace {
    /// EHABI unwinding over the stack copy, 32-bit words.
    fn unwind_arm(&self, regs: Registers, stack: &[u8], out: &mut Vec<u64>) -> Outcome {
        use crate::arm::{execute, Entry, Frame, Step};
        let big_endian = self.big_endian;
        let base = regs.sp as u32;
        let mut read = |addr: u32| -> Option<u32> {
            let off = addr.checked_sub(base)? as usize;
            let b: [u8; 4] = stack.get(off..off.checked_add(4)?)?.try_into().ok()?;
            Some(if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            })
        };
        let mut f = Frame { r: regs.arm };
        f.r[15] = regs.pc as u32;
        f.r[13] = regs.sp as u32;
        let start = out.len();
        out.push(u64::from(f.r[15] & !1));
        let mut first = true;
        loop {
            if out.len() - start >= MAX_FRAMES {
                return Outcome::Truncated;
            }
            let pc = u64::from(f.r[15] & !1);
            // A return address is looked up inside the call, not at the next instruction.
            let lookup = if first { pc } else { pc.wrapping_sub(1) };
            first = false;
            let Some((bias, sections)) = self.module_at(lookup) else {
                return Outcome::Truncated;
            };
            let svma = lookup.wrapping_sub(bias) & 0xffff_ffff;
            let (old_pc, old_sp) = (f.r[15] & !1, f.r[13]);
            // DWARF CFI where an FDE covers the address (exact ranges), else EHABI.
            if let Some(cfi) = sections.cfi.as_ref().filter(|c| c.covers(svma)) {
                let regs_now = f.r;
                let mut read64 = |a: u64| read(a as u32).map(u64::from);
                let Some(caller) = cfi.step(
                    svma,
                    &|n| regs_now.get(n as usize).map(|&v| u64::from(v)),
                    &mut read64,
                ) else {
                    return Outcome::Truncated;
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
                    None => return Outcome::Truncated,
                    Some(Entry::CantUnwind) => return Outcome::Complete,
                    Some(Entry::Instructions(bytes)) => match execute(&bytes, &mut f, &mut read) {
                        Step::Caller => {}
                        Step::Refuse => return Outcome::Complete,
                        Step::Failed => return Outcome::Truncated,
                    },
                }
            }
            let new_pc = f.r[15] & !1;
            if new_pc == 0 {
                return Outcome::Complete;
            }
            if new_pc == old_pc && f.r[13] == old_sp {
                return Outcome::Truncated;
            }
            out.push(u64::from(new_pc));
        }
    }
}

impl AddressSpace {
    /// DWARF CFI unwinding with gimli for i686 (DWARF registers: esp 4, ebp 5, eip 8) and
    /// RISC-V (ra 1, sp 2, s0 8), `.eh_frame` first, `.debug_frame` as the fallback.
    fn unwind_cfi(&self, regs: Registers, stack: &[u8], out: &mut Vec<u64>) -> Outcome {
        let (sp_reg, fp_reg, ra_reg, word) = match self.arch {
            Arch::X86 => (4u16, 5u16, None, 4usize),
            _ => (2, 8, Some(1u16), 8),
        };
        let big_endian = self.big_endian;
        let base = regs.sp;
        let mut read = |addr: u64| -> Option<u64> {
            let off = usize::try_from(addr.checked_sub(base)?).ok()?;
            let b = stack.get(off..off.checked_add(word)?)?;
            Some(match (word, big_endian) {
                (4, false) => u64::from(u32::from_le_bytes(b.try_into().ok()?)),
                (4, true) => u64::from(u32::from_be_bytes(b.try_into().ok()?)),
                (_, false) => u64::from_le_bytes(b.try_into().ok()?),
                (_, true) => u64::from_be_bytes(b.try_into().ok()?),
            })
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
                return Outcome::Truncated;
            }
            let lookup = if first { pc } else { pc.wrapping_sub(1) };
            first = false;
            let Some((bias, sections)) = self.module_at(lookup) else {
                return Outcome::Truncated;
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
                return Outcome::Truncated;
            };
            let now = r;
            let Some(caller) =
                table.step(svma, &|n| now.get(n as usize).copied().flatten(), &mut read)
            else {
                return Outcome::Truncated;
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
                return Outcome::Truncated;
            }
            pc = ra;
            out.push(ra);
        }
    }
}

/// The registers being unwound, in each unwinder's own type.
enum State {
    X86_64(UnwindRegsX86_64),
    Aarch64(UnwindRegsAarch64),
    Other,
}

impl State {
    fn new(inner: &Inner, regs: Registers, max_avma: u64) -> State {
        match inner {
            Inner::X86_64(..) => State::X86_64(UnwindRegsX86_64::new(regs.pc, regs.sp, regs.fp)),
            Inner::Arm | Inner::Cfi => State::Other,
            Inner::Aarch64(..) => State::Aarch64(UnwindRegsAarch64::new_with_ptr_auth_mask(
                PtrAuthMask::from_max_known_address(max_avma),
                regs.lr,
                regs.sp,
                regs.fp,
            )),
        }
    }

    fn sp(&self) -> u64 {
        match self {
            State::X86_64(r) => r.sp(),
            State::Aarch64(r) => r.sp(),
            State::Other => 0,
        }
    }

    fn restore(&mut self, pc: u64, sp: u64, fp: u64, lr: u64) {
        match self {
            State::X86_64(r) => {
                r.set_ip(pc);
                r.set_sp(sp);
                r.set_bp(fp);
            }
            State::Aarch64(r) => {
                r.set_sp(sp);
                r.set_fp(fp);
                r.set_lr(lr);
            }
            State::Other => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Property test: random registers and stack bytes over a real module never panic, never
    /// loop, and never yield more than MAX_FRAMES frames.
    #[test]
    fn random_stacks_are_bounded_and_never_panic() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let s = Arc::new(UnwindSections::from_elf(&exe, None).unwrap());
        let text = s.text_svma.clone().unwrap();
        let bias = 0x5555_0000_0000u64;
        let avma = (text.start + bias)..(text.end + bias);
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for arch in [
            Arch::X86_64,
            Arch::Aarch64,
            Arch::Arm,
            Arch::X86,
            Arch::Riscv64,
        ] {
            let mut space = AddressSpace::new(arch, false);
            space.add_module("self", avma.clone(), bias, &s);
            for i in 0..5000 {
                let len = (next() % 4096) as usize;
                let mut stack: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                // Some stacks point back into themselves and into the module, to make loops
                // and long chains likely.
                let sp = 0x7fff_0000_0000 + (next() % 64) * 8;
                for w in stack.chunks_exact_mut(8).step_by(2) {
                    let v = if i % 2 == 0 {
                        sp + (next() % 512)
                    } else {
                        avma.start + next() % (avma.end - avma.start)
                    };
                    w.copy_from_slice(&v.to_le_bytes());
                }
                let regs = Registers {
                    pc: avma.start + next() % (avma.end - avma.start),
                    sp,
                    fp: sp + (next() % 256),
                    lr: avma.start + next() % (avma.end - avma.start),
                    arm: [next() as u32; 16],
                };
                let mut out = Vec::new();
                space.unwind(regs, &stack, &mut out);
                assert!(!out.is_empty() && out.len() <= MAX_FRAMES + 1);
            }
        }
    }
}
