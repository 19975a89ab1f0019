//! Stopping a process's threads for a moment with ptrace, reading their registers and stacks,
//! and letting them go (`rec --snapshot`), and calling functions inside a stopped thread
//! ([`remote`], for `rec --heap -p`). `PTRACE_SEIZE` + `PTRACE_INTERRUPT` rather than `PTRACE_ATTACH`: no
//! SIGSTOP is sent, so a thread blocked in a system call stays blocked in it afterwards (the
//! kernel restarts the call on detach), and a process that was stopped stays stopped.
//!
//! Every stopped thread is detached when [`Stopped`] is dropped, whatever happened in between:
//! the process must never be left stopped by rec.

pub mod remote;

use std::io;
use std::time::Instant;

use crossprof_format::{Arch, PerfRegs};

/// A thread of the process, stopped.
pub struct Thread {
    /// Its id.
    pub tid: u32,
}

/// The threads of one process, stopped until this is dropped.
pub struct Stopped {
    /// The threads that were stopped, in /proc order.
    pub threads: Vec<Thread>,
    /// Threads that ended or could not be stopped between the listing and the stop.
    pub missed: Vec<u32>,
    since: Instant,
}

impl Stopped {
    /// Seizes and interrupts every thread of `pid` listed in /proc, then waits for each to
    /// stop. Threads created meanwhile are taken in a second round. An error means the first
    /// thread could not be seized (no permission, or the process is gone): nothing was stopped.
    pub fn stop(pid: u32) -> io::Result<Stopped> {
        let mut s = Stopped {
            threads: Vec::new(),
            missed: Vec::new(),
            since: Instant::now(),
        };
        for _round in 0..2 {
            let tids = crate::procfs::threads(pid)?;
            let mut new = false;
            for tid in tids {
                if s.threads.iter().any(|t| t.tid == tid) || s.missed.contains(&tid) {
                    continue;
                }
                new = true;
                match seize(tid) {
                    Ok(()) => s.threads.push(Thread { tid }),
                    Err(e) if s.threads.is_empty() && tid == pid => return Err(e),
                    Err(_) => s.missed.push(tid),
                }
            }
            if !new {
                break;
            }
        }
        // Wait for every interrupted thread to reach its stop; one that exits instead is gone.
        let mut stopped = Vec::with_capacity(s.threads.len());
        for t in std::mem::take(&mut s.threads) {
            if wait_stop(t.tid) {
                stopped.push(t);
            } else {
                s.missed.push(t.tid);
            }
        }
        s.threads = stopped;
        Ok(s)
    }

    /// Seizes and interrupts thread `tid` alone and waits for its stop; the other threads
    /// run on (so that a lock one of them holds is released while `tid` is used).
    pub fn stop_one(tid: u32) -> io::Result<Stopped> {
        seize(tid)?;
        let mut s = Stopped {
            threads: vec![Thread { tid }],
            missed: Vec::new(),
            since: Instant::now(),
        };
        if !wait_stop(tid) {
            s.threads.clear();
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(s)
    }

    /// How long the process has been stopped so far.
    pub fn elapsed_ns(&self) -> u64 {
        self.since.elapsed().as_nanos() as u64
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        for t in &self.threads {
            // SAFETY: detaching a tracee of ours; a thread that died meanwhile gives ESRCH.
            unsafe {
                libc::ptrace(libc::PTRACE_DETACH, t.tid as libc::pid_t, 0usize, 0usize);
            }
        }
    }
}

/// `PTRACE_SEIZE` then `PTRACE_INTERRUPT`: the thread stops at its next chance, without a
/// signal of its own.
fn seize(tid: u32) -> io::Result<()> {
    let pid = tid as libc::pid_t;
    // SAFETY: plain ptrace requests on a thread id, no memory passed.
    unsafe {
        if libc::ptrace(libc::PTRACE_SEIZE, pid, 0usize, 0usize) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::ptrace(libc::PTRACE_INTERRUPT, pid, 0usize, 0usize) != 0 {
            let e = io::Error::last_os_error();
            libc::ptrace(libc::PTRACE_DETACH, pid, 0usize, 0usize);
            return Err(e);
        }
    }
    Ok(())
}

/// Waits until thread `tid` reports its ptrace stop; false when it exited instead. A signal
/// that arrives first is a signal-delivery stop: it is left pending for the thread (it is
/// delivered on detach: re-injection would run a handler now).
fn wait_stop(tid: u32) -> bool {
    let mut status = 0;
    // SAFETY: waiting for a tracee of ours; `status` is a valid out pointer.
    let r = unsafe { libc::waitpid(tid as libc::pid_t, &mut status, libc::__WALL) };
    r == tid as libc::pid_t && libc::WIFSTOPPED(status)
}

/// The user registers of a stopped thread, as a stack-copy sample carries them: one value per
/// set bit of the architecture's perf register mask ([`PerfRegs::user_mask`]), in bit order.
pub fn perf_regs(tid: u32) -> io::Result<(u64, Vec<u64>)> {
    let regs = remote::get_regs(tid)?;
    let words = regs.words;
    let got = regs.len / std::mem::size_of::<usize>();
    let Some(arch) = Arch::NATIVE else {
        return Err(io::Error::other(
            "registers of this architecture are unknown",
        ));
    };
    let mask = PerfRegs::of(arch).user_mask;
    let mut values = Vec::new();
    for bit in (0..64).filter(|b| mask & (1u64 << b) != 0) {
        let word = regset_word(bit)
            .filter(|&w| w < got)
            .ok_or_else(|| io::Error::other(format!("perf register {bit} not in the regset")))?;
        values.push(words[word] as u64);
    }
    Ok((mask, values))
}

/// Where perf register `n` (the kernel's `perf_regs.h` numbering) lies in the `NT_PRSTATUS`
/// regset (`struct user_regs_struct` / `user_pt_regs` of the architecture).
fn regset_word(n: u32) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    const TABLE: &[(u32, usize)] = &[(6, 4), (7, 19), (8, 16)]; // rbp, rsp, rip
    #[cfg(target_arch = "x86")]
    const TABLE: &[(u32, usize)] = &[(6, 5), (7, 15), (8, 12)]; // ebp, esp, eip
    #[cfg(target_arch = "aarch64")]
    const TABLE: &[(u32, usize)] = &[(29, 29), (30, 30), (31, 31), (32, 32)];
    #[cfg(target_arch = "riscv64")]
    const TABLE: &[(u32, usize)] = &[(0, 0), (1, 1), (2, 2), (8, 8)]; // pc, ra, sp, s0
    #[cfg(target_arch = "arm")]
    const TABLE: &[(u32, usize)] = &[
        (0, 0),
        (1, 1),
        (2, 2),
        (3, 3),
        (4, 4),
        (5, 5),
        (6, 6),
        (7, 7),
        (8, 8),
        (9, 9),
        (10, 10),
        (11, 11),
        (12, 12),
        (13, 13),
        (14, 14),
        (15, 15),
    ];
    #[cfg(not(any(
        target_arch = "x86_64",
        target_arch = "x86",
        target_arch = "aarch64",
        target_arch = "riscv64",
        target_arch = "arm"
    )))]
    const TABLE: &[(u32, usize)] = &[];
    TABLE.iter().find(|(p, _)| *p == n).map(|&(_, w)| w)
}

/// Copies up to `len` bytes of thread `tid`'s memory from `addr`; fewer when the range runs
/// into unmapped memory.
pub fn read_memory(tid: u32, addr: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: the kernel writes at most `len` bytes into `buf`; the remote address is only
    // read by the kernel in the other process.
    let n = unsafe { libc::process_vm_readv(tid as libc::pid_t, &local, 1, &remote, 1, 0) };
    buf.truncate(n.max(0) as usize);
    buf
}
