//! The protocol between the heap interposer (`libcrossprof_heap.so`, inside the application)
//! and `rec`: one crate so that both ends can never drift apart, with no dependencies and no
//! allocation (`no_std`) because the interposer's side runs inside `malloc`.
//!
//! Per process, the interposer creates a shared-memory ring (a memfd), connects to `rec`'s
//! Unix socket (its name is in [`ENV_SOCKET`]) and hands the memfd over with one [`Hello`]
//! message (`SCM_RIGHTS`). From then on events go through the ring only, no system call per
//! event: the interposer is the single producer (it writes under its global lock, so the ring
//! holds the process's events in the order they happened), `rec` the single consumer.
//!
//! The ring is a [`RingHeader`] page followed by a power-of-two data area of 8-byte words.
//! An event never wraps: when it does not fit before the end, the producer writes
//! [`kind::PAD`] and starts again at offset 0. Positions (`head`, `tail`) count bytes and
//! never wrap. The low three bits of an event's first word say its form:
//! - [`TAG_FREE`]: the word is the freed address (8-aligned) with the tag: one word;
//! - [`TAG_ALLOC`]: the word is the block's address with the tag, the next one the size (low
//!   40 bits) and the trace-tree id (high 24 bits): two words;
//! - [`TAG_LONG`]: a header [`Word`] (kind and thread id) followed by the kind's payload
//!   words ([`payload_words`]), for everything else and for allocations and frees that do
//!   not fit the short forms.
//!
//! The thread and the time are not repeated in every event: the thread is the one of the
//! last long event ([`kind::THREAD`] when only the thread changed), the time the one of the
//! last [`kind::TIME`]. The short forms keep the ring traffic (which both processes pay for
//! in cache misses) at 8 to 16 bytes per event.
//!
//! Early wake-up: when the ring passes half full, the producer rings [`RingHeader::bell`]
//! and sends `SIGURG` (ignored by default, so harmless to anything but rec) to rec's pid.
//!
//! Module lists: the interposer also describes the modules it sees loaded ([`kind::MODULE`],
//! one event per executable segment, see [`module`]), at start and when they change. `rec`
//! needs them only for a process whose own maps do not show the code it runs (an emulated
//! one, under qemu-user); it says in [`RingHeader::modules`] whether it wants them.
//!
//! Backpressure instead of loss: when the ring is full the producer sets `waiters` and waits
//! on the `seq` futex (with a timeout), which `rec` bumps and wakes after every drain. If
//! `rec` is gone (its pid in [`ENV_REC_PID`] no longer exists, or it set `closed`), the
//! producer stops recording and the application runs on.
#![no_std]
#![deny(missing_docs)]

use core::sync::atomic::{AtomicU32, AtomicU64};

/// Environment variable holding the abstract Unix socket name `rec` listens on.
pub const ENV_SOCKET: &str = "CROSSPROF_HEAP_SOCKET";
/// Environment variable holding `rec`'s pid, so a producer can tell a slow `rec` from a dead one.
pub const ENV_REC_PID: &str = "CROSSPROF_REC_PID";
/// Environment variable holding the mean bytes between samples of `rec --heap-sample`
/// (absent: every allocation is recorded).
pub const ENV_SAMPLE: &str = "CROSSPROF_HEAP_SAMPLE";

/// First word of the ring header and of the hello message.
pub const MAGIC: u64 = 0x3570_6165_6870_7863; // "cxphea" + version digit 5
/// Bytes of the header page before the data area.
pub const HEADER_BYTES: usize = 4096;
/// Default data-area size: 2 MiB, about 60,000 allocation/free pairs; `rec` drains every
/// 10 ms, so a producer only waits when it allocates faster than ~6 M events/s.
pub const DEFAULT_DATA_BYTES: usize = 2 << 20;
/// Most frames kept per stack (innermost first), a [`cut_short`] marker included; deeper
/// stacks are cut at the outer end.
pub const MAX_FRAMES: usize = 128;

/// Most entries of a sparse ARMv7 stack ([`sparse`]), its two register entries and a
/// [`cut_short`] marker included: a stack with more kept words is cut at the outer end.
pub const MAX_SPARSE_ENTRIES: usize = 512;

/// The stacks of an ARMv7 interposer, which does not unwind in the process: the entry
/// registers of the hook and the stack words an unwind may need, sent as a trace-tree chain
/// like return addresses (so the ring, the trie, the file and segment carrying are the same),
/// and unwound on the host with the sysroot's tables. A recording whose header says
/// `heap_stacks: "arm-sparse"` holds these; a reader that does not know it sees addresses
/// that name no function (never a wrong one).
///
/// A chain, innermost entry first: [`sparse::registers_low`], [`sparse::registers_high`],
/// then one [`sparse::word`] or [`sparse::stack_word`] per kept stack word by rising address,
/// then perhaps a [`cut_short`] marker (more words than [`crate::MAX_SPARSE_ENTRIES`]). A
/// stack word that is not in the chain was not a code address or a pointer up the stack: the
/// host reads it as [`sparse::UNKNOWN`].
///
/// Stack addresses are given as if the thread's stack ended at [`sparse::TOP`]: words by
/// their distance below the stack's top, pointers into the stack (the stack pointer, r7 and
/// r11, saved frame pointers) moved by the same amount. The outer frames of a thread (`main`
/// and what calls it) then give the same entries however deep the allocation happens, and
/// the trace tree, which shares a chain's outer part, holds them once (offsets from the
/// stack pointer would make every depth a new chain).
pub mod sparse {
    /// What the host reads for a stack word the chain does not hold: odd and outside every
    /// mapping of a 32-bit process, so that an unwind that takes it for a return address or
    /// a frame pointer stops there (as "outside the mappings" or "the copy ended") and never
    /// makes up a frame. (Zero would not do: an unwinder takes a zero return address for the
    /// end of the stack, a complete one.)
    pub const UNKNOWN: u32 = 0xffff_fffd;

    /// Where a chain's stack ends (see the module docs): aligned, above any stack pointer it
    /// yields for a thread stack under 2 GiB, and never 0 (0 means "registers unknown").
    pub const TOP: u32 = 0x8000_0000;

    /// The entry of registers r7 and r11 (the Thumb and ARM frame pointers) at the call,
    /// moved as the module docs say (0 when they do not point into the stack).
    pub const fn registers_low(r7: u32, r11: u32) -> u64 {
        (r11 as u64) << 32 | r7 as u64
    }

    /// The entry of the return address (the caller's lr at the call) and the caller's stack
    /// pointer at the call, moved (0: unknown). Never a [`crate::cut_short`] marker: the
    /// stack pointer is aligned.
    pub const fn registers_high(lr: u32, sp: u32) -> u64 {
        (sp as u64) << 32 | lr as u64
    }

    /// The entry of the stack word `value` (a code address) `below` bytes under the stack's
    /// top.
    pub const fn word(below: u32, value: u32) -> u64 {
        (below as u64) << 32 | value as u64
    }

    /// The entry of a stack word `below` bytes under the stack's top that points `to` bytes
    /// under it (a saved frame pointer). Distances stay under 2^31, so no such entry is a
    /// [`crate::cut_short`] marker.
    pub const fn stack_word(below: u32, to: u32) -> u64 {
        POINTER | (below as u64) << 32 | to as u64
    }

    /// The flag of a [`stack_word`] entry.
    const POINTER: u64 = 1 << 63;

    /// The registers at the call, by name.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Registers {
        /// The return address (Thumb bit as the caller's lr had it).
        pub lr: u32,
        /// The caller's stack pointer at the call.
        pub sp: u32,
        /// r7.
        pub r7: u32,
        /// r11.
        pub r11: u32,
    }

    /// Splits a chain (innermost first, any [`crate::cut_short`] marker removed) into its
    /// registers and its (offset, value) words; `None` when it is too short to be one.
    pub fn decode(chain: &[u64]) -> Option<(Registers, &[u64])> {
        let (&low, rest) = chain.split_first()?;
        let (&high, words) = rest.split_first()?;
        let regs = Registers {
            lr: high as u32,
            sp: (high >> 32) as u32,
            r7: low as u32,
            r11: (low >> 32) as u32,
        };
        Some((regs, words))
    }

    /// The (offset above the stack pointer, value) of a word entry of a chain whose
    /// registers are `regs`; `None` for a word below the stack pointer (a damaged chain).
    pub const fn split_word(entry: u64, regs: &Registers) -> Option<(u32, u32)> {
        let below = ((entry & !POINTER) >> 32) as u32;
        let at = TOP.wrapping_sub(below);
        if at < regs.sp {
            return None;
        }
        let value = entry as u32;
        if entry & POINTER != 0 {
            Some((at - regs.sp, TOP.wrapping_sub(value)))
        } else {
            Some((at - regs.sp, value))
        }
    }
}

/// Why the interposer's unwinder stopped before a stack's outermost frame. Recorded as one
/// more frame past the outermost one kept (the root of the stack's chain in the trace tree),
/// at an address no user code has: the last 256 bytes of a 64-bit address space, which is
/// the kernel's, and beyond every 32-bit one. A stack without a marker was unwound to its
/// outermost frame, or stopped where the unwinder cannot tell an end from a failure
/// (`_Unwind_Backtrace` on ARMv7 returns the same code for both).
pub mod cut_short {
    /// The first marker address.
    pub const BASE: u64 = 0xffff_ffff_ffff_ff00;
    /// The stack had more than [`crate::MAX_FRAMES`] frames: its outermost callers are missing.
    pub const TOO_DEEP: u64 = BASE;
    /// The unwinder did not reach the allocation site: code without unwind tables, so the
    /// stack is the site alone (on ARMv7, where the host unwinds: the interposer could not
    /// tell the caller's registers, or the sysroot has no tables for a frame's code).
    pub const NO_UNWIND_INFO: u64 = BASE + 1;
    /// An unwind rule led nowhere (damaged tables, or a frame the fallback rules misread).
    pub const BAD_FRAME: u64 = BASE + 2;
    /// A rule asked for a stack word outside the thread's stack.
    pub const STACK_UNREADABLE: u64 = BASE + 3;

    /// The reason a marker address stands for, as reports name it; `None` for an address of
    /// code.
    pub const fn name(ip: u64) -> Option<&'static str> {
        match ip {
            TOO_DEEP => Some("too_deep"),
            NO_UNWIND_INFO => Some("no_unwind_info"),
            BAD_FRAME => Some("bad_frame"),
            STACK_UNREADABLE => Some("stack_unreadable"),
            _ => None,
        }
    }
}

/// The ring's control block at offset 0 of the shared memory. Written by both sides with
/// atomics only.
#[repr(C)]
pub struct RingHeader {
    /// [`MAGIC`].
    pub magic: AtomicU64,
    /// Size of the data area in bytes (a power of two, a multiple of 8).
    pub data_bytes: AtomicU64,
    /// Bytes ever written by the producer (release-stored after the event's words).
    pub head: AtomicU64,
    /// Bytes ever consumed by `rec` (release-stored after reading).
    pub tail: AtomicU64,
    /// Events the producer had to drop; `rec` reports increases as `Lost{kind: "heap"}`.
    pub lost: AtomicU64,
    /// Futex word bumped by `rec` after each drain.
    pub seq: AtomicU32,
    /// Nonzero while a producer waits on `seq` for space.
    pub waiters: AtomicU32,
    /// Set by `rec` when it stops reading: producers stop writing.
    pub closed: AtomicU32,
    /// Doorbell: set by the producer when the ring passes half full, together with a
    /// `SIGURG` to `rec` (which interrupts its poll), cleared by `rec` when it drains. Keeps the
    /// producer from waiting for rec's next tick.
    pub bell: AtomicU32,
    /// Whether `rec` uses the process's [`kind::MODULE`] events: [`module::UNDECIDED`] until
    /// it has looked at the process (the producer sends them meanwhile), then
    /// [`module::WANTED`] or [`module::UNWANTED`] (the producer stops sending them).
    pub modules: AtomicU32,
}

/// First-word tag of a long event (a [`Word`]).
pub const TAG_LONG: u64 = 0;
/// First-word tag of a short free.
pub const TAG_FREE: u64 = 1;
/// First-word tag of a short allocation.
pub const TAG_ALLOC: u64 = 2;
/// The tag's bits.
pub const TAG_MASK: u64 = 7;

/// Largest size a short allocation carries.
pub const SHORT_SIZE_MAX: u64 = (1 << 40) - 1;
/// Largest trace-tree id a short allocation carries.
pub const SHORT_STACK_MAX: u64 = (1 << 24) - 1;

/// The words of a short allocation, when it fits one.
pub const fn short_alloc(addr: u64, size: u64, stack: u64) -> Option<[u64; 2]> {
    if addr & TAG_MASK != 0 || addr == 0 || size > SHORT_SIZE_MAX || stack > SHORT_STACK_MAX {
        return None;
    }
    Some([addr | TAG_ALLOC, size | stack << 40])
}

/// The word of a short free, when it fits one.
pub const fn short_free(addr: u64) -> Option<u64> {
    if addr & TAG_MASK != 0 || addr == 0 {
        return None;
    }
    Some(addr | TAG_FREE)
}

/// Long event kinds (bits 3..11 of a [`Word`]).
pub mod kind {
    /// An allocation: `addr, size, stack`.
    pub const ALLOC: u8 = 1;
    /// A free: `addr`.
    pub const FREE: u8 = 2;
    /// A new trace-tree node: `id, parent, ip`. Always written before the first event using it.
    pub const NODE: u8 = 3;
    /// The set of loaded modules changed (or an address outside every known module was seen):
    /// `time`. `rec` re-reads the process's maps.
    pub const MAPS: u8 = 4;
    /// Skip to the start of the data area.
    pub const PAD: u8 = 5;
    /// The time of the events that follow: `time`.
    pub const TIME: u8 = 6;
    /// The thread of the events that follow (in the header word): no payload.
    pub const THREAD: u8 = 7;
    /// The program mapped anonymous private memory with `mmap` (not the allocator, not the
    /// interposer): `addr, len, stack`.
    pub const MMAP: u8 = 8;
    /// The program unmapped a range with `munmap` (any mapping: `rec` and the host keep only
    /// the part that was a tracked [`MMAP`]): `addr, len`.
    pub const MUNMAP: u8 = 9;
    /// The program remapped a range with `mremap`: `old, old_len, new, new_len, stack`.
    pub const MREMAP: u8 = 10;
    /// An executable segment of a loaded module, as the process sees it: a variable number
    /// of payload words (the count is in the header word, [`crate::Word::with_words`]),
    /// laid out as [`crate::module`] says.
    pub const MODULE: u8 = 11;
}

/// The payload of a [`kind::MODULE`] event: [`module::HEAD_WORDS`] words (time, start,
/// length, file offset, then [`module::sizes`]: protection, build-id and path lengths), then
/// the build-id's bytes and the path's bytes, each padded with zeros to whole words (native
/// byte order, as everything in the ring: both ends run on the same machine).
pub mod module {
    /// Words before the bytes.
    pub const HEAD_WORDS: usize = 5;
    /// Longest path sent (Linux's `PATH_MAX`); a longer one is cut.
    pub const MAX_PATH: usize = 4096;
    /// Longest build-id sent (GNU build-ids are 20 bytes, 16 for md5 ones).
    pub const MAX_BUILD_ID: usize = 64;
    /// Most payload words of a module event.
    pub const MAX_WORDS: usize = HEAD_WORDS + MAX_BUILD_ID / 8 + MAX_PATH / 8;

    /// [`crate::RingHeader::modules`] before `rec` has looked at the process.
    pub const UNDECIDED: u32 = 0;
    /// `rec` writes the process's modules from these events.
    pub const WANTED: u32 = 1;
    /// `rec` has the process's modules from its maps: the events are not needed.
    pub const UNWANTED: u32 = 2;

    /// Words that hold `n` bytes.
    pub const fn words_for(n: usize) -> usize {
        n.div_ceil(8)
    }

    /// Payload words of a module event with a build-id of `id` bytes and a path of `path`
    /// bytes (both within their maxima).
    pub const fn payload_words(id: usize, path: usize) -> usize {
        HEAD_WORDS + words_for(id) + words_for(path)
    }

    /// The fifth head word: protection bits (PROT_*), build-id length, path length.
    pub const fn sizes(prot: u32, id: usize, path: usize) -> u64 {
        (prot as u64 & 0xff) | (id as u64) << 8 | (path as u64) << 16
    }

    /// Splits [`sizes`]' word into (protection, build-id length, path length); `None` when
    /// a length is over its maximum.
    pub const fn split_sizes(w: u64) -> Option<(u32, usize, usize)> {
        let (prot, id, path) = (
            (w & 0xff) as u32,
            ((w >> 8) & 0xff) as usize,
            (w >> 16) as usize,
        );
        if id > MAX_BUILD_ID || path > MAX_PATH {
            return None;
        }
        Some((prot, id, path))
    }

    /// Word `i` of `bytes` padded with zeros to whole words.
    pub fn pack(bytes: &[u8], i: usize) -> u64 {
        let mut w = [0u8; 8];
        let from = i * 8;
        if from < bytes.len() {
            let n = (bytes.len() - from).min(8);
            w[..n].copy_from_slice(&bytes[from..from + n]);
        }
        u64::from_ne_bytes(w)
    }

    /// Byte `i` of the bytes packed into `words` by [`pack`].
    pub fn unpack(words: &[u64], i: usize) -> Option<u8> {
        let w = words.get(i / 8)?;
        Some(w.to_ne_bytes()[i % 8])
    }
}

/// Most payload words of any long event (a [`kind::MREMAP`]).
pub const MAX_PAYLOAD_WORDS: usize = 5;

/// Payload words of each long kind of a fixed size; `None` for kinds that do not exist and
/// for [`kind::MODULE`], whose size is in its header word (see [`event_payload_words`]).
pub const fn payload_words(kind: u8) -> Option<usize> {
    match kind {
        kind::ALLOC | kind::NODE | kind::MMAP => Some(3),
        kind::MUNMAP => Some(2),
        kind::MREMAP => Some(MAX_PAYLOAD_WORDS),
        kind::FREE | kind::MAPS | kind::TIME => Some(1),
        kind::PAD | kind::THREAD => Some(0),
        _ => None,
    }
}

/// Payload words of the long event whose header word is `w`: fixed per kind, or for a
/// [`kind::MODULE`] the count in the word (`None` when over [`module::MAX_WORDS`]).
pub const fn event_payload_words(w: Word) -> Option<usize> {
    if w.kind() == kind::MODULE {
        let n = w.words();
        if n < module::HEAD_WORDS || n > module::MAX_WORDS {
            return None;
        }
        return Some(n);
    }
    payload_words(w.kind())
}

/// The header word of a long event: tag 0 in bits 0..3, kind in bits 3..11, for a kind of
/// variable size its payload words in bits 11..32, thread id in bits 32..64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Word(pub u64);

impl Word {
    /// Builds a header word.
    pub const fn new(kind: u8, tid: u32) -> Word {
        Word((kind as u64) << 3 | (tid as u64) << 32)
    }
    /// Builds the header word of a kind of variable size with `words` payload words (less
    /// than 2^21).
    pub const fn with_words(kind: u8, tid: u32, words: usize) -> Word {
        Word(Word::new(kind, tid).0 | ((words as u64) & 0x1f_ffff) << 11)
    }
    /// The payload words of a kind of variable size.
    pub const fn words(self) -> usize {
        ((self.0 >> 11) & 0x1f_ffff) as usize
    }
    /// The first word's form: [`TAG_LONG`], [`TAG_FREE`] or [`TAG_ALLOC`].
    pub const fn tag(self) -> u64 {
        self.0 & TAG_MASK
    }
    /// The event kind (of a long event).
    pub const fn kind(self) -> u8 {
        (self.0 >> 3) as u8
    }
    /// The thread id (of a long event).
    pub const fn tid(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

/// The message that opens a connection, sent with the ring's memfd.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// [`MAGIC`].
    pub magic: u64,
    /// The producing process.
    pub pid: u32,
    /// Its parent.
    pub ppid: u32,
    /// Bytes of the shared memory (header page plus data area).
    pub map_bytes: u64,
    /// An address of the interposer's own code as the process sees it: `rec` looks it up in
    /// the process's maps to tell a process that runs its code natively from an emulated one
    /// (see [`module`]).
    pub code: u64,
}

impl Hello {
    /// Size on the wire.
    pub const BYTES: usize = core::mem::size_of::<Hello>();

    /// The message's bytes (native endianness: both ends run on the same machine).
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        b[0..8].copy_from_slice(&self.magic.to_ne_bytes());
        b[8..12].copy_from_slice(&self.pid.to_ne_bytes());
        b[12..16].copy_from_slice(&self.ppid.to_ne_bytes());
        b[16..24].copy_from_slice(&self.map_bytes.to_ne_bytes());
        b[24..32].copy_from_slice(&self.code.to_ne_bytes());
        b
    }

    /// Parses a message; `None` when it is not one of ours.
    pub fn from_bytes(b: &[u8]) -> Option<Hello> {
        let w = |r: core::ops::Range<usize>| b.get(r);
        let h = Hello {
            magic: u64::from_ne_bytes(w(0..8)?.try_into().ok()?),
            pid: u32::from_ne_bytes(w(8..12)?.try_into().ok()?),
            ppid: u32::from_ne_bytes(w(12..16)?.try_into().ok()?),
            map_bytes: u64::from_ne_bytes(w(16..24)?.try_into().ok()?),
            code: u64::from_ne_bytes(w(24..32)?.try_into().ok()?),
        };
        (h.magic == MAGIC).then_some(h)
    }
}

const _: () = assert!(core::mem::size_of::<RingHeader>() <= HEADER_BYTES);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_events_carry_their_size_and_bytes() {
        let (id, path) = (&[0xabu8; 20][..], &b"/lib/libc.so.6"[..]);
        let n = module::payload_words(id.len(), path.len());
        assert_eq!(n, 5 + 3 + 2);
        let w = Word::with_words(kind::MODULE, 42, n);
        assert_eq!((w.kind(), w.tid(), w.words()), (kind::MODULE, 42, n));
        assert_eq!(event_payload_words(w), Some(n));
        assert_eq!(
            event_payload_words(Word::with_words(kind::MODULE, 1, 2)),
            None
        );
        assert_eq!(
            event_payload_words(Word::with_words(kind::MODULE, 1, module::MAX_WORDS + 1)),
            None
        );
        assert_eq!(event_payload_words(Word::new(kind::FREE, 1)), Some(1));
        assert_eq!(
            module::split_sizes(module::sizes(5, id.len(), path.len())),
            Some((5, 20, 14))
        );
        assert_eq!(module::split_sizes(module::sizes(5, 65, 1)), None);
        let words: [u64; 2] = [module::pack(path, 0), module::pack(path, 1)];
        let back: [u8; 14] = core::array::from_fn(|i| module::unpack(&words, i).unwrap());
        assert_eq!(&back[..], path);
        assert_eq!(module::unpack(&words, 15), Some(0));
        assert_eq!(module::unpack(&words, 16), None);
    }

    #[test]
    fn a_sparse_chain_decodes_to_its_registers_and_words() {
        let sp = sparse::TOP - 0x1000;
        let chain = [
            sparse::registers_low(sp + 0x20, 0),
            sparse::registers_high(0x0040_1235, sp),
            sparse::word(0x1000 - 8, 0x0040_2001),
            sparse::stack_word(0x10, 0x8),
        ];
        let (r, words) = sparse::decode(&chain).unwrap();
        assert_eq!((r.lr, r.sp, r.r7, r.r11), (0x0040_1235, sp, sp + 0x20, 0));
        assert_eq!(sparse::split_word(words[0], &r), Some((8, 0x0040_2001)));
        assert_eq!(
            sparse::split_word(words[1], &r),
            Some((0x1000 - 0x10, sparse::TOP - 8))
        );
        // A word below the stack pointer: damage.
        assert_eq!(sparse::split_word(sparse::word(0x2000, 1), &r), None);
        assert_eq!(sparse::decode(&chain[..1]), None);
        // No register or pointer entry is a cut-short marker.
        assert_eq!(cut_short::name(sparse::registers_high(u32::MAX, sp)), None);
        assert_eq!(cut_short::name(chain[3]), None);
    }

    #[test]
    fn words_and_hello_round_trip() {
        let w = Word::new(kind::ALLOC, 0xdead_beef);
        assert_eq!(
            (w.tag(), w.kind(), w.tid()),
            (TAG_LONG, kind::ALLOC, 0xdead_beef)
        );
        let [a, b] = short_alloc(0x5555_0010, 24, 7).unwrap();
        assert_eq!((Word(a).tag(), a & !TAG_MASK), (TAG_ALLOC, 0x5555_0010));
        assert_eq!((b & SHORT_SIZE_MAX, b >> 40), (24, 7));
        assert_eq!(short_alloc(0x5555_0011, 24, 7), None);
        assert_eq!(short_alloc(0x5555_0010, 1 << 40, 7), None);
        assert_eq!(short_alloc(0x5555_0010, 24, 1 << 24), None);
        assert_eq!(short_free(0x5555_0010), Some(0x5555_0011));
        assert_eq!(short_free(0), None);
        let h = Hello {
            magic: MAGIC,
            pid: 7,
            ppid: 1,
            map_bytes: 4096 + 8192,
            code: 0x4000_1234,
        };
        assert_eq!(Hello::from_bytes(&h.to_bytes()), Some(h));
        assert_eq!(Hello::from_bytes(&h.to_bytes()[..24]), None);
        assert_eq!(Hello::from_bytes(&[0; 32]), None);
        assert_eq!(Hello::from_bytes(&[0; 3]), None);
    }
}
