//! In-process stack capture: raw return addresses of the allocating thread, innermost first,
//! starting at the caller of the malloc-family function (the interposer's own frames are
//! skipped by address range); on ARMv7 the registers and stack words the host unwinds
//! instead (`sparse`).
//!
//! The innermost frame does not depend on unwind information: each hook reads its own return
//! address as its first instruction ([`entry::entry_return_address`]), and [`stack_id`] puts it
//! first and appends what the unwinder found beyond it. Where the in-process unwinder cannot
//! step out of the caller (i686 or RISC-V code without tables) the stack is the allocation
//! site alone, which is still the right site, marked as cut short. Where unwind information
//! exists the unwinder's first frame is that same address and the result is the unwinder's
//! stack.
//!
//! Method, chosen by measurement (bench/RESULTS.md, "Heap recording overhead"): on
//! x86_64 and aarch64, framehop unwinds from `.eh_frame` with a per-address rule cache and
//! never allocates while unwinding. It gives full stacks for code built without frame
//! pointers at a fraction of the cost of the C runtime's `_Unwind_Backtrace`, which
//! re-interprets the CFI of every frame on every call (about 190 ns a frame here). On
//! x86_64 each return address's rule is learned once from framehop and then run inline
//! (`plan`): a table probe and a load or two a frame. Other architectures (ARMv7's
//! `.ARM.exidx`, i686, RISC-V) use `_Unwind_Backtrace` until they get a cached unwinder of
//! their own; the module look-ups it makes through `dl_iterate_phdr` are answered without the
//! loader's lock (`phdr_list`).
//!
//! ARMv7 does not unwind in the process at all (`sparse`): it records the entry registers
//! and the stack words an unwind may need, and the host unwinds them with the sysroot's
//! `.debug_frame`, which C code built with the distributions' defaults has and `.ARM.exidx`
//! does not. i686 and RISC-V still call `_Unwind_Backtrace` inside `malloc`.
//!
//! Most events need no unwind at all: [`stack_id`] first asks the [`memo`], which knows the
//! stacks unwound before from the same entry registers and checks the stack words that
//! decided them (99.99% of the events of a Lua and a SQLite run; see bench/RESULTS.md).
//! C++ programs repeat whole stacks far less (4% on protoc, where the memo sleeps: see
//! [`Memo::consulted`]) but keep their outer frames from one allocation to the next: there
//! an unwind stops where it meets the previous one ([`splice`]), and the trace tree skips
//! the frames shared with the previous stack ([`crate::trie::Trie::intern_stack`]).

// ARMv7 keeps the unwinding half (memo, probes) compiled but unused.
#![cfg_attr(target_arch = "arm", allow(dead_code, unused_imports))]

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod framehop_unwind;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub use framehop_unwind::{build, capture, rescan, Modules};

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "arm")))]
mod libgcc;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub mod phdr_list;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "arm")))]
pub use libgcc::{capture, rescan, Modules};

#[cfg(target_arch = "arm")]
mod sparse;
#[cfg(target_arch = "arm")]
pub use sparse::{rescan, Modules};

pub mod entry;
pub use entry::{entry, entry_finish, entry_start, Entry, EntryStart};

pub mod find;
pub mod memo;
pub mod modules;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub mod plan;
#[cfg(any(target_arch = "arm", test))]
pub mod sparse_memo;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub mod splice;

pub use memo::Memo;
use memo::{Key, Reads};

use crossprof_heap_wire::MAX_FRAMES;

/// Puts `ra`, the hook's return address, first in `out[..n]` (a stack the unwinder wrote,
/// innermost first, own frames skipped) and keeps the unwinder's frames beyond it: those
/// after `ra`'s position when the unwinder reached it (normally at 0), none when it did not
/// (it stopped before the site, or its frames do not continue from it). `ra` of 0 or inside
/// `own` (a hook called by another part of the interposer) leaves the stack as it is.
/// Returns the new frame count and whether the stack is the site alone because the unwinder
/// never reached it. Signal-safe.
pub fn put_first(ra: u64, own: &core::ops::Range<u64>, out: &mut [u64], n: usize) -> (usize, bool) {
    if ra == 0 || own.contains(&ra) || out.is_empty() {
        return (n, false);
    }
    let n = n.min(out.len());
    match out[..n].iter().position(|&ip| ip == ra) {
        Some(0) => (n, false),
        Some(i) => {
            out.copy_within(i..n, 0);
            (n - i, false)
        }
        None => {
            out[0] = ra;
            (1, true)
        }
    }
}

/// The stack an unwind into `out[..n]` gives (see [`put_first`]), with the marker of why the
/// unwind stopped early, `cut` or the site alone, after its outermost frame (see
/// [`crossprof_heap_wire::cut_short`]); `out` must have a slot left for it beyond the
/// unwinder's. Returns the frame count, marker included. Signal-safe.
pub fn finish_stack(
    ra: u64,
    own: &core::ops::Range<u64>,
    out: &mut [u64],
    n: usize,
    cut: Option<u64>,
) -> usize {
    let (n, site_alone) = put_first(ra, own, out, n);
    let cut = if site_alone {
        Some(crossprof_heap_wire::cut_short::NO_UNWIND_INFO)
    } else {
        cut
    };
    match (cut, out.get_mut(n)) {
        (Some(marker), Some(slot)) => {
            *slot = marker;
            n + 1
        }
        _ => n,
    }
}

/// Where a capture starts: the thread's stack bounds, the registers (pc, sp, fp, lr; zeros:
/// from the capture itself) and whether it may continue as the previous unwind and be
/// remembered (see `splice`). One reference instead of three arguments: the capture takes
/// more arguments than there are argument registers, and a 16-byte argument the caller
/// stored as two words and the capture loaded as one stalled it (store forwarding).
// `_Unwind_Backtrace` (i686, RISC-V) starts from where it is called, and remembers nothing.
#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(dead_code)
)]
pub struct Start {
    /// The thread's stack, `[low, high)`: reads stay inside it.
    pub bounds: (usize, usize),
    /// pc, sp, fp, lr at the hook's entry; zeros: unwind from the capture itself.
    pub regs: [u64; 4],
    /// Whether the unwind may continue as the previous one and is remembered for the next.
    pub splice: bool,
}

/// What an unwinder's stack reads go through: gets the address and what was read, returns
/// what the unwinder sees (see [`stack_id`]).
pub type Tap<'a> = &'a mut dyn FnMut(u64, Result<u64, ()>) -> Result<u64, ()>;

/// Entries of the stack buffer: a sparse ARMv7 stack holds stack words, not frames.
#[cfg(target_arch = "arm")]
const IPS: usize = crossprof_heap_wire::MAX_SPARSE_ENTRIES;
#[cfg(not(target_arch = "arm"))]
const IPS: usize = MAX_FRAMES;

/// Buffers for [`stack_id`], kept with the interposer's locked state rather than on the
/// stack (a signal handler on a small alternate stack may allocate).
pub struct Scratch {
    ips: [u64; IPS],
    /// ARMv7: the last sparse chain interned, its length and id (0: none).
    #[cfg(target_arch = "arm")]
    last: ([u64; IPS], usize, u64),
    /// ARMv7: the chains met before, by entry registers.
    #[cfg(target_arch = "arm")]
    chains: sparse_memo::SparseMemo,
    again: [u64; MAX_FRAMES],
    reads: Reads,
    reads_again: Reads,
}

impl Scratch {
    /// Zeroed buffers.
    pub const fn new() -> Scratch {
        Scratch {
            ips: [0; IPS],
            #[cfg(target_arch = "arm")]
            last: ([0; IPS], 0, 0),
            #[cfg(target_arch = "arm")]
            chains: sparse_memo::SparseMemo::new(),
            again: [0; MAX_FRAMES],
            reads: Reads::new(),
            reads_again: Reads::new(),
        }
    }
}

impl Scratch {
    /// Forgets what was interned: the trace tree forgot its ids.
    pub fn invalidate(&mut self) {
        #[cfg(target_arch = "arm")]
        {
            self.last.2 = 0;
            self.chains.invalidate();
        }
    }
}

impl Default for Scratch {
    fn default() -> Self {
        Self::new()
    }
}

/// Why [`stack_id`] gave no id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InternFailed;

/// The two values the loosening runs of [`stack_id`] put in place of the values under test:
/// zero, and an aligned address far above any stack (so that `v + 16` cannot overflow).
const PROBES: [u64; 2] = [0, 0x7fff_ffff_ffff_fff0];

/// The trace-tree id of the stack of the hook entered at `at`, and the first address
/// outside every known module met, if any. From the memo when the stack words that decided the
/// last unwind from the same registers are unchanged; else the stack is unwound ([`capture`],
/// with the hook's return address as the innermost frame, see [`put_first`]) and handed to
/// `intern`, which returns its id (or fails when the id could not be sent), and the memo
/// learns it. Call with the interposer's lock held.
///
/// Before the memo learns an unwind, the values it read that do not look like code
/// addresses (saved registers) and the frame pointer are put to the test: the unwind is done
/// again with all of them set to each of [`PROBES`]. When both runs read the same addresses
/// and find the same frames, those values decided nothing and the entry ignores them (see
/// the `memo` module for why the two probes cover every test an unwind rule makes).
#[cfg(not(target_arch = "arm"))]
pub fn stack_id(
    at: Entry,
    m: &mut Modules,
    memo: &mut Memo,
    s: &mut Scratch,
    bounds: (usize, usize),
    intern: impl FnOnce(&[u64]) -> Result<u64, InternFailed>,
) -> Result<(u64, Option<u64>), InternFailed> {
    // The memo needs the entry registers, which only the framehop unwinder starts from.
    let memoize = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"))
        && at.regs[0] != 0
        && at.regs[1] != 0
        && memo.consulted();
    let key = Key {
        regs: at.regs,
        ra: at.ra,
    };
    if memoize {
        if let Some(id) = memo.lookup(&key, bounds) {
            return Ok((id, None));
        }
    }
    let learn = memoize && memo.worth_learning();
    s.reads.clear();
    let reads = &mut s.reads;
    let mut record = |addr: u64, got: Result<u64, ()>| {
        reads.push(addr, got);
        got
    };
    // The last slot is kept for the marker of a stack cut short.
    let room = s.ips.len() - 1;
    let from = Start {
        bounds,
        regs: at.regs,
        splice: true,
    };
    let (n, unknown, cut) = capture(
        m,
        &mut s.ips[..room],
        &from,
        learn.then_some(&mut record as Tap<'_>),
    );
    let n = finish_stack(at.ra, &m.own, &mut s.ips, n, cut);
    let id = intern(&s.ips[..n])?;
    if !learn {
        return Ok((id, unknown));
    }
    if unknown.is_some() || s.reads.overflow() {
        memo.stats.unstorable += 1;
        return Ok((id, unknown));
    }
    let mut matters = 0u64;
    for (i, &(_, v)) in s.reads.words().iter().enumerate() {
        if !s.reads.failed(i) && m.known(v) {
            matters |= 1 << i;
        }
    }
    s.reads.matters = matters;
    let loose = memo.worth_loosening()
        && PROBES.iter().all(|&probe| {
            let mut regs = at.regs;
            regs[2] = probe;
            s.reads_again.clear();
            let (real, again) = (&s.reads, &mut s.reads_again);
            let mut i = 0;
            let mut substitute = |addr: u64, got: Result<u64, ()>| {
                let under_test = got.is_ok()
                    && real.words().get(i).is_some_and(|w| w.0 == addr)
                    && matters & (1 << i) == 0;
                let seen = if under_test { Ok(probe) } else { got };
                again.push(addr, seen);
                i += 1;
                seen
            };
            let from = Start {
                bounds,
                regs,
                splice: false,
            };
            let (n2, _, cut2) = capture(m, &mut s.again[..room], &from, Some(&mut substitute));
            let n2 = finish_stack(at.ra, &m.own, &mut s.again, n2, cut2);
            s.again[..n2] == s.ips[..n] && s.reads_again.same_addresses(&s.reads)
        });
    memo.store(&key, bounds, &s.reads, loose, id);
    Ok((id, unknown))
}

/// ARMv7: the trace-tree id of the sparse stack of the hook entered at `at`
/// ([`sparse::capture`]; no unwind, no module met that is not known). From the
/// [`sparse_memo`] when the words the last chain from the same registers kept are unchanged
/// (no scan); the last chain interned is remembered too, see [`Scratch::invalidate`]. Counts
/// in `memo`'s statistics. Call with the interposer's lock held.
#[cfg(target_arch = "arm")]
pub fn stack_id(
    at: Entry,
    m: &mut Modules,
    memo: &mut Memo,
    s: &mut Scratch,
    bounds: (usize, usize),
    intern: impl FnOnce(&[u64]) -> Result<u64, InternFailed>,
) -> Result<(u64, Option<u64>), InternFailed> {
    // The chain depends on r7 and r11 only where they point into the stack (see
    // `sparse::capture`): elsewhere they hold data, which would only split the memo's keys.
    let key = sparse::chain_registers(at.regs, bounds);
    if let Some(id) = s.chains.lookup(&key, bounds) {
        memo.stats.hits += 1;
        return Ok((id, None));
    }
    memo.stats.misses += 1;
    let n = sparse::capture(m, &mut s.ips, bounds, at.regs);
    // An allocation loop meets the same chain again and again: one comparison instead of a
    // trace-tree look-up per entry.
    let (last, last_n, last_id) = &mut s.last;
    let id = if *last_id != 0 && *last_n == n && last[..n] == s.ips[..n] {
        *last_id
    } else {
        let id = intern(&s.ips[..n])?;
        last[..n].copy_from_slice(&s.ips[..n]);
        (*last_n, *last_id) = (n, id);
        id
    };
    if !s.chains.store(&key, bounds, &s.ips[..n], id) {
        memo.stats.unstorable += 1;
    }
    Ok((id, None))
}

/// Walks the frame-pointer chain from the caller: used only for an allocation made by a
/// signal handler that interrupted the interposer on the same thread, when the unwinder's
/// state may be mid-update. Reads stay inside `[low, high)` of the thread's stack.
#[inline(never)]
pub fn capture_fp(out: &mut [u64], own: core::ops::Range<u64>, bounds: (usize, usize)) -> usize {
    let mut fp = frame_address() as usize;
    let mut n = 0;
    while n < out.len() {
        if fp < bounds.0 || fp + 2 * core::mem::size_of::<usize>() > bounds.1 || fp & 7 != 0 {
            break;
        }
        // SAFETY: fp and fp+word lie inside this thread's stack, checked above.
        let (next, ret) = unsafe {
            let p = fp as *const usize;
            (*p, *p.add(1))
        };
        if ret == 0 {
            break;
        }
        if !own.contains(&(ret as u64)) {
            out[n] = ret as u64;
            n += 1;
        }
        if next <= fp {
            break;
        }
        fp = next;
    }
    n
}

#[inline(always)]
fn frame_address() -> *const u8 {
    let fp: *const u8;
    // SAFETY: reads the frame-pointer register only.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags))
    };
    #[cfg(target_arch = "aarch64")]
    unsafe {
        core::arch::asm!("mov {}, x29", out(reg) fp, options(nomem, nostack, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        fp = core::ptr::null();
    }
    fp
}

#[cfg(test)]
mod tests {
    use super::{finish_stack, put_first};
    use crossprof_heap_wire::cut_short;

    #[test]
    fn the_return_address_leads_and_the_overlap_is_kept_once() {
        let own = 0x100..0x200;
        let mut s = [0x1000, 0x2000, 0x3000, 0];
        assert_eq!(put_first(0x1000, &own, &mut s, 3), (3, false));
        assert_eq!(s[..3], [0x1000, 0x2000, 0x3000]);
        // The unwinder reported something before the site: start at the site.
        let mut s = [0x900, 0x1000, 0x2000, 0];
        assert_eq!(put_first(0x1000, &own, &mut s, 3), (2, false));
        assert_eq!(s[..2], [0x1000, 0x2000]);
        // It never reached the site (ARMv7 C code without unwind tables): the site alone.
        let mut s = [0u64; 4];
        assert_eq!(put_first(0x1000, &own, &mut s, 0), (1, true));
        assert_eq!(s[0], 0x1000);
        let mut s = [0x5000, 0x6000, 0, 0];
        assert_eq!(put_first(0x1000, &own, &mut s, 2), (1, true));
        assert_eq!(s[0], 0x1000);
        // Unknown or own return address: the unwinder's stack as it is.
        let mut s = [0x5000, 0x6000, 0, 0];
        assert_eq!(put_first(0, &own, &mut s, 2), (2, false));
        assert_eq!(put_first(0x150, &own, &mut s, 2), (2, false));
        assert_eq!(s[..2], [0x5000, 0x6000]);
    }

    #[test]
    fn a_stack_cut_short_ends_with_the_reason() {
        let own = 0x100..0x200;
        // Complete: no marker.
        let mut s = [0x1000, 0x2000, 0, 0];
        assert_eq!(finish_stack(0x1000, &own, &mut s, 2, None), 2);
        // The unwinder's own reason follows the outermost frame.
        let n = finish_stack(0x1000, &own, &mut s, 2, Some(cut_short::BAD_FRAME));
        assert_eq!(s[..n], [0x1000, 0x2000, cut_short::BAD_FRAME]);
        // The site alone: the unwinder never got there, whatever it said.
        let mut s = [0x5000, 0, 0, 0];
        let n = finish_stack(0x1000, &own, &mut s, 1, None);
        assert_eq!(s[..n], [0x1000, cut_short::NO_UNWIND_INFO]);
        // A full buffer: the marker replaces nothing.
        let mut s = [0x1000, 0x2000];
        assert_eq!(
            finish_stack(0x1000, &own, &mut s, 2, Some(cut_short::TOO_DEEP)),
            2
        );
        assert_eq!(cut_short::name(cut_short::TOO_DEEP), Some("too_deep"));
        assert_eq!(cut_short::name(0x1000), None);
    }
}
