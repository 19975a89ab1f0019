//! A memo of whole unwinds: when a hook is entered with the same registers and the stack
//! words that decided the previous unwind from there still hold the same values, the unwind
//! would find the same frames again (it is a function of the start registers, the words it
//! reads and the modules' unwind rules), so its result, the trace-tree id of the stack, is
//! reused without unwinding or interning. Checking is a compare or two per frame instead of
//! a rule lookup and a trie probe per frame; allocation-heavy programs call malloc from a few
//! hundred (site, stack depth, caller chain) combinations, so almost every event hits.
//!
//! The key is every register the unwind starts from and the thread's stack bounds (with the
//! same stack pointer, every word the unwind read is inside the stack, or outside, as it was);
//! an entry lists the words whose values decided the unwind, and a lookup compares them. Which values those are is found
//! out, not assumed (see [`crate::stack::stack_id`]): code built without frame pointers
//! keeps arbitrary data in the frame-pointer register and saves it on the stack, where the
//! unwinder restores it frame by frame although no rule ever uses it. Such values (and the
//! frame-pointer register) are ignored only when unwinding again with them set to 0 and to a
//! high address, the two ends of every test an unwind rule makes on them (zero checks,
//! "moved backwards" comparisons, their use as an address), reads the same addresses and
//! finds the same frames; otherwise every value is compared and the frame pointer is part of
//! the key.
//!
//! Memory: [`SETS`] × [`WAYS`] entries of about 850 bytes in one anonymous mapping, touched
//! only as used, and 16 KiB of tags. Used under the interposer's lock (one memo serves every
//! thread); never allocates; reads only words inside the current thread's stack.

use crate::sys;

/// Sets (a power of two), chosen by (pc, sp, return address).
pub const SETS: usize = 512;
/// Entries per set: stacks that reach the same site at the same depth through different
/// callers each keep their own entry.
pub const WAYS: usize = 4;
/// While the memo sleeps (see [`Memo::consulted`]), one event in this many consults it.
pub const AWAKE_EVERY: u32 = 32;
/// Stack words an unwind may read and still be remembered (one or two per frame).
pub const READS: usize = 48;

/// The words one unwind read, in order, each as (address, value), with those that fell
/// outside the stack marked.
#[derive(Clone)]
pub struct Reads {
    n: usize,
    overflow: bool,
    failed: u64,
    /// Reads whose value must be equal for a hit (the others need only the same address).
    pub matters: u64,
    words: [(u64, u64); READS],
}

impl Reads {
    /// None yet; every value matters.
    pub const fn new() -> Reads {
        Reads {
            n: 0,
            overflow: false,
            failed: 0,
            matters: u64::MAX,
            words: [(0, 0); READS],
        }
    }

    /// Empties it in place (cheaper than assigning [`Reads::new`], which copies the whole
    /// array).
    pub fn clear(&mut self) {
        self.n = 0;
        self.overflow = false;
        self.failed = 0;
        self.matters = u64::MAX;
    }

    /// Notes one read the unwinder made and what it got.
    pub fn push(&mut self, addr: u64, got: Result<u64, ()>) {
        if self.n >= READS {
            self.overflow = true;
            return;
        }
        self.words[self.n] = (addr, got.unwrap_or(0));
        if got.is_err() {
            self.failed |= 1 << self.n;
        }
        self.n += 1;
    }

    /// The (address, value) of each read, in order.
    pub fn words(&self) -> &[(u64, u64)] {
        &self.words[..self.n]
    }

    /// Whether read `i` failed (its address was outside the stack).
    pub fn failed(&self, i: usize) -> bool {
        self.failed & (1 << i) != 0
    }

    /// Whether more words were read than an entry holds.
    pub fn overflow(&self) -> bool {
        self.overflow
    }

    /// Whether `other` read the same addresses, with the same outcome, in the same order.
    pub fn same_addresses(&self, other: &Reads) -> bool {
        self.n == other.n
            && self.failed == other.failed
            && self.overflow == other.overflow
            && self
                .words()
                .iter()
                .zip(other.words())
                .all(|(a, b)| a.0 == b.0)
    }
}

impl Default for Reads {
    fn default() -> Self {
        Self::new()
    }
}

/// Where an unwind starts: the hook's entry registers and return address.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Key {
    /// pc, sp, frame pointer, link register at the hook's entry.
    pub regs: [u64; 4],
    /// The hook's return address.
    pub ra: u64,
}

/// One remembered unwind. What a lookup compares comes first (two cache lines), then the
/// words to check.
#[repr(C)]
struct Entry {
    key: Key,
    /// The memo's generation when stored; 0 = empty.
    generation: u64,
    /// The thread's stack bounds: with the same bounds and sp, every read the unwind made is
    /// inside (or outside) the stack as it was, so only values need checking.
    bounds: (usize, usize),
    leaf: u64,
    /// Lookup count at the last hit or store, for replacing the least recently used.
    used: u64,
    /// Whether the frame pointer is not part of the key.
    any_fp: bool,
    /// How many of `checks` are used.
    n: u8,
    /// (address, value) of the reads whose value decided the unwind.
    checks: [(u64, u64); READS],
}

/// Counters, for measurement (`CROSSPROF_HEAP_STATS`).
#[derive(Clone, Copy, Default, Debug)]
pub struct Stats {
    /// Lookups answered from the memo.
    pub hits: u64,
    /// Lookups that had to unwind.
    pub misses: u64,
    /// Unwinds not remembered (too many reads, or an unknown module on the stack).
    pub unstorable: u64,
    /// Entries stored that ignore the frame pointer and the values no rule used.
    pub loose: u64,
    /// Misses whose unwind was not remembered because almost nothing hits (see
    /// [`Memo::worth_learning`]).
    pub unlearned: u64,
    /// Events that did not consult the memo at all (see [`Memo::consulted`]).
    pub skipped: u64,
}

/// The memo. See the module docs.
pub struct Memo {
    table: *mut Entry,
    /// Each entry's [`tag`], a set's four side by side: a lookup reads one cache line of
    /// tags and an entry only when its tag matches, instead of the first line of all four
    /// 850-byte entries (C++ programs miss on almost every lookup: each of those four reads
    /// missed the processor's caches). 0: no entry.
    tags: [[u64; WAYS]; SETS],
    generation: u64,
    lookups: u64,
    /// Recent hits and misses (halved every 4096 lookups), to stop checking which values
    /// matter while almost nothing hits.
    recent: (u32, u32),
    /// Recent entries stored loose and hits on loose entries (halved with `recent`): whether
    /// finding out which values matter pays for its two extra unwinds.
    recent_loose: (u32, u32),
    /// Events since the memo was last consulted while it sleeps (see [`Memo::consulted`]).
    quiet: u32,
    /// Counters.
    pub stats: Stats,
}

// SAFETY: used only under the interposer's global lock.
unsafe impl Send for Memo {}

/// A digest of what a lookup compares first, the memo's generation included: equal for an
/// entry that may match, never 0. The frame pointer is left out (loose entries ignore it).
fn tag(k: &Key, generation: u64) -> u64 {
    let h =
        (k.ra ^ k.regs[0].rotate_left(17) ^ k.regs[1].rotate_left(31) ^ k.regs[3].rotate_left(45))
            .wrapping_add(generation)
            .wrapping_mul(0xff51_afd7_ed55_8ccd);
    (h ^ (h >> 29)) | 1
}

fn set_of(k: &Key) -> usize {
    let h = (k.regs[1] ^ k.ra.rotate_left(29) ^ k.regs[0].rotate_left(47))
        .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> 40) as usize & (SETS - 1)
}

impl Entry {
    fn matches(&self, key: &Key, generation: u64, bounds: (usize, usize)) -> bool {
        self.generation == generation
            && self.key.ra == key.ra
            && self.key.regs[0] == key.regs[0]
            && self.key.regs[1] == key.regs[1]
            && self.key.regs[3] == key.regs[3]
            && (self.any_fp || self.key.regs[2] == key.regs[2])
            && self.bounds == bounds
            && self.checks[..self.n as usize].iter().all(|&(addr, value)| {
                // SAFETY: the unwind read addr successfully from a thread with the same stack
                // bounds and sp: an aligned word inside this thread's live stack.
                unsafe { *(addr as *const u64) == value }
            })
    }
}

impl Memo {
    /// An empty memo (maps its table on first store).
    pub const fn new() -> Memo {
        Memo {
            table: core::ptr::null_mut(),
            tags: [[0; WAYS]; SETS],
            generation: 1,
            lookups: 0,
            recent: (0, 0),
            recent_loose: (0, 0),
            quiet: 0,
            stats: Stats {
                hits: 0,
                misses: 0,
                unstorable: 0,
                loose: 0,
                unlearned: 0,
                skipped: 0,
            },
        }
    }

    /// Forgets every entry: the modules or the trace tree changed.
    pub fn invalidate(&mut self) {
        self.generation += 1;
    }

    /// Whether finding out which values matter is worth two more unwinds per miss: not while
    /// almost every lookup misses (a program that allocates at ever new stack depths), nor
    /// while the entries stored loose get fewer than two hits each (protoc: a loosening cost
    /// two full unwinds, about four times a miss that splices onto the last unwind, and
    /// brought 0.7 hits).
    pub fn worth_loosening(&self) -> bool {
        let (hits, misses) = self.recent;
        let (stored, hit) = self.recent_loose;
        (misses < 1024 || misses <= hits.saturating_mul(4))
            && (stored < 64 || hit >= stored.saturating_mul(2))
    }

    /// Whether the unwind after a miss should be remembered: always while the memo hits at
    /// all; while almost every lookup misses (C++ programs whose whole stacks rarely repeat:
    /// 5% hits on protoc), after one miss in 16 only, so that a change of phase is still
    /// noticed and the others do not pay for recording their reads and storing them (a
    /// tenth of protoc's recording cost, measured with callgrind).
    pub fn worth_learning(&mut self) -> bool {
        let (hits, misses) = self.recent;
        if misses < 1024 || misses <= hits.saturating_mul(8) || self.lookups & 15 == 0 {
            return true;
        }
        self.stats.unlearned += 1;
        false
    }

    /// Whether this event consults the memo (looks up its stack, and may learn it): always
    /// while one lookup in 16 or more hits; below that the memo sleeps and only one event in
    /// [`AWAKE_EVERY`] consults it, so that a phase whose stacks repeat wakes it again
    /// within a few thousand events. Why: on protoc (4% hits) consulting cost more than the
    /// hits saved: the lookups' cache misses, and learning, which unwinds through framehop
    /// with every read recorded, without the learned plans: with the memo asleep protoc's
    /// recording took 14% less wall time (bench/RESULTS.md).
    pub fn consulted(&mut self) -> bool {
        let (hits, misses) = self.recent;
        if misses < 1024 || hits.saturating_mul(16) >= misses {
            return true;
        }
        self.quiet += 1;
        if self.quiet >= AWAKE_EVERY {
            self.quiet = 0;
            return true;
        }
        self.stats.skipped += 1;
        false
    }

    fn note(&mut self, hit: bool) {
        self.lookups += 1;
        if hit {
            self.stats.hits += 1;
            self.recent.0 += 1;
        } else {
            self.stats.misses += 1;
            self.recent.1 += 1;
        }
        if self.lookups & 4095 == 0 {
            self.recent = (self.recent.0 / 2, self.recent.1 / 2);
            self.recent_loose = (self.recent_loose.0 / 2, self.recent_loose.1 / 2);
        }
    }

    /// The trace-tree id remembered for an unwind from `key` on a thread with stack
    /// `bounds`, if the words that decided it are unchanged.
    pub fn lookup(&mut self, key: &Key, bounds: (usize, usize)) -> Option<u64> {
        let mut found = None;
        if !self.table.is_null() {
            let set = set_of(key);
            let t = tag(key, self.generation);
            for w in 0..WAYS {
                if self.tags[set][w] != t {
                    continue;
                }
                // SAFETY: set * WAYS + w < SETS * WAYS, inside the mapped table.
                let e = unsafe { &mut *self.table.add(set * WAYS + w) };
                if e.matches(key, self.generation, bounds) {
                    e.used = self.lookups;
                    if e.any_fp {
                        self.recent_loose.1 += 1;
                    }
                    found = Some(e.leaf);
                    break;
                }
            }
        }
        self.note(found.is_some());
        found
    }

    /// Remembers that an unwind from `key` on a thread with stack `bounds` that read `reads`
    /// gave the stack `leaf`; with `loose`, the frame pointer and the values `reads.matters`
    /// leaves out were shown not to matter. Unwinds that read too many words are not
    /// remembered.
    pub fn store(
        &mut self,
        key: &Key,
        bounds: (usize, usize),
        reads: &Reads,
        loose: bool,
        leaf: u64,
    ) {
        if reads.overflow {
            self.stats.unstorable += 1;
            return;
        }
        if self.table.is_null() {
            self.table = sys::map_anon(SETS * WAYS * core::mem::size_of::<Entry>()) as *mut Entry;
            if self.table.is_null() {
                return;
            }
        }
        if loose {
            self.stats.loose += 1;
            self.recent_loose.0 += 1;
        }
        let set = set_of(key) * WAYS;
        let mut victim = set;
        let mut oldest = u64::MAX;
        for w in 0..WAYS {
            // SAFETY: set + w < SETS * WAYS, inside the mapped table.
            let e = unsafe { &*self.table.add(set + w) };
            let age = if e.generation != self.generation {
                0
            } else {
                e.used.saturating_add(1)
            };
            if age < oldest {
                oldest = age;
                victim = set + w;
            }
        }
        self.tags[victim / WAYS][victim % WAYS] = tag(key, self.generation);
        // SAFETY: victim < SETS * WAYS, inside the mapped table; the entry is plain data.
        let e = unsafe { &mut *self.table.add(victim) };
        e.key = *key;
        e.any_fp = loose;
        e.generation = self.generation;
        e.bounds = bounds;
        e.used = self.lookups;
        e.leaf = leaf;
        e.n = 0;
        for (i, &w) in reads.words().iter().enumerate() {
            // Failed reads fail again with the same bounds; loose entries skip the values
            // that decided nothing.
            if !reads.failed(i) && (!loose || reads.matters & (1 << i) != 0) {
                e.checks[e.n as usize] = w;
                e.n += 1;
            }
        }
    }
}

impl Default for Memo {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads(list: &[(u64, Result<u64, ()>)]) -> Reads {
        let mut r = Reads::new();
        for &(a, v) in list {
            r.push(a, v);
        }
        r
    }

    #[test]
    fn a_memo_that_almost_never_hits_sleeps_and_wakes_when_stacks_repeat() {
        let stack = [0x1111u64];
        let base = stack.as_ptr() as u64;
        let bounds = (base as usize, base as usize + 8);
        let key = |i: u64| Key {
            regs: [0x10 + i, base, 0, 0],
            ra: 0x400,
        };
        let mut m = Memo::new();
        // Every stack new: consulted until 1,024 misses, then one event in AWAKE_EVERY.
        let mut consulted = 0;
        for i in 0..1024 + 64 * AWAKE_EVERY as u64 {
            if m.consulted() {
                consulted += 1;
                assert_eq!(m.lookup(&key(i), bounds), None);
            }
        }
        assert_eq!(consulted, 1024 + 64);
        assert_eq!(m.stats.skipped, 64 * (AWAKE_EVERY as u64 - 1));
        // One stack over and over: each consulted event hits, and the memo wakes.
        m.store(&key(0), bounds, &reads(&[(base, Ok(0x1111))]), false, 5);
        let mut events = 0;
        while !(0..AWAKE_EVERY).all(|_| m.consulted()) {
            events += 1;
            assert!(events < 100_000, "the memo never woke");
            if m.consulted() {
                assert_eq!(m.lookup(&key(0), bounds), Some(5));
            }
        }
    }

    #[test]
    fn changed_words_and_registers_miss_and_loose_entries_ignore_what_did_not_matter() {
        let stack = [0x1111u64, 0x2222, 0x3333, 0x4444];
        let base = stack.as_ptr() as u64;
        let bounds = (base as usize, base as usize + 32);
        let mut r = reads(&[
            (base + 8, Ok(0x2222)),
            (base + 24, Ok(0x4444)),
            (base + 64, Err(())),
        ]);
        let key = Key {
            regs: [0x10, base, 0x7777, 0],
            ra: 0x400,
        };
        let mut m = Memo::new();
        assert_eq!(m.lookup(&key, bounds), None);
        m.store(&key, bounds, &r, false, 42);
        assert_eq!(m.lookup(&key, bounds), Some(42));
        let other_fp = Key {
            regs: [0x10, base, 0x8888, 0],
            ..key
        };
        assert_eq!(m.lookup(&other_fp, bounds), None, "fp is part of the key");
        // The same start, but read 0 did not matter: another entry of the same set.
        r.matters = 0b10;
        m.store(&key, bounds, &r, true, 43);
        assert_eq!(m.lookup(&other_fp, bounds), Some(43), "fp played no part");
        let mut changed = stack;
        changed[1] = 0x9999;
        let b2 = (changed.as_ptr() as usize, changed.as_ptr() as usize + 32);
        let moved = Key {
            regs: [0x10, changed.as_ptr() as u64, 0, 0],
            ..key
        };
        let r2 = reads(&[
            (moved.regs[1] + 8, Ok(0x2222)),
            (moved.regs[1] + 24, Ok(0x4444)),
        ]);
        m.store(&moved, b2, &r2, false, 7);
        assert_eq!(m.lookup(&moved, b2), None, "a value that matters changed");
        let mut r3 = r2.clone();
        r3.matters = 0b10;
        m.store(&moved, b2, &r3, true, 8);
        assert_eq!(
            m.lookup(&moved, b2),
            Some(8),
            "a value that did not matter changed"
        );
        // Other stack bounds (a read that failed might now succeed): miss.
        m.invalidate();
        m.store(&key, bounds, &reads(&[(base + 64, Err(()))]), false, 9);
        assert_eq!(m.lookup(&key, bounds), Some(9));
        assert_eq!(m.lookup(&key, (bounds.0, bounds.1 + 64)), None);
        // More entries for one key than ways: the least recently used goes.
        m.invalidate();
        for leaf in 0..WAYS as u64 + 1 {
            let r = reads(&[(base, Ok(leaf))]);
            m.store(&key, bounds, &r, false, 100 + leaf);
        }
        assert_eq!(
            m.lookup(&key, bounds),
            None,
            "stack[0] = 0x1111, no entry has it"
        );
        let r = reads(&[(base, Ok(0x1111))]);
        m.store(&key, bounds, &r, false, 200);
        assert_eq!(m.lookup(&key, bounds), Some(200));
        assert_eq!(m.stats.loose, 2);
    }
}
