//! One process image's modules and the unwinder over them.
//!
//! x86_64 and AArch64 go through framehop (fast, with a rule cache), but framehop quietly
//! falls back to frame pointers where a module's tables do not cover an address or a rule
//! does not convert, and in `-O2` code that yields garbage. So every frame is checked first:
//! its address must lie in a module whose CFI covers it (a sampled linker stub is unwound by
//! hand, as a plain return), and a result framehop gives that looks wrong (an error, an end
//! of stack, a return address outside every executable mapping) is redone by the gimli CFI
//! evaluator, which evaluates the DWARF expressions framehop does not. What still fails ends
//! the unwind with a [`CutShort`] reason; a return address outside every executable mapping
//! is never kept as a frame.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::arch::{Architecture, SignalFrame, UnwindState};
use crate::outcome::{CutShort, Outcome};
use crate::regs::Registers;
use crate::sections::UnwindSections;

/// Unwinding stops after this many frames: deep recursion is still shown this deep, and a
/// corrupt stack cannot make a sample cost unbounded time or memory.
pub const MAX_FRAMES: usize = 1024;

/// How far past the ELF entry point an address still counts as the start code (`_start` is a
/// few dozen instructions on every ABI).
pub(crate) const START_CODE_BYTES: u64 = 128;

/// The modules of one process image (one exec of one process) and a rule cache, for
/// architecture `A` (one of [`crate::arch`]'s unit structs).
pub struct AddressSpace<A: Architecture> {
    pub(crate) state: A::State,
    pub(crate) big_endian: bool,
    pub(crate) max_avma: u64,
    /// Each module's range, bias and unwind sections.
    code: Vec<(Range<u64>, u64, Arc<UnwindSections>)>,
    /// Every executable mapping, with or without unwind tables, sorted by start.
    mapped: Vec<Range<u64>>,
    /// Anonymous executable memory (code a JIT generated), sorted by start.
    jit: Vec<Range<u64>>,
    /// Frames in JIT code unwound by the frame-pointer rule since the last
    /// [`AddressSpace::take_jit_frames`].
    pub(crate) jit_frames: AtomicU64,
    /// Frames unwound by prologue analysis (a heuristic) since the last
    /// [`AddressSpace::take_prologue_frames`].
    pub(crate) prologue_frames: AtomicU64,
    /// Frames in code no table covers unwound by the return-address or frame-pointer rule
    /// since the last [`AddressSpace::take_untabled_frames`].
    pub(crate) untabled_frames: AtomicU64,
    /// Stacks that ended at a Go stack switch since the last
    /// [`AddressSpace::take_go_switches`].
    pub(crate) go_switches: AtomicU64,
    /// Frames found by stack scanning since the last [`AddressSpace::take_scanned_frames`].
    pub(crate) scanned_frames: AtomicU64,
    /// The stack pointer of each frame of the last unwind, parallel to its addresses.
    pub(crate) frame_sps: Vec<u64>,
}

impl<A: Architecture> AddressSpace<A> {
    /// An empty address space; `big_endian` is the recording's byte order.
    pub fn new(big_endian: bool) -> AddressSpace<A> {
        AddressSpace {
            state: A::State::new(),
            big_endian,
            max_avma: 0,
            code: Vec::new(),
            mapped: Vec::new(),
            jit: Vec::new(),
            jit_frames: AtomicU64::new(0),
            prologue_frames: AtomicU64::new(0),
            untabled_frames: AtomicU64::new(0),
            go_switches: AtomicU64::new(0),
            scanned_frames: AtomicU64::new(0),
            frame_sps: Vec::new(),
        }
    }

    /// Adds a module mapped at `avma` (its executable range on the board) with load `bias`.
    pub fn add_module(&mut self, name: &str, avma: Range<u64>, bias: u64, s: &Arc<UnwindSections>) {
        self.max_avma = self.max_avma.max(avma.end);
        self.add_mapping(avma.clone());
        self.code.push((avma.clone(), bias, s.clone()));
        self.state.add_module(name, avma, bias, s);
    }

    /// Adds an executable mapping whose module has no usable unwind tables (missing from the
    /// sysroot, mismatched): its addresses are code, so a stack ending there is cut short
    /// for want of tables, not because of garbage.
    pub fn add_mapping(&mut self, avma: Range<u64>) {
        let at = self.mapped.partition_point(|r| r.start < avma.start);
        self.mapped.insert(at, avma);
    }

    /// Adds anonymous executable memory: code a JIT runtime generated, with no unwind tables.
    /// On x86_64 and AArch64 its frames are unwound by the frame-pointer rule (JIT runtimes
    /// keep frame pointers); elsewhere a stack ending there is cut short for want of tables.
    pub fn add_jit_code(&mut self, avma: Range<u64>) {
        self.add_mapping(avma.clone());
        let at = self.jit.partition_point(|r| r.start < avma.start);
        self.jit.insert(at, avma);
    }

    /// Whether `addr` lies in JIT code (see [`AddressSpace::add_jit_code`]).
    pub(crate) fn is_jit(&self, addr: u64) -> bool {
        let i = self.jit.partition_point(|r| r.start <= addr);
        self.jit[..i].iter().rev().any(|r| r.contains(&addr))
    }

    /// How many frames in JIT code were unwound by the frame-pointer rule (a fallback, so
    /// reports show the count) since the last call.
    pub fn take_jit_frames(&self) -> u64 {
        self.jit_frames.swap(0, Ordering::Relaxed)
    }

    /// Whether `addr` lies in an executable mapping.
    pub(crate) fn is_mapped(&self, addr: u64) -> bool {
        let i = self.mapped.partition_point(|r| r.start <= addr);
        // A module's range spans all of its executable mappings, so ranges may nest: any
        // range that starts at or below the address may hold it.
        self.mapped[..i].iter().rev().any(|r| r.contains(&addr))
    }

    /// Why an address outside every module with unwind tables stops the unwind.
    pub(crate) fn unknown_code(&self, addr: u64) -> CutShort {
        if self.is_mapped(addr) {
            CutShort::NoUnwindTables
        } else {
            CutShort::OutsideMappings
        }
    }

    /// The signal frame of the sigreturn trampoline at `avma`, if the code there is one of
    /// this architecture's (a handler's return address).
    pub(crate) fn trampoline_at(&self, avma: u64) -> Option<SignalFrame> {
        if A::SIGNAL_TRAMPOLINES.is_empty() {
            return None;
        }
        let (bias, s) = self.module_at(avma)?;
        let (svma, data) = (s.text_segment_svma.as_ref()?, s.text_segment.as_ref()?);
        let off = usize::try_from(avma.wrapping_sub(bias).checked_sub(svma.start)?).ok()?;
        A::SIGNAL_TRAMPOLINES
            .iter()
            .find(|t| data.get(off..off.saturating_add(t.code.len())) == Some(t.code))
            .map(|t| t.frame)
    }

    /// The up to `len` code bytes that end right before `avma` in its module's executable
    /// segment (fewer at the segment's start); `None` outside every module.
    pub(crate) fn code_before(&self, avma: u64, len: u64) -> Option<&[u8]> {
        let (bias, s) = self.module_at(avma)?;
        let (svma, data) = (s.text_segment_svma.as_ref()?, s.text_segment.as_ref()?);
        let end = avma.wrapping_sub(bias).checked_sub(svma.start)?;
        let start = end.saturating_sub(len);
        data.get(usize::try_from(start).ok()?..usize::try_from(end).ok()?)
    }

    /// How many frames were found by stack scanning since the last call: the first word up
    /// the stack that follows a call instruction, where neither a table nor the frame pointer
    /// could say (see the `scan` module). A heuristic, so reports show the count.
    pub fn take_scanned_frames(&self) -> u64 {
        self.scanned_frames.swap(0, Ordering::Relaxed)
    }

    /// The module mapped at `avma`: its load bias and unwind sections.
    pub(crate) fn module_at(&self, avma: u64) -> Option<(u64, &UnwindSections)> {
        self.code
            .iter()
            .find(|(range, _, _)| range.contains(&avma))
            .map(|(_, bias, s)| (*bias, &**s))
    }

    /// How many frames were unwound by prologue analysis since the last call: ARM code
    /// without any unwind table, whose frame was found by decoding its instructions (see the
    /// `arm` module). A heuristic, so reports show the count.
    pub fn take_prologue_frames(&self) -> u64 {
        self.prologue_frames.swap(0, Ordering::Relaxed)
    }

    /// How many frames in code without unwind tables or info (assembly, stubs, code
    /// generated into a deleted file) were unwound by the return-address or frame-pointer
    /// rule (a fallback, so reports show the count) since the last call.
    pub fn take_untabled_frames(&self) -> u64 {
        self.untabled_frames.swap(0, Ordering::Relaxed)
    }

    /// How many stacks ended, since the last call, at a function where Go's runtime switched
    /// stacks (`runtime.systemstack`, `runtime.mcall`, `runtime.morestack`,
    /// `runtime.asmcgocall`): complete as far as this stack goes, as Go's own profiler ends
    /// them, but the goroutine's frames above the switch are on a stack the sample did not
    /// copy. Reports show the count.
    pub fn take_go_switches(&self) -> u64 {
        self.go_switches.swap(0, Ordering::Relaxed)
    }

    /// Unwinds one sample: appends the instruction pointer and then each return address to
    /// `out`, innermost first (nothing when the instruction pointer lies outside every
    /// executable mapping). `stack` holds the bytes from `regs.sp` upward. A frame
    /// interrupted by a signal appears as its interrupted instruction address.
    pub fn unwind(&mut self, regs: Registers, stack: &[u8], out: &mut Vec<u64>) -> Outcome {
        // A sampled instruction outside every executable mapping is no frame either: a sample
        // taken inside execve, after the new image's events are armed and before the kernel
        // has set its first registers, still holds the old image's (`rec`'s own) registers.
        self.frame_sps.clear();
        if !self.is_mapped(regs.pc) {
            return Outcome::CutShort(CutShort::OutsideMappings);
        }
        A::unwind(self, regs, stack, out)
    }

    /// The stack pointer of each frame the last [`AddressSpace::unwind`] appended, in the
    /// same order (the sampled one's, then each caller's on entering it, which is the stack
    /// address just above the callee's frame): with the return address, it names one
    /// activation of a function, which is how a chain cut short is joined to a complete one.
    pub fn frame_sps(&self) -> &[u64] {
        &self.frame_sps
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::{Aarch64, Arm, Riscv64, X86, X86_64};

    /// A sample taken inside execve, before the new image has run: its registers are still
    /// the old image's, outside every mapping of the new one. It yields no frame at all.
    fn outside_every_mapping<A: Architecture>(s: &Arc<UnwindSections>) {
        let text = s.text_svma.clone().unwrap();
        let bias = 0x5555_0000_0000u64;
        let mut space = AddressSpace::<A>::new(false);
        space.add_module("self", (text.start + bias)..(text.end + bias), bias, s);
        let regs = Registers {
            pc: 0x10c_63a4,
            sp: 0x7fff_0000,
            fp: 0,
            lr: 0,
            arm: [0; 16],
        };
        let mut out = Vec::new();
        assert_eq!(
            space.unwind(regs, &[], &mut out),
            Outcome::CutShort(CutShort::OutsideMappings),
            "{:?}",
            A::ARCH
        );
        assert!(out.is_empty(), "{:?}: {out:x?}", A::ARCH);
    }

    #[test]
    fn a_sampled_instruction_outside_every_mapping_is_no_frame() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let s = Arc::new(UnwindSections::from_elf(&exe, None).unwrap());
        outside_every_mapping::<X86_64>(&s);
        outside_every_mapping::<Aarch64>(&s);
        outside_every_mapping::<Arm>(&s);
        outside_every_mapping::<X86>(&s);
        outside_every_mapping::<Riscv64>(&s);
    }

    fn random_stacks<A: Architecture>(s: &Arc<UnwindSections>) {
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
        let mut space = AddressSpace::<A>::new(false);
        space.add_module("self", avma.clone(), bias, s);
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
            assert_eq!(space.frame_sps().len(), out.len(), "{:?}", A::ARCH);
        }
    }

    /// Property test: random registers and stack bytes over a real module never panic, never
    /// loop, and never yield more than MAX_FRAMES frames.
    #[test]
    fn random_stacks_are_bounded_and_never_panic() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let s = Arc::new(UnwindSections::from_elf(&exe, None).unwrap());
        random_stacks::<X86_64>(&s);
        random_stacks::<Aarch64>(&s);
        random_stacks::<Arm>(&s);
        random_stacks::<X86>(&s);
        random_stacks::<Riscv64>(&s);
    }
}
