//! framehop-based capture for x86_64 and aarch64 (see the parent module for why).
//!
//! The unwinder, its rule caches and the last unwind (see [`super::splice`]) live behind the
//! interposer's global lock; capture happens with that lock held, so they serve every thread.
//! The unwind goes frame by frame (framehop's `unwind_frame`), so that each frame can pick its
//! rule cache ([`CACHES`]) and the unwind can stop where it meets the last one. Stack reads
//! are limited to `[sp, stack top)` of the current thread: a corrupt rule ends the stack,
//! never faults.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::cell::Cell;
use core::ops::{Deref, Range};

use crossprof_heap_wire::cut_short;
use framehop::{
    ExplicitModuleSectionInfo, FrameAddress, Module, MustNotAllocateDuringUnwind, Unwinder,
};

#[cfg(target_arch = "aarch64")]
use framehop::aarch64::{CacheAarch64 as Cache, UnwindRegsAarch64, UnwinderAarch64 as Unw};
#[cfg(target_arch = "x86_64")]
use framehop::x86_64::{CacheX86_64 as Cache, UnwindRegsX86_64, UnwinderX86_64 as Unw};

use super::plan;
#[cfg(target_arch = "x86_64")]
use super::plan::Plans;
use super::splice::{self, Fresh, Trace};
use super::{modules, Start, Tap};

/// What an unwind step depends on among the registers (see [`splice::Regs`]).
#[cfg(target_arch = "x86_64")]
fn key(r: &UnwindRegsX86_64) -> splice::Regs {
    [r.ip(), r.sp(), r.bp()]
}

/// What an unwind step depends on among the registers (see [`splice::Regs`]).
#[cfg(target_arch = "aarch64")]
fn key(r: &UnwindRegsAarch64) -> splice::Regs {
    [r.lr(), r.sp(), r.fp()]
}

/// How many framehop rule caches serve the unwinds, each frame address always the same one:
/// one cache holds 509 rules in a direct-mapped table, which C++ programs' many distinct
/// return addresses thrash (each miss parses the CFI again); 16 give 8,144 slots. Memory:
/// about 12 KiB of rules and a 25 KiB CFI evaluation context (gimli's fixed-size rows) per
/// cache, about 0.6 MiB in all, allocated with the module list.
pub const CACHES: usize = 16;

/// Counters of the unwinds, for measurement (`CROSSPROF_HEAP_STATS`).
#[derive(Clone, Copy, Default, Debug)]
pub struct Stats {
    /// Frames unwound with a rule.
    pub unwound: u64,
    /// Unwinds that continued as the previous one from a frame where they met.
    pub spliced: u64,
    /// Frames taken from the previous unwind.
    pub spliced_frames: u64,
    /// Stack words compared to find out whether an unwind could continue as the previous.
    pub checked: u64,
    /// Of the frames unwound, those stepped by a learned plan (see [`super::plan`]).
    pub planned: u64,
}

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
    caches: Box<[Cache<MustNotAllocateDuringUnwind>; CACHES]>,
    /// The return addresses' learned plans (x86_64, see [`super::plan`]).
    #[cfg(target_arch = "x86_64")]
    plans: Plans,
    /// Whether frames are stepped by plans: unless `CROSSPROF_HEAP_PLANS=0` (for the test
    /// that compares the stacks both ways).
    #[cfg(target_arch = "x86_64")]
    plans_on: bool,
    /// The last unwind and the one being made (see [`splice`]).
    trace: Box<Trace>,
    fresh: Box<Fresh>,
    ranges: Vec<Range<u64>>,
    /// The range of the last address found known (see `known_in`).
    hint: Cell<usize>,
    /// Counters.
    pub stats: Stats,
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
        caches: Box::new(core::array::from_fn(|_| Cache::new_in())),
        #[cfg(target_arch = "x86_64")]
        plans: Plans::new(),
        #[cfg(target_arch = "x86_64")]
        plans_on: crate::sys::env("CROSSPROF_HEAP_PLANS").is_none_or(|v| v != b"0"),
        trace: Box::new(Trace::new()),
        fresh: Box::new(Fresh::new()),
        ranges,
        hint: Cell::new(0),
        stats: Stats::default(),
        own,
        loaded,
    }
}

impl Modules {
    /// Whether `ip` lies in a known module.
    pub fn known(&self, ip: u64) -> bool {
        known_in(&self.ranges, &self.hint, ip)
    }

    /// The rule caches' hits and misses, summed.
    pub fn rule_cache_stats(&self) -> (u64, u64) {
        self.caches.iter().fold((0, 0), |(h, m), c| {
            let s = c.stats();
            (h + s.hits(), m + s.misses())
        })
    }
}

/// Whether `ip` lies in one of `ranges` (sorted by start); `hint` is the index of the range
/// that held the last address found (consecutive frames mostly lie in the same module).
fn known_in(ranges: &[Range<u64>], hint: &Cell<usize>, ip: u64) -> bool {
    if ranges.get(hint.get()).is_some_and(|r| r.contains(&ip)) {
        return true;
    }
    let i = ranges.partition_point(|r| r.start <= ip);
    let found = i > 0 && ranges[i - 1].contains(&ip);
    if found {
        hint.set(i - 1);
    }
    found
}

/// Captures the calling thread's stack into `out` (innermost first, the interposer's frames
/// skipped); returns the frame count, the first address outside every known module met
/// (then the module list may be stale) and, when the unwind stopped before the outermost
/// frame, why (a [`crossprof_heap_wire::cut_short`] marker). Every stack word read goes through `tap`, which
/// sees the address and what was read and returns what the unwinder gets. With `splice`
/// (only when `tap` returns what it is given), the unwind continues as the previous one did
/// from the first frame where the two meet (see [`super::splice`]) and is remembered for the
/// next.
#[inline(never)]
pub fn capture(
    m: &mut Modules,
    out: &mut [u64],
    from: &Start,
    mut tap: Option<Tap<'_>>,
) -> (usize, Option<u64>, Option<u64>) {
    let (bounds, start, splice) = (from.bounds, from.regs, from.splice);
    // From the hook's entry registers when the hook took them, else from here.
    let (pc, sp, fp, lr) = if start[0] != 0 && start[1] != 0 {
        (start[0], start[1], start[2], start[3])
    } else {
        registers()
    };
    let raw = |addr: u64| -> Result<u64, ()> {
        if readable(addr, sp, bounds) {
            // SAFETY: addr is an aligned word inside this thread's live stack (checked above).
            Ok(unsafe { *(addr as *const u64) })
        } else {
            Err(())
        }
    };
    #[cfg(target_arch = "x86_64")]
    let mut regs = {
        let _ = lr;
        UnwindRegsX86_64::new(pc, sp, fp)
    };
    #[cfg(target_arch = "aarch64")]
    let mut regs = UnwindRegsAarch64::new(lr, sp, fp);
    let (trace, fresh) = (&mut *m.trace, &mut *m.fresh);
    fresh.start();
    let mut finder = splice::Finder::new(trace, bounds);
    let mut cut = None;
    let own = m.own.clone();
    let mut frames = Frames {
        out,
        n: 0,
        unknown: None,
        own: own.clone(),
    };
    let (ranges, hint) = (&m.ranges, &m.hint);
    let mut addr = FrameAddress::from_instruction_pointer(pc);
    // Where the unwind met the trace, and whether it ran to its end.
    let mut met = None;
    let mut whole = true;
    loop {
        let at = addr.address();
        let is_return = matches!(addr, FrameAddress::ReturnAddress(_));
        let state = key(&regs);
        if splice && is_return {
            if let Some(p) = finder.find(trace, sp, at, state, &raw) {
                m.stats.spliced += 1;
                met = Some(p);
                if let Some(t) = tap.as_deref_mut() {
                    trace.reads_from(p, |a, got| {
                        let _ = t(a, got);
                    });
                }
                cut = trace.end();
                m.stats.spliced_frames += p as u64 + 1;
                frames.splice(trace, p, &mut cut);
                break;
            }
        }
        // Unknown code is told only of return addresses: the first frame is the capture's.
        let foreign_at = || is_return && !known_in(ranges, hint, at);
        #[cfg(target_arch = "x86_64")]
        let planned = m.plans_on.then(|| {
            let (unwinder, caches) = (&m.unwinder, &mut m.caches);
            let key = if is_return { at } else { at | plan::FIRST };
            m.plans.get(key, || {
                plan::learn(at, foreign_at(), own.contains(&at), |[ip, sp, bp], read| {
                    let mut r = UnwindRegsX86_64::new(ip, sp, bp);
                    let frame = if is_return {
                        FrameAddress::from_return_address(ip)
                    } else {
                        Some(FrameAddress::from_instruction_pointer(ip))
                    };
                    let got = frame.ok_or(()).and_then(|f| {
                        unwinder
                            .unwind_frame(f, &mut r, &mut caches[cache_of(ip)], &mut |a| read(a))
                            .map_err(|_| ())
                    });
                    (got, r.sp(), r.bp())
                })
            })
        });
        #[cfg(not(target_arch = "x86_64"))]
        let planned: Option<plan::Plan> = None;
        let (foreign, own_frame) = match planned {
            Some(p) => (p.foreign(), p.own()),
            None => (foreign_at(), own.contains(&at)),
        };
        // The first frame (an instruction pointer) is never met again as a return address:
        // neither it nor the words its step reads are remembered.
        let remember = splice && is_return;
        if remember {
            fresh.step(at, foreign, own_frame, state);
        }
        // The first frame is inside `capture` itself (or the hook's entry): not a caller.
        if is_return && !frames.push(at, foreign, &mut cut) {
            whole = false;
            break;
        }
        #[cfg(target_arch = "x86_64")]
        if let (Some(p), None) = (planned, tap.as_deref()) {
            let readable = |a: u64| readable(a, sp, bounds);
            // SAFETY: `step` reads only words `readable` allows: inside this thread's live stack.
            let read = |a: u64| unsafe { *(a as *const u64) };
            if let Some(s) = p.step(regs.sp(), regs.bp(), readable, read) {
                if remember {
                    if s.bp_at != 0 {
                        fresh.read(s.bp_at, Ok(s.bp));
                    }
                    fresh.read(s.ra_at, Ok(s.ra));
                }
                regs.set_ip(s.ra);
                regs.set_sp(s.sp);
                regs.set_bp(s.bp);
                m.stats.unwound += 1;
                m.stats.planned += 1;
                // `step` never gives a return address of 0.
                let Some(next) = FrameAddress::from_return_address(s.ra) else {
                    break;
                };
                addr = next;
                continue;
            }
        }
        let cache = &mut m.caches[cache_of(at)];
        let mut read = |a: u64| -> Result<u64, ()> {
            let got = raw(a);
            let got = match tap.as_deref_mut() {
                Some(t) => t(a, got),
                None => got,
            };
            if remember {
                fresh.read(a, got);
            }
            got
        };
        let next = m.unwinder.unwind_frame(addr, &mut regs, cache, &mut read);
        m.stats.unwound += 1;
        let next = match next {
            Ok(Some(ra)) => FrameAddress::from_return_address(ra),
            Ok(None) => None,
            Err(framehop::Error::CouldNotReadStack(_)) => {
                cut = Some(cut_short::STACK_UNREADABLE);
                None
            }
            Err(_) => {
                cut = Some(cut_short::BAD_FRAME);
                None
            }
        };
        match next {
            Some(next) => addr = next,
            // The outermost frame, or a null return address: how frame chains end.
            None => break,
        }
    }
    if splice && whole {
        trace.keep(fresh, bounds, met, cut);
    }
    m.stats.checked += finder.checked;
    (frames.n, frames.unknown, cut)
}

/// The frames of an unwind as they are put into the caller's buffer.
struct Frames<'a> {
    out: &'a mut [u64],
    n: usize,
    /// The first frame outside every known module.
    unknown: Option<u64>,
    /// The interposer's own code, whose frames are left out.
    own: Range<u64>,
}

impl Frames<'_> {
    /// Puts a frame into `out` unless it is the interposer's own; false (and `cut` says
    /// so) when `out` is full.
    fn push(&mut self, ip: u64, foreign: bool, cut: &mut Option<u64>) -> bool {
        if self.own.contains(&ip) {
            return true;
        }
        let Some(slot) = self.out.get_mut(self.n) else {
            *cut = Some(cut_short::TOO_DEEP);
            return false;
        };
        if foreign && self.unknown.is_none() {
            self.unknown = Some(ip);
        }
        *slot = ip;
        self.n += 1;
        true
    }

    /// Puts the frames of `trace` from frame `p` outwards: mostly each is plain, and they
    /// go in one copy; else each goes through [`Frames::push`].
    fn splice(&mut self, trace: &splice::Trace, p: usize, cut: &mut Option<u64>) {
        let room = self.out.get_mut(self.n..).unwrap_or_default();
        if let Some(k) = trace.copy_plain(p, room) {
            self.n += k;
            if k <= p {
                *cut = Some(cut_short::TOO_DEEP);
            }
            return;
        }
        for (ip, foreign) in trace.frames_from(p) {
            if !self.push(ip, foreign, cut) {
                break;
            }
        }
    }
}

/// Which of [`CACHES`] rule caches serves frame address `addr`: a hash independent of the
/// slot framehop picks inside a cache (`addr` modulo 509), so that addresses that share a slot
/// spread over the caches.
fn cache_of(addr: u64) -> usize {
    (addr.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % CACHES
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
