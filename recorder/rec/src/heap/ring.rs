//! The consumer end of one process's shared-memory ring (protocol in `crossprof-heap-wire`):
//! maps the memfd the interposer sent, decodes events between `tail` and `head`, releases the
//! space and wakes a producer waiting for it.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;

use crossprof_heap_wire::{
    event_payload_words, kind, module, RingHeader, Word, HEADER_BYTES, MAGIC, MAX_PAYLOAD_WORDS,
    SHORT_SIZE_MAX, TAG_ALLOC, TAG_FREE, TAG_LONG, TAG_MASK,
};

/// Largest data area accepted from a producer (it says its own size; rec maps what it says).
const MAX_DATA_BYTES: u64 = 64 << 20;

/// How much of the ring a drain reads before it gives the space back (see
/// [`Ring::release`]): a thirty-second of the default ring, so a waiting producer goes on
/// within about a tenth of a millisecond of rec's reading.
const RELEASE_BYTES: u64 = 64 << 10;

/// One decoded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// An allocation.
    Alloc {
        /// Thread.
        tid: u32,
        /// Monotonic ns.
        time: u64,
        /// Address.
        addr: u64,
        /// Requested size.
        size: u64,
        /// Trace-tree id (producer's numbering).
        stack: u64,
    },
    /// A free.
    Free {
        /// Thread.
        tid: u32,
        /// Monotonic ns.
        time: u64,
        /// Address.
        addr: u64,
    },
    /// A trace-tree node.
    Node {
        /// Node id.
        id: u64,
        /// Parent id (0: root).
        parent: u64,
        /// Return address.
        ip: u64,
    },
    /// The module list changed.
    Maps {
        /// Monotonic ns.
        time: u64,
    },
    /// A mapping event of the program's (`mmap`, `munmap`, `mremap`; see the wire crate).
    Mapping {
        /// [`kind::MMAP`], [`kind::MUNMAP`] or [`kind::MREMAP`].
        kind: u8,
        /// Thread.
        tid: u32,
        /// Monotonic ns.
        time: u64,
        /// The kind's payload words, zeros past them.
        words: [u64; MAX_PAYLOAD_WORDS],
    },
    /// An executable segment of a module the process has loaded, as it sees it (see the
    /// wire crate's `module`). Boxed: heap events, millions a second, stay small.
    Module(Box<Module>),
}

/// A [`kind::MODULE`] event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// Thread.
    pub tid: u32,
    /// Monotonic ns.
    pub time: u64,
    /// First address of the segment (page-aligned as a mapping).
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
    /// File offset mapped at `start`.
    pub pgoff: u64,
    /// Protection bits (PROT_*).
    pub prot: u32,
    /// GNU build-id, empty when the module has none.
    pub build_id: Vec<u8>,
    /// The path as the process sees it.
    pub path: Vec<u8>,
}

impl Module {
    /// Decodes a module event's payload; `None` when its lengths disagree with its size.
    fn decode(tid: u32, words: &[u64]) -> Option<Module> {
        let head = words.get(..module::HEAD_WORDS)?;
        let (prot, id, path) = module::split_sizes(head[4])?;
        if words.len() != module::payload_words(id, path) {
            return None;
        }
        let bytes = &words[module::HEAD_WORDS..];
        let path_words = &bytes[module::words_for(id)..];
        let take = |w: &[u64], n: usize| -> Option<Vec<u8>> {
            (0..n).map(|i| module::unpack(w, i)).collect()
        };
        Some(Module {
            tid,
            time: head[0],
            start: head[1],
            len: head[2],
            pgoff: head[3],
            prot,
            build_id: take(bytes, id)?,
            path: take(path_words, path)?,
        })
    }
}

/// Tells the producer of a ring rec will not read (its hello or sizes are wrong, e.g. an
/// interposer of another version) to stop, so the application never waits for space: sets
/// `closed` in the header page, whose first fields every version shares.
pub fn refuse(fd: &OwnedFd) {
    // SAFETY: a fresh shared mapping of the first page of a memfd we were given, which is
    // checked to be at least that long (a store past a memfd's end would fault); `closed`
    // and `seq` are aligned atomics inside it.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd.as_raw_fd(), &mut st) != 0 || (st.st_size as u64) < HEADER_BYTES as u64 {
            return;
        }
        let base = libc::mmap(
            std::ptr::null_mut(),
            HEADER_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        );
        if base == libc::MAP_FAILED {
            return;
        }
        let h = &*(base as *const RingHeader);
        h.closed.store(1, Ordering::Release);
        libc::syscall(libc::SYS_futex, h.seq.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
        libc::munmap(base, HEADER_BYTES);
    }
}

/// A mapped ring.
pub struct Ring {
    base: *mut u8,
    map_len: usize,
    size: u64,
    lost_seen: u64,
    /// The thread and time of the next short event (set by long events, see the wire crate).
    tid: u32,
    time: u64,
}

// SAFETY: the mapping is only touched through &mut self by one thread.
unsafe impl Send for Ring {}

impl Ring {
    /// Maps the memfd of a hello that announced `map_bytes`. `None` when the sizes are wrong.
    pub fn map(fd: &OwnedFd, map_bytes: u64) -> Option<Ring> {
        let data = map_bytes.checked_sub(HEADER_BYTES as u64)?;
        if data == 0 || !data.is_power_of_two() || data > MAX_DATA_BYTES {
            return None;
        }
        // SAFETY: a fresh shared mapping of a memfd we were given; the size was checked and
        // the producer made the file that large before sending it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_bytes as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        let ring = Ring {
            base: base as *mut u8,
            map_len: map_bytes as usize,
            size: data,
            lost_seen: 0,
            tid: 0,
            time: 0,
        };
        let h = ring.header();
        if h.magic.load(Ordering::Acquire) != MAGIC || h.data_bytes.load(Ordering::Acquire) != data
        {
            return None;
        }
        Some(ring)
    }

    fn header(&self) -> &RingHeader {
        // SAFETY: the header page is mapped for the ring's lifetime; it only holds atomics.
        unsafe { &*(self.base as *const RingHeader) }
    }

    fn word(&self, pos: u64) -> u64 {
        let at = (pos % self.size) as usize;
        // SAFETY: at is an aligned offset inside the data area.
        unsafe { std::ptr::read_volatile(self.base.add(HEADER_BYTES + at) as *const u64) }
    }

    /// Events dropped by the producer since the last call.
    pub fn take_lost(&mut self) -> u64 {
        let now = self.header().lost.load(Ordering::Relaxed);
        let d = now.saturating_sub(self.lost_seen);
        self.lost_seen = now;
        d
    }

    /// Calls `f` for every complete event now in the ring, in order, then frees the space
    /// and wakes a waiting producer. A malformed ring (a bug or a hostile producer) stops the
    /// drain at the bad word; `false` then.
    pub fn drain(&mut self, mut f: impl FnMut(Event)) -> bool {
        let h = self.header();
        h.bell.store(0, Ordering::Release);
        let head = h.head.load(Ordering::Acquire);
        let mut tail = h.tail.load(Ordering::Relaxed);
        let mut ok = true;
        if head < tail || head - tail > self.size {
            ok = false;
        }
        while ok && tail < head {
            let w = Word(self.word(tail));
            let left = self.size - tail % self.size;
            let (ev, bytes) = match w.tag() {
                TAG_FREE => (
                    Some(Event::Free {
                        tid: self.tid,
                        time: self.time,
                        addr: w.0 & !TAG_MASK,
                    }),
                    8,
                ),
                TAG_ALLOC if tail + 16 <= head && left >= 16 => {
                    let second = self.word(tail + 8);
                    (
                        Some(Event::Alloc {
                            tid: self.tid,
                            time: self.time,
                            addr: w.0 & !TAG_MASK,
                            size: second & SHORT_SIZE_MAX,
                            stack: second >> 40,
                        }),
                        16,
                    )
                }
                TAG_LONG if w.kind() == kind::PAD => {
                    tail += left;
                    continue;
                }
                TAG_LONG => {
                    let Some(n) = event_payload_words(w) else {
                        ok = false;
                        break;
                    };
                    let bytes = 8 * (n as u64 + 1);
                    if tail + bytes > head || bytes > left {
                        ok = false;
                        break;
                    }
                    if w.kind() == kind::MODULE {
                        self.tid = w.tid();
                        let Some(m) = self.module(tail, n) else {
                            ok = false;
                            break;
                        };
                        f(Event::Module(m));
                        tail += bytes;
                        continue;
                    }
                    let mut words = [0u64; MAX_PAYLOAD_WORDS];
                    for (i, x) in words.iter_mut().enumerate().take(n) {
                        *x = self.word(tail + 8 * (i as u64 + 1));
                    }
                    let p = |i: usize| words[i];
                    self.tid = w.tid();
                    let ev = match w.kind() {
                        kind::ALLOC => Some(Event::Alloc {
                            tid: self.tid,
                            time: self.time,
                            addr: p(0),
                            size: p(1),
                            stack: p(2),
                        }),
                        kind::FREE => Some(Event::Free {
                            tid: self.tid,
                            time: self.time,
                            addr: p(0),
                        }),
                        kind::NODE => Some(Event::Node {
                            id: p(0),
                            parent: p(1),
                            ip: p(2),
                        }),
                        kind::MAPS => Some(Event::Maps { time: p(0) }),
                        k @ (kind::MMAP | kind::MUNMAP | kind::MREMAP) => Some(Event::Mapping {
                            kind: k,
                            tid: self.tid,
                            time: self.time,
                            words,
                        }),
                        kind::TIME => {
                            self.time = p(0);
                            None
                        }
                        _ => None,
                    };
                    (ev, bytes)
                }
                _ => {
                    ok = false;
                    break;
                }
            };
            if let Some(ev) = ev {
                f(ev);
            }
            let before = tail;
            tail += bytes;
            if tail / RELEASE_BYTES != before / RELEASE_BYTES {
                self.release(tail);
            }
        }
        self.release(if ok { tail } else { head });
        ok
    }

    /// Gives the ring up to `tail` back to the producer and wakes it if it waits for room.
    /// A drain does so every [`RELEASE_BYTES`], not only at its end: a producer that filled
    /// the ring then waits for the first part of the pass, not for all of it (a full 2 MiB
    /// ring takes rec a few milliseconds to read).
    fn release(&mut self, tail: u64) {
        let h = self.header();
        h.tail.store(tail, Ordering::Release);
        h.seq.fetch_add(1, Ordering::Release);
        if h.waiters.swap(0, Ordering::AcqRel) != 0 {
            // SAFETY: waking waiters of a shared futex word inside our mapping.
            unsafe { libc::syscall(libc::SYS_futex, h.seq.as_ptr(), libc::FUTEX_WAKE, i32::MAX) };
        }
    }

    /// The module event of `n` payload words whose header word is at `tail`: out of line,
    /// as rare as modules are, so that the per-event path stays small.
    #[cold]
    #[inline(never)]
    fn module(&self, tail: u64, n: usize) -> Option<Box<Module>> {
        let words: Vec<u64> = (0..n as u64)
            .map(|i| self.word(tail + 8 * (i + 1)))
            .collect();
        Module::decode(self.tid, &words).map(Box::new)
    }

    /// Tells the producer whether rec wants its module events (see the wire crate's
    /// `module`).
    pub fn want_modules(&self, wanted: bool) {
        let v = if wanted {
            module::WANTED
        } else {
            module::UNWANTED
        };
        self.header().modules.store(v, Ordering::Relaxed);
    }

    /// Whether the producer rang for an early drain since the last one.
    pub fn bell(&self) -> bool {
        self.header().bell.load(Ordering::Acquire) != 0
    }

    /// Tells the producer to stop writing (rec is ending).
    pub fn close(&self) {
        self.header().closed.store(1, Ordering::Release);
        // SAFETY: as in drain.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                self.header().seq.as_ptr(),
                libc::FUTEX_WAKE,
                i32::MAX,
            )
        };
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what map() mapped.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossprof_heap_wire::{short_alloc, short_free};
    use std::os::fd::FromRawFd;

    /// A ring of `data` bytes as a producer would create it; returns it and a writer of
    /// words at byte positions.
    fn ring(data: u64) -> Ring {
        let map = HEADER_BYTES as u64 + data;
        // SAFETY: a fresh memfd, sized and owned here.
        let fd = unsafe {
            let fd = libc::syscall(libc::SYS_memfd_create, c"t".as_ptr(), 0) as i32;
            assert!(fd >= 0);
            assert_eq!(libc::ftruncate(fd, map as libc::off_t), 0);
            OwnedFd::from_raw_fd(fd)
        };
        // Header as the producer writes it, through a second mapping of the same memory.
        // SAFETY: mapping the memfd just created, at its size.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        // SAFETY: the header page is mapped; its fields are atomics.
        let h = unsafe { &*(base as *const RingHeader) };
        h.data_bytes.store(data, Ordering::Relaxed);
        h.magic.store(MAGIC, Ordering::Release);
        Ring::map(&fd, map).expect("a valid ring")
    }

    fn put(r: &Ring, words: &[u64]) {
        let h = r.header();
        let mut head = h.head.load(Ordering::Relaxed);
        for &w in words {
            let at = (head % r.size) as usize;
            // SAFETY: at is an aligned offset inside the data area.
            unsafe { std::ptr::write_volatile(r.base.add(HEADER_BYTES + at) as *mut u64, w) };
            head += 8;
        }
        h.head.store(head, Ordering::Release);
    }

    #[test]
    fn short_and_long_forms_carry_thread_and_time() {
        let mut r = ring(64);
        put(&r, &[Word::new(kind::THREAD, 7).0]);
        put(&r, &[Word::new(kind::TIME, 7).0, 1000]);
        put(&r, &short_alloc(0x1000, 24, 5).unwrap());
        put(&r, &[short_free(0x1000).unwrap()]);
        let mut got = Vec::new();
        assert!(r.drain(|e| got.push(e)));
        assert_eq!(
            got,
            [
                Event::Alloc {
                    tid: 7,
                    time: 1000,
                    addr: 0x1000,
                    size: 24,
                    stack: 5
                },
                Event::Free {
                    tid: 7,
                    time: 1000,
                    addr: 0x1000
                }
            ]
        );
        // 48 bytes used of 64: a long allocation does not fit before the end, so PAD.
        put(&r, &[Word::new(kind::PAD, 0).0, 0]);
        put(&r, &[Word::new(kind::ALLOC, 9).0, 0x2001, 1 << 41, 1 << 30]);
        put(&r, &[Word::new(kind::FREE, 9).0, 0x2001]);
        got.clear();
        assert!(r.drain(|e| got.push(e)));
        assert_eq!(
            got,
            [
                Event::Alloc {
                    tid: 9,
                    time: 1000,
                    addr: 0x2001,
                    size: 1 << 41,
                    stack: 1 << 30
                },
                Event::Free {
                    tid: 9,
                    time: 1000,
                    addr: 0x2001
                }
            ]
        );
        // A module event: its bytes come back; one whose lengths disagree stops the drain.
        let path = b"/lib/libc.so.6";
        let n = module::payload_words(3, path.len());
        let mut ev = vec![Word::with_words(kind::MODULE, 9, n).0, 5, 0x4000, 0x1000, 0];
        ev.push(module::sizes(5, 3, path.len()));
        ev.push(module::pack(&[1, 2, 3], 0));
        ev.extend((0..2).map(|i| module::pack(path, i)));
        let mut r = ring(4096);
        put(&r, &ev);
        got.clear();
        assert!(r.drain(|e| got.push(e)));
        assert_eq!(
            got,
            [Event::Module(Box::new(Module {
                tid: 9,
                time: 5,
                start: 0x4000,
                len: 0x1000,
                pgoff: 0,
                prot: 5,
                build_id: vec![1, 2, 3],
                path: path.to_vec(),
            }))]
        );
        ev[5] = module::sizes(5, 9, path.len());
        put(&r, &ev);
        assert!(!r.drain(|_| {}));
        // An unknown long kind is a malformed ring: the drain stops.
        put(&r, &[Word::new(99, 0).0]);
        assert!(!r.drain(|_| {}));
    }
}
