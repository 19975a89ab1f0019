//! Splicing an unwind onto the previous one: when an unwind reaches a frame in exactly the
//! state (frame address and the registers an unwind step uses) the previous unwind was in at
//! one of its frames, and every stack word that previous unwind read from there on still
//! holds the value it read, the rest of the unwind would repeat it (an unwind step is a
//! function of the frame address, the registers, the words it reads and the modules' rules),
//! so its frames are taken from the previous one instead of unwound again.
//!
//! Why: C++ programs allocate from deep call chains whose outer part stays put while the
//! inner frames change (protoc generating code: 7% of its allocations repeat a whole stack the
//! [`super::memo`] knows, but consecutive allocations share most of their outer frames).
//! Checking a word is a load and a compare; unwinding a frame is a rule look-up (a CFI parse
//! when the rule cache misses), its execution and its reads.
//!
//! The check is exact, as the memo's: same thread stack bounds (so a read outside the stack
//! fails again), same registers, same read outcomes (an address outside the stack or below
//! the new start's stack pointer must fail again, one inside must give the same value).
//!
//! The remembered unwind ([`Trace`]) is kept outermost frame first, so that splicing keeps
//! its outer part where it is and writes only the new inner frames ([`Fresh`]) after it: the
//! cost of a spliced unwind is its new frames plus one compare per word checked.
//!
//! Memory: one [`Trace`] and one [`Fresh`] of about 15 KiB each, allocated with the module
//! list; used under the interposer's lock; never allocates.

use crossprof_heap_wire::MAX_FRAMES;

/// Frames an unwind may have and still be remembered: the stack's frames plus a few of the
/// interposer's own.
pub const FRAMES: usize = MAX_FRAMES + 16;
/// Stack words an unwind may read and still be remembered (one or two per frame, usually).
pub const READS: usize = 4 * MAX_FRAMES;

/// The registers an unwind step depends on: the instruction pointer (x86_64) or link
/// register (aarch64), the stack pointer and the frame pointer. framehop 0.16's rules read no
/// other register on either architecture (its x86_64 register set carries sixteen, which
/// would cost a 136-byte copy per frame).
pub type Regs = [u64; 3];

/// The unwinder's state at one frame: the frame address it was at and the registers.
#[derive(Clone, Copy)]
struct Step {
    addr: u64,
    regs: Regs,
    /// `addr` lies outside every known module.
    foreign: bool,
    /// An address emitted as it is: in a known module and not the interposer's own.
    /// [`Trace`]: of this step and every outer one.
    plain: bool,
    /// [`Trace`]: reads of this step and every outer one (`reads[..upto]`); [`Fresh`]:
    /// reads made before this step.
    reads: u32,
    /// Whether none of the reads failed: [`Trace`]: of this step and every outer one;
    /// [`Fresh`]: of this step (kept as they come, so that [`Trace::keep`] copies reads in
    /// blocks).
    clean: bool,
    /// The lowest address among those reads.
    low: u64,
}

const NO_STEP: Step = Step {
    addr: 0,
    regs: [0; 3],
    foreign: false,
    plain: true,
    reads: 0,
    clean: true,
    low: u64::MAX,
};

/// One stack word read: where, what it held, and whether the read failed (then `value` is
/// 0).
#[derive(Clone, Copy)]
struct Word {
    addr: u64,
    value: u64,
    failed: bool,
}

impl Word {
    /// What the read gave the unwinder.
    #[inline(always)]
    fn got(&self) -> Result<u64, ()> {
        if self.failed {
            Err(())
        } else {
            Ok(self.value)
        }
    }
}

/// Stack words read, in order: one store per read, and a frame's reads move as a block.
struct Words {
    words: [Word; READS],
    n: usize,
}

impl Words {
    const fn new() -> Words {
        Words {
            words: [Word {
                addr: 0,
                value: 0,
                failed: false,
            }; READS],
            n: 0,
        }
    }

    fn get(&self, i: usize) -> (u64, Result<u64, ()>) {
        let w = self.words[i];
        (w.addr, w.got())
    }

    /// Appends a read; false when full.
    fn push(&mut self, addr: u64, got: Result<u64, ()>) -> bool {
        let Some(w) = self.words.get_mut(self.n) else {
            return false;
        };
        *w = Word {
            addr,
            value: got.unwrap_or(0),
            failed: got.is_err(),
        };
        self.n += 1;
        true
    }
}

/// The unwind being made, innermost frame first, until it is spliced or ends.
pub struct Fresh {
    steps: [Step; FRAMES],
    n: usize,
    reads: Words,
    /// Nothing overflowed.
    fits: bool,
}

impl Fresh {
    /// Empty.
    pub const fn new() -> Fresh {
        Fresh {
            steps: [NO_STEP; FRAMES],
            n: 0,
            reads: Words::new(),
            fits: true,
        }
    }

    /// Starts an unwind.
    pub fn start(&mut self) {
        self.n = 0;
        self.reads.n = 0;
        self.fits = true;
    }

    /// Notes that the unwinder is at frame `addr` (`foreign`: outside every known module;
    /// `own`: in the interposer) with registers `regs`.
    pub fn step(&mut self, addr: u64, foreign: bool, own: bool, regs: Regs) {
        if self.n >= FRAMES {
            self.fits = false;
            return;
        }
        self.steps[self.n] = Step {
            addr,
            regs,
            foreign,
            plain: !foreign && !own,
            reads: self.reads.n as u32,
            ..NO_STEP
        };
        self.n += 1;
    }

    /// Notes one read (of the step noted last) and what the unwinder got.
    pub fn read(&mut self, addr: u64, got: Result<u64, ()>) {
        if !self.reads.push(addr, got) {
            self.fits = false;
        }
        if let Some(s) = self.n.checked_sub(1).and_then(|i| self.steps.get_mut(i)) {
            s.clean &= got.is_ok();
            s.low = s.low.min(addr);
        }
    }
}

impl Default for Fresh {
    fn default() -> Self {
        Self::new()
    }
}

/// The last whole unwind's return-address frames, outermost first, with the words their
/// steps read (grouped by frame, outermost frame's first, each frame's in the order read) and
/// how it ended.
pub struct Trace {
    bounds: (usize, usize),
    steps: [Step; FRAMES],
    n: usize,
    reads: Words,
    /// Whether it holds an unwind (it is cleared when one did not fit).
    valid: bool,
    /// How it ended: a [`crossprof_heap_wire::cut_short`] marker, or `None` at the outermost
    /// frame.
    end: Option<u64>,
}

impl Trace {
    /// Empty.
    pub const fn new() -> Trace {
        Trace {
            bounds: (0, 0),
            steps: [NO_STEP; FRAMES],
            n: 0,
            reads: Words::new(),
            valid: false,
            end: None,
        }
    }

    /// Remembers `fresh`, an unwind on a thread with stack `bounds` that ended with `end`
    /// (see [`Trace::end`]); with `at`, `fresh` met this trace at its frame `at` (not
    /// among `fresh`'s steps) and the trace's frames from there on stay.
    pub fn keep(
        &mut self,
        fresh: &Fresh,
        bounds: (usize, usize),
        at: Option<usize>,
        end: Option<u64>,
    ) {
        if !fresh.fits {
            self.valid = false;
            return;
        }
        let (mut n, from, mut clean, mut low, mut plain) = match at {
            Some(p) => {
                let s = &self.steps[p];
                (p + 1, s.reads as usize, s.clean, s.low, s.plain)
            }
            None => (0, 0, true, u64::MAX, true),
        };
        if at.is_none() {
            self.end = end;
            self.bounds = bounds;
        }
        if n + fresh.n > FRAMES || from + fresh.reads.n > READS {
            self.valid = false;
            return;
        }
        let mut to = from;
        self.reads.n = to;
        for i in (0..fresh.n).rev() {
            let s = fresh.steps[i];
            let until = match fresh.steps.get(i + 1) {
                Some(next) if i + 1 < fresh.n => next.reads as usize,
                _ => fresh.reads.n,
            };
            let block = &fresh.reads.words[s.reads as usize..until];
            let dst = &mut self.reads.words[to..to + block.len()];
            // A frame reads one or two words: a library memcpy call for those cost 3% of an
            // allocation-heavy thread's time.
            match (block, dst) {
                ([a], [x]) => *x = *a,
                ([a, b], [x, y]) => (*x, *y) = (*a, *b),
                (block, dst) => dst.copy_from_slice(block),
            }
            to += block.len();
            self.reads.n = to;
            clean &= s.clean;
            low = low.min(s.low);
            plain &= s.plain;
            self.steps[n] = Step {
                reads: self.reads.n as u32,
                clean,
                low,
                plain,
                ..s
            };
            n += 1;
        }
        self.n = n;
        self.valid = true;
    }

    /// How the remembered unwind ended.
    pub fn end(&self) -> Option<u64> {
        self.end
    }

    /// Copies the frame addresses from frame `p` outwards into `out`, as many as fit, when
    /// every one is emitted as it is (see [`Fresh::step`]); how many it copied. `None`: some
    /// frame needs [`Trace::frames_from`]'s look at each.
    pub fn copy_plain(&self, p: usize, out: &mut [u64]) -> Option<usize> {
        if !self.steps[p].plain {
            return None;
        }
        let mut k = 0;
        for (o, s) in out.iter_mut().zip(self.steps[..=p].iter().rev()) {
            *o = s.addr;
            k += 1;
        }
        Some(k)
    }

    /// The frame addresses from frame `p` outwards, each with whether it lies outside every
    /// known module.
    pub fn frames_from(&self, p: usize) -> impl Iterator<Item = (u64, bool)> + '_ {
        self.steps[..=p].iter().rev().map(|s| (s.addr, s.foreign))
    }

    /// The reads of frame `p` and the outer ones, in the order the unwinder made them.
    pub fn reads_from(&self, p: usize, mut seen: impl FnMut(u64, Result<u64, ()>)) {
        for q in (0..=p).rev() {
            let from = if q > 0 { self.steps[q - 1].reads } else { 0 };
            for r in from as usize..self.steps[q].reads as usize {
                let (a, got) = self.reads.get(r);
                seen(a, got);
            }
        }
    }
}

impl Default for Trace {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether two register states are equal, compared word by word: an array compare becomes
/// a 16-byte load of the state the capture has just stored as three words, which cannot be
/// forwarded from the store buffer and stalled every frame.
#[inline(always)]
fn same(a: &Regs, b: Regs) -> bool {
    (a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) == 0
}

/// Looks for a frame of a [`Trace`] to splice onto, frame by frame as an unwind proceeds:
/// frames are met in the order of growing stack pointers in both unwinds, so one cursor
/// serves.
pub struct Finder {
    /// Steps of the trace from the outermost one not yet passed: the next candidate is
    /// `left - 1`.
    left: usize,
    /// Reads of the trace at or above this index are known to have changed.
    changed_from: usize,
    /// Stack words compared, for the counters.
    pub checked: u64,
}

impl Finder {
    /// A cursor at the trace's innermost frame, for an unwind on a thread with stack
    /// `bounds`: a trace made on another stack is never met (a read outside the stack there
    /// may not fail here).
    pub fn new(t: &Trace, bounds: (usize, usize)) -> Finder {
        Finder {
            left: if t.valid && t.bounds == bounds {
                t.n
            } else {
                0
            },
            changed_from: usize::MAX,
            checked: 0,
        }
    }

    /// The trace's frame that the unwinder at return address `addr` with `regs` may continue
    /// as, after checking with `raw` (which reads a stack word as the unwinder would, without
    /// side effects) that every word the trace read from there on is unchanged. The trace
    /// holds return-address frames only (the capture keeps no step for its first frame, an
    /// instruction pointer never met again as a return address). `sp` is the stack pointer
    /// the unwind started from (`raw` reads nothing below it): when every read to check
    /// succeeded before and lies at or above it, the words are compared directly. Inlined:
    /// it runs at every frame, and mostly ends at the first compare.
    #[inline(always)]
    pub fn find(
        &mut self,
        t: &Trace,
        sp: u64,
        addr: u64,
        regs: Regs,
        raw: &impl Fn(u64) -> Result<u64, ()>,
    ) -> Option<usize> {
        let frame_sp = regs[1];
        // Passes the trace's frames below this one's stack pointer (iterators: no bounds
        // check per step).
        let p = t.steps[..self.left]
            .iter()
            .rposition(|s| s.regs[1] >= frame_sp);
        self.left = p.map_or(0, |p| p + 1);
        let p = p?;
        let s = &t.steps[p];
        if s.addr != addr || !same(&s.regs, regs) {
            return None;
        }
        let upto = s.reads as usize;
        if upto > self.changed_from {
            return None;
        }
        self.checked += upto as u64;
        let words = t.reads.words[..upto].iter().enumerate().rev();
        if s.clean && s.low >= sp {
            // Inner words first: they change most.
            for (i, w) in words {
                // SAFETY: the read succeeded on a thread with the same stack bounds (so the
                // address is an aligned word below the stack's top) and it is at or above
                // this thread's stack pointer at the hook's entry: inside the live stack.
                if unsafe { *(w.addr as *const u64) } != w.value {
                    self.changed_from = i;
                    return None;
                }
            }
            return Some(p);
        }
        for (i, w) in words {
            if raw(w.addr) != w.got() {
                self.changed_from = i;
                return None;
            }
        }
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_in_the_same_state_with_the_same_words_above_splices() {
        let mut stack = [0x10u64, 0x20, 0x30, 0x40];
        let base = stack.as_mut_ptr() as u64;
        let bounds = (base as usize, base as usize + 32);
        let raw = |a: u64| -> Result<u64, ()> {
            if a >= base && a < base + 32 {
                // SAFETY: inside `stack`.
                Ok(unsafe { *(a as *const u64) })
            } else {
                Err(())
            }
        };
        let mut f = Fresh::new();
        f.start();
        f.step(0x1000, false, false, [0, base, 1]);
        f.read(base, raw(base));
        f.step(0x2000, false, false, [0, base + 8, 2]);
        f.read(base + 16, raw(base + 16));
        f.read(base + 64, Err(()));
        f.step(0x3000, true, false, [0, base + 24, 3]);
        f.read(base + 24, raw(base + 24));
        let mut t = Trace::new();
        t.keep(&f, bounds, None, None);
        let all = |t: &Trace, p| {
            let mut v = [(0, Ok(0)); 8];
            let mut n = 0;
            t.reads_from(p, |a, got| {
                v[n] = (a, got);
                n += 1;
            });
            (v, n)
        };
        let (v, n) = all(&t, 2);
        assert_eq!(n, 4);
        assert_eq!(v[1], (base + 16, Ok(0x30)));
        assert_eq!(v[2], (base + 64, Err(())));
        // Same state at the second frame, same words: splice there.
        let mut find = Finder::new(&t, bounds);
        assert_eq!(find.find(&t, base, 0x2000, [0, base + 8, 2], &raw), Some(1));
        assert_eq!(
            t.frames_from(1).collect::<Vec<_>>(),
            [(0x2000, false), (0x3000, true)]
        );
        assert_eq!(all(&t, 1).1, 3);
        // Another inner frame spliced on: kept, the outer part stays.
        f.start();
        f.step(0x1500, false, false, [0, base, 9]);
        f.read(base, raw(base));
        t.keep(&f, bounds, Some(1), None);
        assert_eq!(t.n, 3);
        assert_eq!(t.steps[2].addr, 0x1500);
        let (v, n) = all(&t, 2);
        assert_eq!(
            (n, v[0], v[3]),
            (4, (base, Ok(0x10)), (base + 24, Ok(0x40)))
        );
        // Other registers, another stack or a changed word: no splice.
        let mut find = Finder::new(&t, bounds);
        assert_eq!(find.find(&t, base, 0x2000, [0, base + 8, 5], &raw), None);
        let mut find = Finder::new(&t, (0, 8));
        assert_eq!(find.find(&t, base, 0x2000, [0, base + 8, 2], &raw), None);
        let changed = |a: u64| raw(a).map(|v| if a == base + 24 { v + 1 } else { v });
        let mut find = Finder::new(&t, bounds);
        assert_eq!(
            find.find(&t, base, 0x2000, [0, base + 8, 2], &changed),
            None
        );
        // The changed word belongs to the outermost frame: no later splice either.
        assert_eq!(
            find.find(&t, base, 0x3000, [0, base + 24, 3], &changed),
            None
        );
        // The outermost frame's words all lie above the start's stack pointer and were read
        // without failing: compared in place.
        let outer = [0, base + 24, 3];
        assert_eq!(
            Finder::new(&t, bounds).find(&t, base, 0x3000, outer, &raw),
            Some(0)
        );
        // SAFETY: base points at `stack`, which is still alive.
        unsafe { *(base as *mut u64).add(3) = 0x41 };
        assert_eq!(
            Finder::new(&t, bounds).find(&t, base, 0x3000, outer, &raw),
            None
        );
        // Reads that failed, or a start above the words: checked as the unwinder reads.
        assert_eq!(
            Finder::new(&t, bounds).find(&t, base + 32, 0x3000, outer, &raw),
            None
        );
    }
}
