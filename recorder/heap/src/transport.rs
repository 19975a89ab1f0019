//! The producer end of the shared-memory ring to `rec` (protocol in `crossprof-heap-wire`).
//!
//! Connecting is a handful of system calls made once per process (after a fork, the child
//! connects anew with its own pid; after an exec, the new image does): `memfd_create`,
//! `mmap`, `socket`, `connect`, `sendmsg` of the memfd, `close`. Nothing stays open in the
//! application (a program that closes every descriptor cannot break the transport), and every
//! call is async-signal-safe. Writing is plain stores plus one release store of `head`;
//! allocations and frees take their short forms (one or two words) whenever they can.

use core::sync::atomic::Ordering;

use crossprof_heap_wire::{
    kind, module, short_alloc, short_free, Hello, RingHeader, Word, DEFAULT_DATA_BYTES,
    HEADER_BYTES, MAGIC,
};

use crate::sys;

/// A connected ring.
pub struct Producer {
    hdr: *const RingHeader,
    data: *mut u64,
    /// Data-area size in bytes.
    size: u64,
    head: u64,
    /// rec's tail as last read: space up to it is free for sure.
    tail: u64,
    /// The thread and time rec will give the next short event (see the wire crate).
    tid: u32,
    time: u64,
    rec_pid: u32,
}

// SAFETY: used only under the interposer's global lock.
unsafe impl Send for Producer {}

/// Why there is no ring: recording stays off for this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoRing {
    /// Not launched by `rec --heap` (no socket name in the environment).
    NotRecording,
    /// A system call failed (the errno), e.g. `rec` is gone (ECONNREFUSED).
    Sys(i32),
}

fn errno() -> i32 {
    // SAFETY: reading the thread's errno.
    unsafe { *libc::__errno_location() }
}

impl Producer {
    /// Creates the ring and hands it to `rec`.
    pub fn connect() -> Result<Producer, NoRing> {
        let name =
            crate::attach::setting(crossprof_heap_wire::ENV_SOCKET).ok_or(NoRing::NotRecording)?;
        let rec_pid = crate::attach::setting(crossprof_heap_wire::ENV_REC_PID)
            .and_then(sys::parse_u32)
            .unwrap_or(0);
        if name.is_empty() || name.len() > 100 {
            return Err(NoRing::NotRecording);
        }
        let map_bytes = HEADER_BYTES + DEFAULT_DATA_BYTES;
        // SAFETY: plain system calls on descriptors we own; the mapping is fresh.
        unsafe {
            let fd = libc::syscall(
                libc::SYS_memfd_create,
                c"crossprof-heap".as_ptr(),
                libc::MFD_CLOEXEC,
            ) as i32;
            if fd < 0 {
                return Err(NoRing::Sys(errno()));
            }
            if libc::ftruncate(fd, map_bytes as libc::off_t) != 0 {
                let e = errno();
                libc::close(fd);
                return Err(NoRing::Sys(e));
            }
            let base = crate::sys::raw_mmap(
                core::ptr::null_mut(),
                map_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            );
            if base == libc::MAP_FAILED {
                let e = errno();
                libc::close(fd);
                return Err(NoRing::Sys(e));
            }
            let hdr = base as *const RingHeader;
            (*hdr)
                .data_bytes
                .store(DEFAULT_DATA_BYTES as u64, Ordering::Relaxed);
            (*hdr).magic.store(MAGIC, Ordering::Release);
            let sent = send_hello(name, fd, map_bytes);
            libc::close(fd);
            if let Err(e) = sent {
                crate::sys::unmap(base, map_bytes);
                return Err(NoRing::Sys(e));
            }
            Ok(Producer {
                hdr,
                data: (base as *mut u8).add(HEADER_BYTES) as *mut u64,
                size: DEFAULT_DATA_BYTES as u64,
                head: 0,
                tail: 0,
                tid: 0,
                time: 0,
                rec_pid,
            })
        }
    }

    fn header(&self) -> &'static RingHeader {
        // SAFETY: the header page is never unmapped once a producer exists (a producer has no
        // Drop; a fork child drops its parent's without unmapping), and it only holds atomics.
        unsafe { &*self.hdr }
    }

    /// Counts events that could not be recorded.
    pub fn lost(&self, n: u64) {
        self.header().lost.fetch_add(n, Ordering::Relaxed);
    }

    /// Records an allocation (see the wire crate for the forms). `false` when `rec` is gone:
    /// the caller stops recording (the application must never wait for a dead recorder).
    #[inline]
    pub fn alloc(&mut self, tid: u32, time: u64, addr: u64, size: u64, stack: u64) -> bool {
        if !self.context(tid, time) {
            return false;
        }
        match short_alloc(addr, size, stack) {
            Some(w) => self.put(w),
            None => self.long(kind::ALLOC, tid, [addr, size, stack]),
        }
    }

    /// Records a free, as [`Producer::alloc`].
    #[inline]
    pub fn free(&mut self, tid: u32, time: u64, addr: u64) -> bool {
        if !self.context(tid, time) {
            return false;
        }
        match short_free(addr) {
            Some(w) => self.put([w]),
            None => self.long(kind::FREE, tid, [addr]),
        }
    }

    /// Sends a new trace-tree node.
    pub fn node(&mut self, tid: u32, id: u64, parent: u64, ip: u64) -> bool {
        self.long(kind::NODE, tid, [id, parent, ip])
    }

    /// Records one of the program's own anonymous mappings, an unmap or a remap
    /// ([`kind::MMAP`], [`kind::MUNMAP`], [`kind::MREMAP`]; see `crate::mmap`).
    pub fn mapping<const N: usize>(&mut self, k: u8, tid: u32, time: u64, words: [u64; N]) -> bool {
        self.context(tid, time) && self.long(k, tid, words)
    }

    /// Tells rec that the modules changed.
    pub fn maps(&mut self, tid: u32, time: u64) -> bool {
        self.long(kind::MAPS, tid, [time])
    }

    /// Whether rec (still) wants module events from this process (see the wire crate's
    /// `module`): until it has looked at the process, and then if it is emulated.
    pub fn modules_wanted(&self) -> bool {
        self.header().modules.load(Ordering::Relaxed) != module::UNWANTED
    }

    /// Describes one executable segment of a loaded module ([`kind::MODULE`]): `head` is
    /// (time, start, length, file offset, protection); the build-id and the path are cut to
    /// their maxima. Plain stores into the ring, as every event.
    pub fn module(&mut self, tid: u32, head: [u64; 5], build_id: &[u8], path: &[u8]) -> bool {
        let id = &build_id[..build_id.len().min(module::MAX_BUILD_ID)];
        let path = &path[..path.len().min(module::MAX_PATH)];
        let n = module::payload_words(id.len(), path.len());
        let bytes = 8 * (1 + n as u64);
        let Some(w) = self.reserve(bytes) else {
            return false;
        };
        let [time, start, len, pgoff, prot] = head;
        let words = [
            time,
            start,
            len,
            pgoff,
            module::sizes(prot as u32, id.len(), path.len()),
        ];
        let tail = (0..module::words_for(id.len()))
            .map(|i| module::pack(id, i))
            .chain((0..module::words_for(path.len())).map(|i| module::pack(path, i)));
        // SAFETY: reserve made [w, w + 1 + n) free and inside the data area.
        unsafe {
            *w = Word::with_words(kind::MODULE, tid, n).0;
            for (i, v) in words.into_iter().chain(tail).enumerate() {
                *w.add(1 + i) = v;
            }
        }
        self.tid = tid;
        self.publish(bytes);
        true
    }

    /// Writes the thread and the time of the next event when they changed.
    #[inline]
    fn context(&mut self, tid: u32, time: u64) -> bool {
        if tid != self.tid && !self.long(kind::THREAD, tid, []) {
            return false;
        }
        if time != self.time {
            if !self.long(kind::TIME, tid, [time]) {
                return false;
            }
            self.time = time;
        }
        true
    }

    /// Writes a long event: header word and payload. Its thread becomes the current one.
    #[inline]
    fn long<const N: usize>(&mut self, k: u8, tid: u32, payload: [u64; N]) -> bool {
        let bytes = 8 * (1 + N as u64);
        let Some(w) = self.reserve(bytes) else {
            return false;
        };
        // SAFETY: reserve made [w, w + 1 + N) free and inside the data area.
        unsafe {
            *w = Word::new(k, tid).0;
            for (i, v) in payload.into_iter().enumerate() {
                *w.add(1 + i) = v;
            }
        }
        self.tid = tid;
        self.publish(bytes);
        true
    }

    /// Writes the words of a short event as they are.
    #[inline]
    fn put<const N: usize>(&mut self, words: [u64; N]) -> bool {
        let bytes = 8 * N as u64;
        let Some(w) = self.reserve(bytes) else {
            return false;
        };
        // SAFETY: reserve made [w, w + N) free and inside the data area.
        unsafe {
            for (i, v) in words.into_iter().enumerate() {
                *w.add(i) = v;
            }
        }
        self.publish(bytes);
        true
    }

    /// Room for an event of `bytes` at the head, waiting while `rec` drains: its first word
    /// (after a [`kind::PAD`] when it would not fit before the end of the data area). `None`
    /// when rec is gone. The data area's size is a power of two, so positions are masks.
    #[inline]
    fn reserve(&mut self, bytes: u64) -> Option<*mut u64> {
        let mask = self.size - 1;
        let pos = self.head & mask;
        let contiguous = self.size - pos;
        let need = if bytes <= contiguous {
            bytes
        } else {
            contiguous + bytes
        };
        // The free space is checked against rec's last published tail first; only when
        // that is not enough does the producer look again (and maybe wait).
        if self.size - (self.head - self.tail) < need {
            self.tail = self.header().tail.load(Ordering::Acquire);
            if self.size - (self.head - self.tail) < need && !self.wait_for(need) {
                return None;
            }
        }
        if bytes > contiguous {
            // SAFETY: pos is a word inside the data area.
            unsafe { *self.data.add((pos / 8) as usize) = Word::new(kind::PAD, 0).0 };
            self.head += contiguous;
        }
        // SAFETY: the offset is a word inside the data area.
        Some(unsafe { self.data.add(((self.head & mask) / 8) as usize) })
    }

    /// Makes the event just written visible to rec.
    #[inline]
    fn publish(&mut self, bytes: u64) {
        self.head += bytes;
        self.header().head.store(self.head, Ordering::Release);
        if self.head - self.tail > self.size / 2 {
            self.ring_bell();
        }
    }

    /// Asks rec to drain now rather than at its next tick (once until it has drained: a
    /// plain load first, as the bell stays rung for many events until rec answers).
    fn ring_bell(&mut self) {
        let h = self.header();
        self.tail = h.tail.load(Ordering::Acquire);
        if self.head - self.tail <= self.size / 2 || h.bell.load(Ordering::Relaxed) != 0 {
            return;
        }
        if self.rec_pid != 0 && h.bell.swap(1, Ordering::AcqRel) == 0 {
            // SAFETY: kill is async-signal-safe; SIGURG is ignored by default, so a recycled
            // pid would not be hurt.
            unsafe { libc::kill(self.rec_pid as i32, libc::SIGURG) };
        }
    }

    fn wait_for(&mut self, need: u64) -> bool {
        let mut waited = 0u32;
        loop {
            let h = self.header();
            if h.closed.load(Ordering::Acquire) != 0 {
                return false;
            }
            self.tail = h.tail.load(Ordering::Acquire);
            if self.size - (self.head - self.tail) >= need {
                return true;
            }
            let seq = h.seq.load(Ordering::Acquire);
            h.waiters.store(1, Ordering::Release);
            self.ring_bell();
            let h = self.header();
            self.tail = h.tail.load(Ordering::Acquire);
            if self.size - (self.head - self.tail) >= need {
                return true;
            }
            sys::futex_wait(&h.seq, seq, 10_000_000, true);
            waited += 1;
            // About once a second, make sure rec still exists.
            if waited >= 100 && self.rec_pid != 0 {
                waited = 0;
                // SAFETY: signal 0 only checks for existence.
                let gone =
                    unsafe { libc::kill(self.rec_pid as i32, 0) } != 0 && errno() == libc::ESRCH;
                if gone {
                    return false;
                }
            }
        }
    }
}

/// Sends the hello message with the memfd to `rec`'s abstract socket `name`.
fn send_hello(name: &[u8], fd: i32, map_bytes: usize) -> Result<(), i32> {
    // SAFETY: plain socket calls on a descriptor we own; all structures are local and valid.
    unsafe {
        let s = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return Err(errno());
        }
        let mut addr: libc::sockaddr_un = core::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        // Abstract namespace: sun_path[0] = 0, then the name.
        for (i, &b) in name.iter().enumerate() {
            addr.sun_path[1 + i] = b as libc::c_char;
        }
        let len = (core::mem::size_of::<libc::sa_family_t>() + 1 + name.len()) as u32;
        let r = loop {
            let r = libc::connect(s, &addr as *const _ as *const libc::sockaddr, len);
            if r == 0 || errno() != libc::EINTR {
                break r;
            }
        };
        if r != 0 {
            let e = errno();
            libc::close(s);
            return Err(e);
        }
        let hello = Hello {
            magic: MAGIC,
            pid: sys::getpid(),
            ppid: libc::getppid() as u32,
            map_bytes: map_bytes as u64,
            code: send_hello as *const () as usize as u64,
        }
        .to_bytes();
        let mut iov = libc::iovec {
            iov_base: hello.as_ptr() as *mut libc::c_void,
            iov_len: hello.len(),
        };
        #[repr(C)]
        struct Cmsg {
            hdr: libc::cmsghdr,
            fd: i32,
            pad: i32,
        }
        let mut cmsg: Cmsg = core::mem::zeroed();
        cmsg.hdr.cmsg_level = libc::SOL_SOCKET;
        cmsg.hdr.cmsg_type = libc::SCM_RIGHTS;
        cmsg.hdr.cmsg_len = libc::CMSG_LEN(4) as _;
        cmsg.fd = fd;
        let mut msg: libc::msghdr = core::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = &mut cmsg as *mut Cmsg as *mut libc::c_void;
        msg.msg_controllen = libc::CMSG_SPACE(4) as _;
        let r = loop {
            let r = libc::sendmsg(s, &msg, libc::MSG_NOSIGNAL);
            if r >= 0 || errno() != libc::EINTR {
                break r;
            }
        };
        let e = errno();
        libc::close(s);
        if r != hello.len() as isize {
            return Err(e);
        }
    }
    Ok(())
}
