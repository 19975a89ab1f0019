//! One process image's modules and the unwinder over them.

use std::ops::Range;
use std::sync::Arc;

use crossprof_format::Arch;
use framehop::aarch64::{CacheAarch64, PtrAuthMask, UnwindRegsAarch64, UnwinderAarch64};
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder};

use crate::regs::Registers;
use crate::sections::UnwindSections;

/// Unwinding stops after this many frames: deep recursion is still shown this deep, and a
/// corrupt stack cannot make a sample cost unbounded time or memory.
pub const MAX_FRAMES: usize = 1024;

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
    Other,
}

/// The modules of one process image (one exec of one process) and a rule cache.
pub struct AddressSpace {
    inner: Inner,
    big_endian: bool,
    max_avma: u64,
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
            _ => Inner::Other,
        };
        AddressSpace {
            inner,
            big_endian,
            max_avma: 0,
        }
    }

    /// Adds a module mapped at `avma` (its executable range on the board) with load `bias`.
    pub fn add_module(&mut self, name: &str, avma: Range<u64>, bias: u64, s: &UnwindSections) {
        self.max_avma = self.max_avma.max(avma.end);
        match &mut self.inner {
            Inner::X86_64(u, _) => {
                u.add_module(Module::new(name.to_string(), avma, bias, section_info(s)))
            }
            Inner::Aarch64(u, _) => {
                u.add_module(Module::new(name.to_string(), avma, bias, section_info(s)))
            }
            Inner::Other => {}
        }
    }

    /// Unwinds one sample: appends the instruction pointer and then each return address to
    /// `out`, innermost first. `stack` holds the bytes from `regs.sp` upward.
    pub fn unwind(&mut self, regs: Registers, stack: &[u8], out: &mut Vec<u64>) -> Outcome {
        let big_endian = self.big_endian;
        let mut read = |addr: u64| -> Result<u64, ()> {
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
        match &mut self.inner {
            Inner::X86_64(u, cache) => {
                let r = UnwindRegsX86_64::new(regs.pc, regs.sp, regs.fp);
                collect(u.iter_frames(regs.pc, r, cache, &mut read), out)
            }
            Inner::Aarch64(u, cache) => {
                let mask = PtrAuthMask::from_max_known_address(self.max_avma);
                let r = UnwindRegsAarch64::new_with_ptr_auth_mask(mask, regs.lr, regs.sp, regs.fp);
                collect(u.iter_frames(regs.pc, r, cache, &mut read), out)
            }
            Inner::Other => {
                out.push(regs.pc);
                Outcome::Unsupported
            }
        }
    }
}

fn collect<U, F>(mut it: framehop::UnwindIterator<'_, '_, '_, U, F>, out: &mut Vec<u64>) -> Outcome
where
    U: Unwinder,
    F: FnMut(u64) -> Result<u64, ()>,
{
    let start = out.len();
    loop {
        match it.next() {
            Ok(Some(frame)) => {
                out.push(frame.address());
                if out.len() - start >= MAX_FRAMES {
                    return Outcome::Truncated;
                }
            }
            Ok(None) => return Outcome::Complete,
            Err(_) => return Outcome::Truncated,
        }
    }
}
