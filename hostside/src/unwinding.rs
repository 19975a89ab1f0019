//! Stack-copy samples (`rec --call-graph dwarf`) turned into user call chains, so that the
//! CPU analysis treats them exactly like frame-pointer chains.
//!
//! Each module's unwind sections are taken once from the sysroot file the resolver verified
//! (never from a mismatched one: wrong tables give wrong stacks), as ranges of the very map
//! the symbolizer reads (the resolver's file cache), and each process image gets
//! one [`AddressSpace`] with its modules at their load biases. The vDSO's tables come from the
//! copy `rec` recorded.

use std::collections::HashMap;
use std::sync::Arc;

use crossprof_format::{Arch, Sample};
use crossprof_symbols::MatchKind;
use crossprof_unwind::arch::{Aarch64, Arm, Riscv64, X86, X86_64};
use crossprof_unwind::{AddressSpace, Architecture, CutShort, Outcome, Registers, UnwindSections};
use serde::Serialize;

use crate::processes::{ModuleIdx, Processes, SpaceKey};
use crate::resolve::Resolver;
use crate::stack_join::Joiner;

/// How the stack-copy samples unwound; shown in reports so a weak stack is never silent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct UnwindStats {
    /// Samples unwound to the outermost frame.
    pub complete: u64,
    /// Samples whose unwind stopped early (stack copy too short, no unwind info, corrupt):
    /// the sum of `truncated_by`.
    pub truncated: u64,
    /// Why they stopped, by reason.
    pub truncated_by: CutShortCounts,
    /// Samples that carried no usable registers (leaf frame unknown).
    pub no_registers: u64,
    /// Frames found by prologue analysis, a heuristic: 32-bit ARM code without any unwind
    /// table (libgcc's helpers linked into a program), whose instructions were decoded.
    pub prologue_frames: u64,
    /// Frames in JIT code (anonymous executable memory, no unwind tables) unwound by the
    /// frame-pointer rule, a fallback: right where the runtime keeps frame pointers.
    pub jit_frame_pointer_frames: u64,
    /// Frames in code of a sysroot module that no unwind table covers (hand-written assembly
    /// without CFI, stubs, a module without tables) unwound by the return-address or
    /// frame-pointer rule, a fallback: each step landed in executable code and moved up the
    /// stack, but nothing proves it is the real caller. (Modules missing from the sysroot stay
    /// cut short; code generated into deleted files counts as JIT code.)
    pub untabled_frames: u64,
    /// Complete samples whose stack ends where Go's runtime switched stacks
    /// (`runtime.systemstack`, `runtime.mcall`, `runtime.morestack`, `runtime.asmcgocall`):
    /// the goroutine's frames above the switch lie on its own stack, which the sample did not
    /// copy; Go's own profiler ends these stacks there too.
    pub go_stack_switches: u64,
    /// Frames found by stack scanning, a heuristic and the last fallback in code no table
    /// covers (x86_64): the first word up the stack that follows a call instruction in a
    /// module's code, where neither the return-address nor the frame-pointer rule held
    /// (SIMD assembly that uses the frame pointer register for data, generated code that
    /// pushes registers without a frame).
    pub scanned_frames: u64,
    /// Samples whose chain the stack copy cut short, completed from a complete chain of the
    /// same thread through the same two frames at the same stack addresses (see
    /// [`crate::stack_join`]); counted in `complete`, not in `truncated_by`.
    pub joined_stacks: u64,
    /// Modules whose unwind sections could not be read (an unreadable file, a damaged ELF):
    /// stacks are cut short in them.
    pub sections_failed: u64,
    /// CFI entries that did not parse and were skipped, in the modules read: the code they
    /// describe unwinds as code without unwind info.
    pub cfi_entries_skipped: u64,
}

/// Cut-short unwinds by reason (see [`CutShort`]); the JSON keys are [`CutShort::name`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CutShortCounts {
    /// The stack copy ended: `rec --call-graph dwarf=SIZE` was too small for the stack.
    pub stack_copy_ended: u64,
    /// A module's unwind tables were missing (not in the sysroot, or mismatched).
    pub no_unwind_tables: u64,
    /// Code the tables do not cover (assembly without CFI, linker stubs).
    pub no_unwind_info: u64,
    /// A return address outside every executable mapping (never shown as a frame).
    pub outside_mappings: u64,
    /// A rule led nowhere (corrupt stack or tables).
    pub bad_frame: u64,
    /// More frames than the limit.
    pub too_deep: u64,
}

impl CutShortCounts {
    /// The counter of one reason.
    pub fn get_mut(&mut self, why: CutShort) -> &mut u64 {
        match why {
            CutShort::StackCopyEnded => &mut self.stack_copy_ended,
            CutShort::NoUnwindTables => &mut self.no_unwind_tables,
            CutShort::NoUnwindInfo => &mut self.no_unwind_info,
            CutShort::OutsideMappings => &mut self.outside_mappings,
            CutShort::BadFrame => &mut self.bad_frame,
            CutShort::TooDeep => &mut self.too_deep,
        }
    }

    /// The count of one reason.
    pub fn get(&self, why: CutShort) -> u64 {
        match why {
            CutShort::StackCopyEnded => self.stack_copy_ended,
            CutShort::NoUnwindTables => self.no_unwind_tables,
            CutShort::NoUnwindInfo => self.no_unwind_info,
            CutShort::OutsideMappings => self.outside_mappings,
            CutShort::BadFrame => self.bad_frame,
            CutShort::TooDeep => self.too_deep,
        }
    }
}

impl UnwindStats {
    /// Each count of `self` and `other` combined by `f`: the one place that lists them all.
    fn zip(&self, other: &UnwindStats, f: impl Fn(u64, u64) -> u64) -> UnwindStats {
        let (a, b) = (&self.truncated_by, &other.truncated_by);
        UnwindStats {
            complete: f(self.complete, other.complete),
            truncated: f(self.truncated, other.truncated),
            truncated_by: CutShortCounts {
                stack_copy_ended: f(a.stack_copy_ended, b.stack_copy_ended),
                no_unwind_tables: f(a.no_unwind_tables, b.no_unwind_tables),
                no_unwind_info: f(a.no_unwind_info, b.no_unwind_info),
                outside_mappings: f(a.outside_mappings, b.outside_mappings),
                bad_frame: f(a.bad_frame, b.bad_frame),
                too_deep: f(a.too_deep, b.too_deep),
            },
            no_registers: f(self.no_registers, other.no_registers),
            prologue_frames: f(self.prologue_frames, other.prologue_frames),
            jit_frame_pointer_frames: f(
                self.jit_frame_pointer_frames,
                other.jit_frame_pointer_frames,
            ),
            untabled_frames: f(self.untabled_frames, other.untabled_frames),
            go_stack_switches: f(self.go_stack_switches, other.go_stack_switches),
            scanned_frames: f(self.scanned_frames, other.scanned_frames),
            joined_stacks: f(self.joined_stacks, other.joined_stacks),
            sections_failed: f(self.sections_failed, other.sections_failed),
            cfi_entries_skipped: f(self.cfi_entries_skipped, other.cfi_entries_skipped),
        }
    }

    /// What was counted since `before` (an earlier copy of these counts): one sample's share,
    /// which every profile that takes the sample adds to its own statistics.
    pub fn since(&self, before: &UnwindStats) -> UnwindStats {
        self.zip(before, u64::saturating_sub)
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &UnwindStats) {
        *self = self.zip(other, u64::saturating_add);
    }

    /// Samples that carried a stack copy.
    pub fn total(&self) -> u64 {
        self.complete + self.truncated + self.no_registers
    }

    /// Counts one unwind's outcome.
    pub fn count(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Complete => self.complete += 1,
            Outcome::CutShort(why) => {
                self.truncated += 1;
                *self.truncated_by.get_mut(why) += 1;
            }
        }
    }
}

/// The architecture-independent half of the unwinder: where modules come from, and each
/// module's unwind sections, read once.
struct Modules<'a> {
    processes: &'a Processes,
    resolver: &'a Resolver,
    sections: HashMap<ModuleIdx, Option<Arc<UnwindSections>>>,
    /// Why a module's unwind sections could not be read, one message per module.
    errors: Vec<String>,
    /// CFI entries skipped in the modules read so far.
    cfi_skipped: u64,
}

impl Modules<'_> {
    fn sections(&mut self, module: ModuleIdx) -> Option<Arc<UnwindSections>> {
        if let Some(s) = self.sections.get(&module) {
            return s.clone();
        }
        let loaded = match self.load_sections(module) {
            Ok(s) => s.map(Arc::new),
            Err(e) => {
                self.errors.push(e);
                None
            }
        };
        if let Some(s) = &loaded {
            self.cfi_skipped += s.skipped_cfi_entries();
        }
        self.sections.insert(module, loaded.clone());
        loaded
    }

    /// The module's unwind sections; `Ok(None)` when it has none to read here (not found,
    /// mismatched, no image), an error naming the file when they could not be read.
    fn load_sections(&self, module: ModuleIdx) -> Result<Option<UnwindSections>, String> {
        let Some(key) = self.processes.modules.get(module) else {
            return Ok(None);
        };
        if key.path == "[vdso]" {
            let Some(blob) = self.processes.vdso.as_ref() else {
                return Ok(None);
            };
            return UnwindSections::from_elf(&blob.data, None)
                .map(Some)
                .map_err(|e| format!("[vdso]: {e}"));
        }
        let Some(located) = self.resolver.located(module) else {
            return Ok(None);
        };
        if matches!(located.match_kind, MatchKind::Mismatch | MatchKind::Missing) {
            return Ok(None);
        }
        let Some(image_path) = located.image.as_ref() else {
            return Ok(None);
        };
        // The files the symbolizer maps: no second read of an image or a debug file.
        let image = self.resolver.map_file(image_path)?;
        let debug = match located
            .debug_file
            .as_ref()
            .filter(|d| Some(*d) != located.image.as_ref())
        {
            Some(d) => Some(self.resolver.map_file(d)?),
            None => None,
        };
        UnwindSections::from_files(&image, debug.as_ref())
            .map(Some)
            .map_err(|e| format!("{}: {e}", image_path.display()))
    }

    /// A new address space for process image `key`, with its modules at their load biases.
    fn build_space<A: Architecture>(&mut self, key: SpaceKey, big_endian: bool) -> AddressSpace<A> {
        let mut space = AddressSpace::<A>::new(big_endian);
        // One entry per module: its whole executable range, biased by its lowest mapping.
        // Every listed mapping is executable, so the bias comes from the executable segment
        // (see `UnwindSections::bias`).
        let mappings = self.processes.mappings(key);
        let mut ranges: HashMap<ModuleIdx, (u64, u64, u64, u64)> = HashMap::new();
        for m in &mappings {
            let e = ranges
                .entry(m.module)
                .or_insert((m.start, m.end, m.start, m.pgoff));
            if m.start < e.2 {
                e.2 = m.start;
                e.3 = m.pgoff;
            }
            e.0 = e.0.min(m.start);
            e.1 = e.1.max(m.end);
        }
        let mut ranges: Vec<_> = ranges.into_iter().collect();
        ranges.sort_by_key(|&(module, r)| (r.0, module));
        for (module, (start, end, first, pgoff)) in ranges {
            let placed = self
                .sections(module)
                .and_then(|s| s.bias(first, pgoff, true).map(|bias| (s, bias)));
            match placed {
                Some((sections, bias)) => {
                    let name = &self.processes.modules[module].path;
                    space.add_module(name, start..end, bias, &sections);
                }
                // Code without tables still is code: a stack ending there is cut short for
                // want of tables, not dropped as garbage. Code generated into a file that is
                // gone (GStreamer's ORC writes its programs to a temporary file it deletes at
                // once, memfd JITs) has no tables anywhere: it is JIT code.
                None => {
                    let generated = is_generated_code(&self.processes.modules[module].path);
                    for m in mappings.iter().filter(|m| m.module == module) {
                        if generated {
                            space.add_jit_code(m.start..m.end);
                        } else {
                            space.add_mapping(m.start..m.end);
                        }
                    }
                }
            }
        }
        for &(start, end) in self.processes.anonymous_code(key) {
            space.add_jit_code(start..end);
        }
        space
    }
}

/// Whether a mapped file's path says its code was generated at run time: a file deleted
/// after mapping (`/tmp/orcexec.XXXXXX (deleted)`) or a memfd (`/memfd:name`), which no
/// sysroot can hold.
fn is_generated_code(path: &str) -> bool {
    path.ends_with(" (deleted)") || path.starts_with("/memfd:")
}

/// The address spaces of one architecture: the unwinding monomorphized over `A`.
struct Spaces<A: Architecture> {
    big_endian: bool,
    spaces: HashMap<SpaceKey, AddressSpace<A>>,
    joiner: Joiner,
}

/// What [`StackUnwinder`] asks of its architecture's [`Spaces`], once per sample.
trait ArchSpaces {
    fn pc(&self, s: &Sample) -> Option<u64>;
    fn unwind_regs(
        &mut self,
        modules: &mut Modules<'_>,
        key: SpaceKey,
        regs: Registers,
        stack: &[u8],
    ) -> (Vec<u64>, Outcome);
    fn user_chain(
        &mut self,
        modules: &mut Modules<'_>,
        key: SpaceKey,
        s: &Sample,
        stats: &mut UnwindStats,
    ) -> Vec<u64>;
}

impl<A: Architecture> ArchSpaces for Spaces<A> {
    fn pc(&self, s: &Sample) -> Option<u64> {
        Registers::from_sample::<A>(s.regs_mask, &s.regs).map(|r| r.pc)
    }

    fn unwind_regs(
        &mut self,
        modules: &mut Modules<'_>,
        key: SpaceKey,
        regs: Registers,
        stack: &[u8],
    ) -> (Vec<u64>, Outcome) {
        let big_endian = self.big_endian;
        let space = self
            .spaces
            .entry(key)
            .or_insert_with(|| modules.build_space::<A>(key, big_endian));
        let mut out = Vec::new();
        let outcome = space.unwind(regs, stack, &mut out);
        // Heuristic frames are not counted here: the caller counts the outcome.
        let _ = (
            space.take_prologue_frames(),
            space.take_jit_frames(),
            space.take_untabled_frames(),
            space.take_go_switches(),
            space.take_scanned_frames(),
        );
        (out, outcome)
    }

    fn user_chain(
        &mut self,
        modules: &mut Modules<'_>,
        key: SpaceKey,
        s: &Sample,
        stats: &mut UnwindStats,
    ) -> Vec<u64> {
        let Some(regs) = Registers::from_sample::<A>(s.regs_mask, &s.regs) else {
            stats.no_registers += 1;
            return Vec::new();
        };
        let big_endian = self.big_endian;
        let space = self
            .spaces
            .entry(key)
            .or_insert_with(|| modules.build_space::<A>(key, big_endian));
        let mut out = Vec::new();
        let mut outcome = space.unwind(regs, &s.stack, &mut out);
        match outcome {
            Outcome::Complete => self.joiner.remember(key, s.tid, &out, space.frame_sps()),
            Outcome::CutShort(CutShort::StackCopyEnded) => {
                let mut sps = space.frame_sps().to_vec();
                if self.joiner.join(key, s.tid, &mut out, &mut sps) {
                    stats.joined_stacks += 1;
                    outcome = Outcome::Complete;
                    self.joiner.remember(key, s.tid, &out, &sps);
                }
            }
            Outcome::CutShort(_) => {}
        }
        stats.prologue_frames += space.take_prologue_frames();
        stats.jit_frame_pointer_frames += space.take_jit_frames();
        stats.untabled_frames += space.take_untabled_frames();
        stats.go_stack_switches += space.take_go_switches();
        stats.scanned_frames += space.take_scanned_frames();
        stats.count(outcome);
        out
    }
}

/// Unwinds the stack-copy samples of one recording. The architecture is chosen once, here,
/// from the header; every sample then goes to the unwinder built for it.
pub struct StackUnwinder<'a> {
    modules: Modules<'a>,
    spaces: Box<dyn ArchSpaces>,
    /// Outcomes so far.
    pub stats: UnwindStats,
}

impl<'a> StackUnwinder<'a> {
    /// An unwinder for a recording of `arch`.
    pub fn new(
        processes: &'a Processes,
        resolver: &'a Resolver,
        arch: Arch,
        big_endian: bool,
    ) -> Self {
        fn spaces<A: Architecture>(big_endian: bool) -> Box<dyn ArchSpaces> {
            Box::new(Spaces::<A> {
                big_endian,
                spaces: HashMap::new(),
                joiner: Joiner::default(),
            })
        }
        let spaces = match arch {
            Arch::X86_64 => spaces::<X86_64>(big_endian),
            Arch::X86 => spaces::<X86>(big_endian),
            Arch::Aarch64 => spaces::<Aarch64>(big_endian),
            Arch::Arm => spaces::<Arm>(big_endian),
            Arch::Riscv64 => spaces::<Riscv64>(big_endian),
        };
        StackUnwinder {
            modules: Modules {
                processes,
                resolver,
                sections: HashMap::new(),
                errors: Vec::new(),
                cfi_skipped: 0,
            },
            spaces,
            stats: UnwindStats::default(),
        }
    }

    /// The user instruction pointer of a stack-copy sample, if its registers hold one.
    pub fn pc(&self, s: &Sample) -> Option<u64> {
        self.spaces.pc(s)
    }

    /// The user call chain of a stack-copy sample in address space `key`, innermost first
    /// (instruction pointer, then return addresses).
    pub fn user_chain(&mut self, key: SpaceKey, s: &Sample) -> Vec<u64> {
        let chain = self
            .spaces
            .user_chain(&mut self.modules, key, s, &mut self.stats);
        self.stats.sections_failed = self.modules.errors.len() as u64;
        self.stats.cfi_entries_skipped = self.modules.cfi_skipped;
        chain
    }

    /// Unwinds a stack image (the bytes from `regs.sp` upward) of address space `key` from
    /// `regs`: the frames, innermost first, and how the unwind ended. For stacks recorded as
    /// registers and stack words rather than frames (ARMv7 heap stacks); the outcome is left
    /// to the caller to count.
    pub fn unwind_image(
        &mut self,
        key: SpaceKey,
        regs: Registers,
        stack: &[u8],
    ) -> (Vec<u64>, Outcome) {
        let r = self.spaces.unwind_regs(&mut self.modules, key, regs, stack);
        self.stats.sections_failed = self.modules.errors.len() as u64;
        self.stats.cfi_entries_skipped = self.modules.cfi_skipped;
        r
    }

    /// Why modules' unwind sections could not be read (each message names the file); their
    /// stacks are cut short there.
    pub fn section_errors(&self) -> &[String] {
        &self.modules.errors
    }
}
