//! The x86_64 and AArch64 stack walk: framehop for speed, every frame checked (see the
//! [`crate::space`] module for why), gimli's CFI evaluation where framehop's answer cannot
//! be trusted.

use std::ops::Range;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};

use crate::arch::{Architecture, UnwindState};
use crate::bytes::Section;
use crate::cfi::CallerRegs;
use crate::go_walk::{step_go, GoStep};
use crate::outcome::{CutShort, Outcome};
use crate::regs::Registers;
use crate::sections::UnwindSections;
use crate::space::{AddressSpace, MAX_FRAMES, START_CODE_BYTES};
use crate::stack::StackCopy;

/// Section bytes as framehop holds them: ranges of the shared module files.
pub(crate) type Data = Section;

/// A module's sections as framehop takes them.
pub(crate) fn section_info(s: &UnwindSections) -> ExplicitModuleSectionInfo<Data> {
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

/// How one frame will be unwound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// framehop, with the result checked.
    Framehop,
    /// gimli over `.debug_frame`: only it covers the address, and framehop reads one
    /// section per module (`.eh_frame` when there is one).
    Dwarf,
    /// A sampled PLT stub: it has pushed nothing, so the caller is found like a plain return
    /// (the return address at the stack pointer on x86_64, the link register on AArch64).
    PltReturn,
    /// The entry point's start code without unwind info: the outermost frame.
    Outermost,
    /// Code generated at run time (anonymous executable memory), which has no unwind
    /// tables: the frame-pointer rule, as JIT runtimes keep frame pointers.
    FramePointer,
    /// Code of a module at hand that its tables do not cover (hand-written assembly without
    /// CFI, a stub) or that has no tables at all: the return-address rule for a sampled leaf,
    /// else the frame-pointer rule, each step accepted only when it lands in executable code
    /// and moves up the stack; else the stop reason given. (A module missing from the sysroot
    /// stays cut short: its tables exist, on the board.)
    WithoutTables(CutShort),
    /// Go code: Go's own function table (see [`crate::go_walk`]).
    Go,
    /// Nothing can unwind this frame.
    Stop(CutShort),
}

/// framehop's unwinder and rule cache for one address space (the x86_64 and AArch64
/// [`crate::Architecture::State`]; opaque outside this crate).
pub struct FramehopState<U, C> {
    pub(crate) unwinder: U,
    pub(crate) cache: Box<C>,
}

impl<U, C> UnwindState for FramehopState<U, C>
where
    U: Unwinder<Module = Module<Data>> + Default,
    C: Default,
{
    fn new() -> Self {
        FramehopState {
            unwinder: U::default(),
            cache: Box::default(),
        }
    }

    fn add_module(&mut self, name: &str, avma: Range<u64>, bias: u64, s: &Arc<UnwindSections>) {
        self.unwinder
            .add_module(Module::new(name.to_string(), avma, bias, section_info(s)));
    }
}

/// An architecture framehop unwinds: its register type and how the checks and gimli's
/// steps around framehop read and change it.
pub(crate) trait FramehopArch: Architecture {
    /// framehop's registers.
    type Regs: Copy;
    /// framehop's rule cache.
    type Cache;
    /// framehop's unwinder.
    type Fh: Unwinder<UnwindRegs = Self::Regs, Cache = Self::Cache, Module = Module<Data>>;

    /// The unwinder and cache in an address space's state.
    fn parts(state: &mut Self::State) -> (&Self::Fh, &mut Self::Cache);
    /// The frame pointer's DWARF register number (rbp, x29).
    const FP_REG: u16;
    /// Whether a call leaves the return address in a link register (AArch64) rather than
    /// on the stack (x86_64).
    const LINK_REGISTER: bool;
    /// The registers a walk starts from.
    fn initial(regs: &Registers, max_avma: u64) -> Self::Regs;
    /// The stack pointer.
    fn sp(r: &Self::Regs) -> u64;
    /// Register `n` (DWARF numbering) of the frame whose instruction address is `pc`.
    fn dwarf(r: &Self::Regs, n: u16, pc: u64) -> Option<u64>;
    /// A return address without pointer-authentication bits (framehop strips them itself;
    /// gimli's steps do not).
    fn strip(r: &Self::Regs, ra: u64) -> u64;
    /// Moves to the caller a gimli step described.
    fn apply(r: &mut Self::Regs, caller: &CallerRegs);
    /// The caller of a sampled PLT stub.
    fn plt_return(r: &mut Self::Regs, copy: &StackCopy<'_>) -> Result<Option<u64>, CutShort>;
    /// Sets the registers a signal frame saved.
    fn restore(r: &mut Self::Regs, pc: u64, sp: u64, fp: u64, lr: u64);
}

/// The reason for a failed step: the copy's end if a read ran past it.
pub(crate) fn failure(copy: &StackCopy<'_>) -> CutShort {
    if copy.ran_off() {
        CutShort::StackCopyEnded
    } else {
        CutShort::BadFrame
    }
}

impl<A: Architecture> AddressSpace<A> {
    fn plan(&self, lookup: u64, first: bool) -> Plan {
        let Some((bias, s)) = self.module_at(lookup) else {
            if self.is_jit(lookup) {
                return Plan::FramePointer;
            }
            return Plan::Stop(self.unknown_code(lookup));
        };
        let svma = lookup.wrapping_sub(bias);
        if first && s.plt.iter().any(|r| r.contains(&svma)) {
            return Plan::PltReturn;
        }
        if s.go.as_ref().is_some_and(|g| g.func_at(svma).is_some()) {
            return Plan::Go;
        }
        if s.cfi_eh.as_ref().is_some_and(|t| t.covers(svma)) {
            return Plan::Framehop;
        }
        if s.cfi.as_ref().is_some_and(|t| t.covers(svma)) {
            return if s.eh_frame.is_none() {
                Plan::Framehop
            } else {
                Plan::Dwarf
            };
        }
        if s.entry
            .is_some_and(|e| svma >= e && svma < e.saturating_add(START_CODE_BYTES))
        {
            return Plan::Outermost;
        }
        Plan::WithoutTables(if s.has_unwind_info() {
            CutShort::NoUnwindInfo
        } else {
            CutShort::NoUnwindTables
        })
    }
}

/// How a step in code without tables found the caller.
enum Fallback {
    /// The return-address or frame-pointer rule.
    Rule(u64),
    /// Stack scanning (see [`crate::scan`]).
    Scanned(u64),
}

/// One step in code no table covers (see [`Plan::WithoutTables`]), as framehop and samply
/// fall back: a sampled leaf may not have pushed anything yet, so its caller is tried first
/// by the return-address rule (the word at the stack pointer on x86_64, the link register
/// on AArch64), then by the frame-pointer rule, which hand-written SIMD code and most
/// generated code keep, and last by scanning the stack for a return address after a call
/// instruction. A rule's step counts only if its return address lies in executable code
/// and the stack pointer moved up (or, for the leaf's link register, stayed); `None` leaves
/// the registers as they were.
fn step_without_tables<A: FramehopArch>(
    space: &AddressSpace<A>,
    first: bool,
    pc: u64,
    state: &mut A::Regs,
    copy: &StackCopy<'_>,
) -> Option<Fallback> {
    let before = *state;
    let sp = A::sp(&before);
    let lands = |ra: u64| ra != pc && space.is_mapped(ra.wrapping_sub(1));
    if first {
        match A::plt_return(state, copy) {
            Ok(Some(ra)) if lands(ra) && A::sp(state) >= sp => return Some(Fallback::Rule(ra)),
            _ => *state = before,
        }
    }
    match step_frame_pointer::<A>(state, pc, copy) {
        Ok(Some(ra)) if lands(ra) && A::sp(state) > sp => Some(Fallback::Rule(ra)),
        _ => {
            *state = before;
            crate::scan::scan(space, pc, state, copy).map(Fallback::Scanned)
        }
    }
}

/// One step with gimli's evaluation of the module's CFI (`.eh_frame`, then
/// `.debug_frame`).
fn step_dwarf<A: FramehopArch>(
    space: &AddressSpace<A>,
    lookup: u64,
    pc: u64,
    first: bool,
    state: &mut A::Regs,
    copy: &StackCopy<'_>,
) -> Result<Option<u64>, CutShort> {
    let (bias, s) = space.module_at(lookup).ok_or(CutShort::NoUnwindTables)?;
    let svma = lookup.wrapping_sub(bias);
    let table = [&s.cfi_eh, &s.cfi]
        .into_iter()
        .flatten()
        .find(|t| t.covers(svma))
        .ok_or(CutShort::NoUnwindInfo)?;
    copy.reset();
    let now = *state;
    let caller = table
        .step(svma, &|n| A::dwarf(&now, n, pc), &mut |a| copy.u64(a))
        .ok_or_else(|| failure(copy))?;
    // An undefined return address is the tables' mark of the outermost frame (`_start`,
    // a new thread's first function), whatever its CFA.
    let Some(ra) = caller.ra.filter(|&a| a != 0) else {
        return Ok(None);
    };
    // The stack only grows down. A sampled leaf that keeps its return address in the
    // link register may have pushed nothing (CFA = SP); a caller has always pushed it.
    let sp = A::sp(&now);
    if caller.cfa < sp || (caller.cfa == sp && !first) {
        return Err(CutShort::BadFrame);
    }
    A::apply(state, &caller);
    Ok(Some(A::strip(state, ra)))
}

fn step_framehop<A: FramehopArch>(
    space: &mut AddressSpace<A>,
    address: FrameAddress,
    state: &mut A::Regs,
    copy: &StackCopy<'_>,
) -> Result<Option<u64>, CutShort> {
    copy.reset();
    let mut read = |a: u64| copy.u64(a).ok_or(());
    let (unwinder, cache) = A::parts(&mut space.state);
    unwinder
        .unwind_frame(address, state, cache, &mut read)
        .map_err(|_| failure(copy))
}

/// One step by the frame-pointer rule, for JIT code: the frame pointer points at the saved
/// frame pointer, the return address is the word above it, and the caller's stack starts
/// above both. A frame pointer below the stack pointer, or one that does not move up, is no
/// frame.
fn step_frame_pointer<A: FramehopArch>(
    state: &mut A::Regs,
    pc: u64,
    copy: &StackCopy<'_>,
) -> Result<Option<u64>, CutShort> {
    copy.reset();
    let fp = A::dwarf(state, A::FP_REG, pc).ok_or(CutShort::BadFrame)?;
    let sp = A::sp(state);
    if fp < sp || fp % 8 != 0 {
        return Err(CutShort::BadFrame);
    }
    let word = |a: u64| copy.u64(a).ok_or_else(|| failure(copy));
    let (saved_fp, ra) = (
        word(fp)?,
        word(fp.checked_add(8).ok_or(CutShort::BadFrame)?)?,
    );
    if ra == 0 {
        return Ok(None);
    }
    let caller_sp = fp.checked_add(16).ok_or(CutShort::BadFrame)?;
    A::restore(state, ra, caller_sp, saved_fp, ra);
    Ok(Some(A::strip(state, ra)))
}

/// Restores the registers a signal handler's trampoline frame saved; `None` when the
/// address is no trampoline.
fn signal_frame<A: FramehopArch>(
    space: &AddressSpace<A>,
    ra: u64,
    state: &mut A::Regs,
    copy: &StackCopy<'_>,
) -> Option<Result<u64, CutShort>> {
    let saved = space.trampoline_at(ra)?;
    let sp = A::sp(state);
    let word = |off: u64| {
        sp.checked_add(off)
            .and_then(|a| copy.u64(a))
            .ok_or(CutShort::StackCopyEnded)
    };
    Some((|| {
        let pc = word(saved.pc)?;
        let new_sp = word(saved.sp)?;
        let fp = word(saved.fp)?;
        let lr = match saved.lr {
            Some(off) => word(off)?,
            None => 0,
        };
        A::restore(state, pc, new_sp, fp, lr);
        Ok(pc)
    })())
}

/// The framehop walk over one sample (x86_64, AArch64).
pub(crate) fn unwind<A: FramehopArch>(
    space: &mut AddressSpace<A>,
    regs: Registers,
    stack: &[u8],
    out: &mut Vec<u64>,
) -> Outcome {
    let copy = StackCopy::new(regs.sp, stack, space.big_endian);
    let mut state = A::initial(&regs, space.max_avma);
    let start = out.len();
    out.push(regs.pc);
    space.frame_sps.push(regs.sp);
    let mut address = FrameAddress::from_instruction_pointer(regs.pc);
    loop {
        if out.len() - start >= MAX_FRAMES {
            return Outcome::CutShort(CutShort::TooDeep);
        }
        if let FrameAddress::ReturnAddress(ra) = address {
            match signal_frame(space, ra.get(), &mut state, &copy) {
                Some(Ok(pc)) => {
                    out.push(pc);
                    space.frame_sps.push(A::sp(&state));
                    // The interrupted code is unwound like a sampled leaf, not a caller.
                    address = FrameAddress::from_instruction_pointer(pc);
                    continue;
                }
                Some(Err(why)) => return Outcome::CutShort(why),
                None => {}
            }
        }
        let pc = address.address();
        let lookup = address.address_for_lookup();
        let first = !address.is_return_address();
        let result = match space.plan(lookup, first) {
            Plan::Stop(why) => return Outcome::CutShort(why),
            Plan::Outermost => return Outcome::Complete,
            Plan::PltReturn => A::plt_return(&mut state, &copy),
            Plan::FramePointer => {
                let before = state;
                match step_frame_pointer::<A>(&mut state, pc, &copy) {
                    Ok(Some(ra)) => {
                        space.jit_frames.fetch_add(1, Relaxed);
                        Ok(Some(ra))
                    }
                    // Generated code without a frame pointer (a leaf that pushed registers).
                    failed => {
                        state = before;
                        match crate::scan::scan(space, pc, &mut state, &copy) {
                            Some(ra) => {
                                space.scanned_frames.fetch_add(1, Relaxed);
                                Ok(Some(ra))
                            }
                            None => failed,
                        }
                    }
                }
            }
            Plan::WithoutTables(why) => {
                match step_without_tables::<A>(space, first, pc, &mut state, &copy) {
                    Some(Fallback::Rule(ra)) => {
                        space.untabled_frames.fetch_add(1, Relaxed);
                        Ok(Some(ra))
                    }
                    Some(Fallback::Scanned(ra)) => {
                        space.scanned_frames.fetch_add(1, Relaxed);
                        Ok(Some(ra))
                    }
                    None => Err(why),
                }
            }
            Plan::Dwarf => step_dwarf(space, lookup, pc, first, &mut state, &copy),
            Plan::Go => {
                let Some((bias, s)) = space.module_at(lookup) else {
                    return Outcome::CutShort(CutShort::NoUnwindTables);
                };
                let svma = lookup.wrapping_sub(bias);
                let Some(f) = s.go.as_ref().and_then(|g| g.func_at(svma)) else {
                    return Outcome::CutShort(CutShort::NoUnwindInfo);
                };
                match step_go::<A>(&f, svma, first, &mut state, &copy) {
                    Ok(GoStep::Caller(ra)) => Ok(Some(ra)),
                    Ok(GoStep::Top) => Ok(None),
                    Ok(GoStep::Switch) => {
                        space.go_switches.fetch_add(1, Relaxed);
                        Ok(None)
                    }
                    Err(why) => Err(why),
                }
            }
            Plan::Framehop => {
                let before = state;
                match step_framehop(space, address, &mut state, &copy) {
                    Ok(Some(ra)) if space.is_mapped(ra.wrapping_sub(1)) => Ok(Some(ra)),
                    // An error, an end of stack or a wild address: framehop may have
                    // fallen back to frame pointers. gimli decides.
                    _ => {
                        state = before;
                        step_dwarf(space, lookup, pc, first, &mut state, &copy)
                    }
                }
            }
        };
        match result {
            Ok(None) => return Outcome::Complete,
            Err(why) => return Outcome::CutShort(why),
            Ok(Some(ra)) => {
                if !space.is_mapped(ra.wrapping_sub(1)) {
                    return Outcome::CutShort(CutShort::OutsideMappings);
                }
                out.push(ra);
                space.frame_sps.push(A::sp(&state));
                match FrameAddress::from_return_address(ra) {
                    Some(a) => address = a,
                    None => return Outcome::Complete,
                }
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use std::sync::Arc;

    use crate::arch::X86_64;
    use crate::outcome::{CutShort, Outcome};
    use crate::regs::Registers;
    use crate::sections::UnwindSections;
    use crate::space::AddressSpace;

    const BIAS: u64 = 0x5555_0000_0000;

    /// This test binary as the only module, and the stated address of a function's first
    /// instruction (where the return address is at the stack pointer).
    fn space() -> (AddressSpace<X86_64>, Arc<UnwindSections>, u64) {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let s = Arc::new(UnwindSections::from_elf(&exe, None).unwrap());
        let text = s.text_svma.clone().unwrap();
        let entry = s.entry.unwrap_or(0);
        let (start, _) = s
            .cfi_eh
            .as_ref()
            .unwrap()
            .ranges()
            .find(|&(a, _)| {
                text.contains(&a) && a != entry && !s.plt.iter().any(|p| p.contains(&a))
            })
            .unwrap();
        // The whole executable segment, as a mapping gives it (the PLT lies outside .text).
        let code = s.text_segment_svma.clone().unwrap();
        let mut space = AddressSpace::<X86_64>::new(false);
        space.add_module("self", (code.start + BIAS)..(code.end + BIAS), BIAS, &s);
        (space, s, start)
    }

    fn regs(pc: u64) -> Registers {
        Registers {
            pc,
            sp: 0x7fff_0000_0000,
            ..Default::default()
        }
    }

    #[test]
    fn a_return_address_outside_every_mapping_is_never_a_frame() {
        let (mut space, _, f) = space();
        let mut out = Vec::new();
        let o = space.unwind(regs(f + BIAS), &0x1234_5678u64.to_le_bytes(), &mut out);
        assert_eq!(o, Outcome::CutShort(CutShort::OutsideMappings));
        assert_eq!(out, [f + BIAS]);
    }

    #[test]
    fn code_without_tables_is_kept_and_cut_short_for_want_of_tables() {
        let (mut space, _, f) = space();
        space.add_mapping(0x7000_0000..0x7000_1000);
        let mut out = Vec::new();
        let o = space.unwind(regs(f + BIAS), &0x7000_0010u64.to_le_bytes(), &mut out);
        assert_eq!(o, Outcome::CutShort(CutShort::NoUnwindTables));
        assert_eq!(out, [f + BIAS, 0x7000_0010]);
    }

    /// Code a JIT generated has no tables: its frame is unwound by the frame-pointer rule
    /// (saved frame pointer at the frame pointer, return address above it) into the native
    /// caller, and the fallback is counted; a frame pointer below the stack is no frame.
    #[test]
    fn jit_code_is_unwound_by_its_frame_pointer_into_native_code() {
        let (mut space, _, f) = space();
        space.add_jit_code(0x7000_0000..0x7000_1000);
        let caller = f + BIAS + 1;
        let mut stack = vec![0u8; 16];
        stack.extend_from_slice(&0u64.to_le_bytes());
        stack.extend_from_slice(&caller.to_le_bytes());
        let mut r = regs(0x7000_0010);
        r.fp = r.sp + 16;
        let mut out = Vec::new();
        space.unwind(r, &stack, &mut out);
        assert_eq!(out.get(..2), Some(&[0x7000_0010, caller][..]), "{out:x?}");
        assert_eq!(space.take_jit_frames(), 1);
        r.fp = r.sp - 16;
        let mut out = Vec::new();
        let o = space.unwind(r, &stack, &mut out);
        assert_eq!(o, Outcome::CutShort(CutShort::BadFrame));
        assert_eq!(out, [0x7000_0010]);
    }

    #[test]
    fn a_stack_copy_too_small_for_the_return_address_says_so() {
        let (mut space, _, f) = space();
        let mut out = Vec::new();
        let o = space.unwind(regs(f + BIAS), &[0u8; 4], &mut out);
        assert_eq!(o, Outcome::CutShort(CutShort::StackCopyEnded));
        assert_eq!(out, [f + BIAS]);
    }

    /// A sample inside a PLT stub returns to the address at the stack pointer, whatever
    /// (or whether) the linker described the stub in `.eh_frame`.
    #[test]
    fn a_sampled_plt_stub_returns_to_its_caller() {
        let (mut space, s, f) = space();
        let Some(plt) = s.plt.first().cloned() else {
            return;
        };
        let caller = f + BIAS + 1;
        let mut out = Vec::new();
        space.unwind(regs(plt.start + BIAS), &caller.to_le_bytes(), &mut out);
        assert_eq!(out.get(..2), Some(&[plt.start + BIAS, caller][..]));
    }
}
