//! The consumer end of one process's shared-memory ring (protocol in `crossprof-heap-wire`):
//! maps the memfd the interposer sent, decodes events between `tail` and `head`, releases the
//! space and wakes a producer waiting for it.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;

use crossprof_heap_wire::{kind, payload_words, RingHeader, Word, HEADER_BYTES, MAGIC};

/// Largest data area accepted from a producer (it says its own size; rec maps what it says).
const MAX_DATA_BYTES: u64 = 64 << 20;

/// One decoded event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

/// A mapped ring.
pub struct Ring {
    base: *mut u8,
    map_len: usize,
    size: u64,
    lost_seen: u64,
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
            let k = w.kind();
            if k == kind::PAD {
                tail += self.size - tail % self.size;
                continue;
            }
            let n = payload_words(k) as u64;
            if n == 0 || tail + 8 * (n + 1) > head || tail % self.size + 8 * (n + 1) > self.size {
                ok = false;
                break;
            }
            let p = |i: u64| self.word(tail + 8 * (i + 1));
            let ev = match k {
                kind::ALLOC => Event::Alloc {
                    tid: w.tid(),
                    time: p(0),
                    addr: p(1),
                    size: p(2),
                    stack: p(3),
                },
                kind::FREE => Event::Free {
                    tid: w.tid(),
                    time: p(0),
                    addr: p(1),
                },
                kind::NODE => Event::Node {
                    id: p(0),
                    parent: p(1),
                    ip: p(2),
                },
                _ => Event::Maps { time: p(0) },
            };
            f(ev);
            tail += 8 * (n + 1);
        }
        let h = self.header();
        h.tail
            .store(if ok { tail } else { head }, Ordering::Release);
        h.seq.fetch_add(1, Ordering::Release);
        if h.waiters.swap(0, Ordering::AcqRel) != 0 {
            // SAFETY: waking waiters of a shared futex word inside our mapping.
            unsafe { libc::syscall(libc::SYS_futex, h.seq.as_ptr(), libc::FUTEX_WAKE, i32::MAX) };
        }
        ok
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
