//! framehop-based capture for x86_64 and aarch64 (see the parent module for why).
//!
//! The unwinder and its rule cache live behind the interposer's global lock; capture happens
//! with that lock held, so one cache serves every thread. Stack reads are limited to
//! `[sp, stack top)` of the current thread: a corrupt rule ends the stack, never faults.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ops::{Deref, Range};

use crossprof_heap_wire::cut_short;
use framehop::{ExplicitModuleSectionInfo, Module, MustNotAllocateDuringUnwind, Unwinder};

#[cfg(target_arch = "aarch64")]
use framehop::aarch64::{CacheAarch64 as Cache, UnwindRegsAarch64, UnwinderAarch64 as Unw};
#[cfg(target_arch = "x86_64")]
use framehop::x86_64::{CacheX86_64 as Cache, UnwindRegsX86_64, UnwinderX86_64 as Unw};

use super::modules;
use super::Tap;

/// Whether the unwinder's read of `addr` succeeds for a thread at `sp` with stack `bounds`:
/// an aligned word inside `[max(sp, stack bottom), stack top)`.
fn readable(addr: u64, sp: u64, bounds: (usize, usize)) -> bool {
    let (lo, hi) = (sp.max(bounds.0 as u64), bounds.1 as u64);
    addr >= lo && addr.checked_add(8).is_some_and(|e| e <= hi) && addr & 7 == 0
}

/// Bytes of a loaded module, in place (the module stays mapped while it is in the list; a
/// module unloaded by `dlclose` is dropped at the next rescan).
#[derive(Clone, Copy)]
pub struct Mem {
    ptr: *const u8,
    len: usize,
}

impl Default for Mem {
    fn default() -> Mem {
        Mem {
            ptr: core::ptr::NonNull::<u8>::dangling().as_ptr(),
            len: 0,
        }
    }
}

impl Deref for Mem {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr/len describe memory of a loaded module (see the type's docs).
        unsafe { core::slice::from_raw_parts(self.ptr, self.len) }
    }
}

type Unwind = Unw<Mem, MustNotAllocateDuringUnwind>;

/// The unwinder state: modules, rule cache, and the ranges to tell known from unknown code.
pub struct Modules {
    unwinder: Unwind,
    cache: Box<Cache<MustNotAllocateDuringUnwind>>,
    ranges: Vec<Range<u64>>,
    /// The interposer's own code: its frames are skipped.
    pub own: Range<u64>,
    /// The modules it was built from.
    pub loaded: Vec<modules::Loaded>,
}

/// Builds the module list from `dl_iterate_phdr` (takes the loader's lock: never from inside
/// an allocation, see `crate::record`).
pub fn rescan() -> Modules {
    build(modules::loaded())
}

/// Builds the unwinder for `loaded` (allocates from the interposer's arena).
pub fn build(loaded: Vec<modules::Loaded>) -> Modules {
    let mut unwinder = Unwind::new();
    let mut ranges = Vec::new();
    let me = rescan as fn() -> Modules as usize as u64;
    let mut own = 0..0;
    for m in loaded.iter() {
        if m.range.contains(&me) {
            own = m.range.clone();
        }
        ranges.push(m.range.clone());
        let mut info = ExplicitModuleSectionInfo::<Mem> {
            base_svma: 0,
            ..Default::default()
        };
        if let (Some((ha, hl)), Some((fa, fl))) = (m.eh_frame_hdr, m.eh_frame) {
            info.eh_frame_hdr_svma = Some(ha - m.bias..ha - m.bias + hl);
            info.eh_frame_hdr = Some(Mem {
                ptr: ha as *const u8,
                len: hl as usize,
            });
            info.eh_frame_svma = Some(fa - m.bias..fa - m.bias + fl);
            info.eh_frame = Some(Mem {
                ptr: fa as *const u8,
                len: fl as usize,
            });
        }
        unwinder.add_module(Module::new(String::new(), m.range.clone(), m.bias, info));
    }
    ranges.sort_by_key(|r| r.start);
    Modules {
        unwinder,
        cache: Box::new(Cache::new_in()),
        ranges,
        own,
        loaded,
    }
}

impl Modules {
    /// Whether `ip` lies in a known module.
    pub fn known(&self, ip: u64) -> bool {
        let i = self.ranges.partition_point(|r| r.start <= ip);
        i > 0 && self.ranges[i - 1].contains(&ip)
    }
}

/// Captures the calling thread's stack into `out` (innermost first, the interposer's frames
/// skipped); returns the frame count, the first address outside every known module met
/// (then the module list may be stale) and, when the unwind stopped before the outermost
/// frame, why (a [`crossprof_heap_wire::cut_short`] marker). Every stack word read goes through `tap`, which
/// sees the address and what was read and returns what the unwinder gets.
#[inline(never)]
pub fn capture(
    m: &mut Modules,
    out: &mut [u64],
    bounds: (usize, usize),
    start: [u64; 4],
    mut tap: Option<Tap<'_>>,
) -> (usize, Option<u64>, Option<u64>) {
    // From the hook's entry registers when the hook took them, else from here.
    let (pc, sp, fp, lr) = if start[0] != 0 && start[1] != 0 {
        (start[0], start[1], start[2], start[3])
    } else {
        registers()
    };
    let mut read = |addr: u64| -> Result<u64, ()> {
        let got = if readable(addr, sp, bounds) {
            // SAFETY: addr is an aligned word inside this thread's live stack (checked above).
            Ok(unsafe { *(addr as *const u64) })
        } else {
            Err(())
        };
        match tap.as_deref_mut() {
            Some(t) => t(addr, got),
            None => got,
        }
    };
    #[cfg(target_arch = "x86_64")]
    let regs = {
        let _ = lr;
        UnwindRegsX86_64::new(pc, sp, fp)
    };
    #[cfg(target_arch = "aarch64")]
    let regs = UnwindRegsAarch64::new(lr, sp, fp);
    let mut it = m.unwinder.iter_frames(pc, regs, &mut m.cache, &mut read);
    let mut n = 0;
    let mut cut = None;
    let own = m.own.clone();
    loop {
        let next = match it.next() {
            Ok(Some(next)) => next,
            // The outermost frame, or a null return address: how frame chains end.
            Ok(None) | Err(framehop::Error::ReturnAddressIsNull) => break,
            Err(framehop::Error::CouldNotReadStack(_)) => {
                cut = Some(cut_short::STACK_UNREADABLE);
                break;
            }
            Err(_) => {
                cut = Some(cut_short::BAD_FRAME);
                break;
            }
        };
        let ip = next.address();
        if let framehop::FrameAddress::InstructionPointer(_) = next {
            continue; // inside `capture` itself
        }
        if own.contains(&ip) {
            continue;
        }
        if n >= out.len() {
            cut = Some(cut_short::TOO_DEEP);
            break;
        }
        out[n] = ip;
        n += 1;
    }
    let unknown = out[..n].iter().copied().find(|&ip| !m.known(ip));
    (n, unknown, cut)
}

/// The current pc, sp, frame pointer and link register (link register only on aarch64).
#[inline(always)]
pub(crate) fn registers() -> (u64, u64, u64, u64) {
    let (pc, sp, fp, lr): (u64, u64, u64, u64);
    // SAFETY: reads registers only.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::asm!(
            "lea {pc}, [rip]",
            "mov {sp}, rsp",
            "mov {fp}, rbp",
            pc = out(reg) pc, sp = out(reg) sp, fp = out(reg) fp,
            options(nomem, nostack, preserves_flags)
        );
        lr = 0;
    }
    // SAFETY: reads registers only.
    #[cfg(target_arch = "aarch64")]
    unsafe {
        core::arch::asm!(
            "adr {pc}, .",
            "mov {sp}, sp",
            "mov {fp}, x29",
            "mov {lr}, x30",
            pc = out(reg) pc, sp = out(reg) sp, fp = out(reg) fp, lr = out(reg) lr,
            options(nomem, nostack, preserves_flags)
        );
    }
    (pc, sp, fp, lr)
}
