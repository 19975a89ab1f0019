//! The few system calls the hot path makes, as thin wrappers. Every one of them is
//! async-signal-safe (raw syscalls or the vDSO clock), which is what a malloc replacement may
//! call on musl and what a signal handler that allocates needs.

use core::sync::atomic::AtomicU32;

/// CLOCK_MONOTONIC in nanoseconds, the clock `rec`'s perf events use, read at the kernel
/// tick's resolution (CLOCK_MONOTONIC_COARSE, 1-10 ms): heap timelines need no finer (heaptrack
/// stamps every 10 ms), the coarse read is cheaper, and runs of equal times let the recording
/// compress to a fraction.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec; clock_gettime is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread's id (a system call; callers cache it).
pub fn gettid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// The process id (a system call on current glibc; callers cache it).
pub fn getpid() -> u32 {
    // SAFETY: getpid cannot fail.
    unsafe { libc::getpid() as u32 }
}

/// Waits while `*word == expected`, at most `timeout_ns` (0: no limit). `shared` selects a
/// futex that another process (rec) wakes.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout_ns: u64, shared: bool) {
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as _,
        tv_nsec: (timeout_ns % 1_000_000_000) as _,
    };
    let op = if shared {
        libc::FUTEX_WAIT
    } else {
        libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG
    };
    let tsp = if timeout_ns == 0 {
        core::ptr::null()
    } else {
        &ts as *const libc::timespec
    };
    // SAFETY: word is a valid, aligned u32 for the duration of the call; the kernel only
    // compares it. EINTR/EAGAIN/ETIMEDOUT are all fine: callers re-check their condition.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), op, expected, tsp) };
}

/// Wakes one waiter of a process-private futex.
pub fn futex_wake_one(word: &AtomicU32) {
    // SAFETY: as futex_wait.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        )
    };
}

/// Anonymous private memory, zeroed, or null. A system call, not the C library's `mmap`:
/// that name binds to the interposer's own hook (`crate::mmap`), and the interposer's
/// memory is not the program's.
pub fn map_anon(bytes: usize) -> *mut u8 {
    let p = raw_mmap(
        core::ptr::null_mut(),
        bytes,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
        -1,
        0,
    );
    if p == libc::MAP_FAILED {
        core::ptr::null_mut()
    } else {
        p as *mut u8
    }
}

/// `mmap` as a system call (offset in bytes, a multiple of 4096 on 32-bit targets, whose
/// `mmap2` takes 4096-byte units); `MAP_FAILED` with errno set on failure. Signal-safe.
pub fn raw_mmap(
    addr: *mut libc::c_void,
    len: usize,
    prot: i32,
    flags: i32,
    fd: i32,
    offset: u64,
) -> *mut libc::c_void {
    #[cfg(target_pointer_width = "32")]
    let (nr, off) = (libc::SYS_mmap2, (offset / 4096) as libc::c_long);
    #[cfg(target_pointer_width = "64")]
    let (nr, off) = (libc::SYS_mmap, offset as libc::c_long);
    // SAFETY: the kernel checks every argument; the caller owns what it maps over.
    let r = unsafe { libc::syscall(nr, addr, len, prot, flags, fd, off) };
    if r == -1 {
        libc::MAP_FAILED
    } else {
        r as *mut libc::c_void
    }
}

/// `munmap` as a system call (see [`map_anon`] for why): 0 or -1 with errno set.
///
/// # Safety
/// Nothing may use the range afterwards.
pub unsafe fn unmap(addr: *mut libc::c_void, len: usize) -> i32 {
    // SAFETY: per the function's contract.
    unsafe { libc::syscall(libc::SYS_munmap, addr, len) as i32 }
}

/// Reads a NUL-terminated environment variable without allocating (getenv is not
/// async-signal-safe on every libc; reading `environ` is).
pub fn env(name: &str) -> Option<&'static [u8]> {
    extern "C" {
        static environ: *const *const libc::c_char;
    }
    // SAFETY: environ is a NULL-terminated array of NUL-terminated strings owned by libc; we
    // only read it, early in the process or on first use.
    unsafe {
        let mut p = environ;
        if p.is_null() {
            return None;
        }
        while !(*p).is_null() {
            let s = core::ffi::CStr::from_ptr(*p).to_bytes();
            if s.len() > name.len() && s.starts_with(name.as_bytes()) && s[name.len()] == b'=' {
                return Some(&s[name.len() + 1..]);
            }
            p = p.add(1);
        }
    }
    None
}

/// Parses a decimal number.
pub fn parse_u32(s: &[u8]) -> Option<u32> {
    if s.is_empty() || s.len() > 10 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as u64;
    }
    u32::try_from(v).ok()
}

/// A short line of text built without allocating, for diagnostics written with `write(2)`.
pub struct Line {
    buf: [u8; 256],
    len: usize,
}

impl Line {
    /// Empty.
    pub const fn new() -> Line {
        Line {
            buf: [0; 256],
            len: 0,
        }
    }

    /// Appends bytes (cut at the buffer's end).
    pub fn push(&mut self, b: &[u8]) {
        let n = b.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&b[..n]);
        self.len += n;
    }

    /// Appends a number in decimal.
    pub fn num(&mut self, mut v: u64) {
        let mut d = [0u8; 20];
        let mut i = d.len();
        loop {
            i -= 1;
            d[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&d[i..]);
    }

    /// Writes the line to `fd` (best effort).
    pub fn write(&self, fd: i32) {
        // SAFETY: writing our own buffer; write is async-signal-safe.
        unsafe { libc::write(fd, self.buf.as_ptr() as *const libc::c_void, self.len) };
    }
}

impl Default for Line {
    fn default() -> Self {
        Self::new()
    }
}
