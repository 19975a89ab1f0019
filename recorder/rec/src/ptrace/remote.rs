//! Calling a function inside another process: a thread in a ptrace stop is given the
//! arguments in its registers, a return address of 0 and the function's address as its
//! program counter, and let run; when the function returns, the jump to 0 faults and the
//! thread stops again with the result in its return register. Its registers are then put back
//! as they were, so it carries on where it was stopped (a system call it was blocked in is
//! restarted, as after any ptrace stop).
//!
//! x86_64, AArch64 and 32-bit ARM (ARM or Thumb functions); others say they are not supported.

use std::io;
use std::time::{Duration, Instant};

/// The general-purpose registers of a stopped thread (`NT_PRSTATUS`), as machine words.
#[derive(Clone)]
pub(super) struct Regs {
    /// The regset's words.
    pub(super) words: [usize; 64],
    /// Its length in bytes.
    pub(super) len: usize,
}

/// `NT_PRSTATUS` from elf.h: the general-purpose registers' regset.
const NT_PRSTATUS: usize = 1;

/// The general-purpose registers of stopped thread `tid`.
pub(super) fn get_regs(tid: u32) -> io::Result<Regs> {
    let mut r = Regs {
        words: [0; 64],
        len: 0,
    };
    let mut iov = libc::iovec {
        iov_base: r.words.as_mut_ptr().cast(),
        iov_len: std::mem::size_of_val(&r.words),
    };
    // SAFETY: the kernel writes at most iov_len bytes into the words and updates iov_len.
    let ok = unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGSET,
            tid as libc::pid_t,
            NT_PRSTATUS,
            &mut iov as *mut libc::iovec,
        )
    } == 0;
    if !ok {
        return Err(io::Error::last_os_error());
    }
    r.len = iov.iov_len;
    Ok(r)
}

fn set_regs(tid: u32, r: &Regs) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: r.words.as_ptr() as *mut libc::c_void,
        iov_len: r.len,
    };
    // SAFETY: the kernel reads iov_len bytes of the words.
    let ok = unsafe {
        libc::ptrace(
            libc::PTRACE_SETREGSET,
            tid as libc::pid_t,
            NT_PRSTATUS,
            &mut iov as *mut libc::iovec,
        )
    } == 0;
    if ok {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Where each architecture keeps what a call needs, as word indexes of the regset.
struct Layout {
    args: &'static [usize],
    sp: usize,
    pc: usize,
    result: usize,
    /// The link register, or `None` where the return address goes on the stack.
    lr: Option<usize>,
    /// Stack alignment at the call.
    align: usize,
}

#[cfg(target_arch = "x86_64")]
const LAYOUT: Option<Layout> = Some(Layout {
    args: &[14, 13, 12, 11], // rdi, rsi, rdx, rcx
    sp: 19,
    pc: 16,
    result: 10,
    lr: None,
    align: 16,
});
#[cfg(target_arch = "aarch64")]
const LAYOUT: Option<Layout> = Some(Layout {
    args: &[0, 1, 2, 3],
    sp: 31,
    pc: 32,
    result: 0,
    lr: Some(30),
    align: 16,
});
#[cfg(target_arch = "arm")]
const LAYOUT: Option<Layout> = Some(Layout {
    args: &[0, 1, 2, 3],
    sp: 13,
    pc: 15,
    result: 0,
    lr: Some(14),
    align: 8,
});
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "arm")))]
const LAYOUT: Option<Layout> = None;

/// How long a called function may take before rec gives up on the process.
const TIMEOUT: Duration = Duration::from_secs(20);

/// Writes `data` into thread `tid`'s memory at `addr`.
fn write_memory(tid: u32, addr: u64, data: &[u8]) -> io::Result<()> {
    let local = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: the kernel reads `data` and writes the other process's memory.
    let n = unsafe { libc::process_vm_writev(tid as libc::pid_t, &local, 1, &remote, 1, 0) };
    if n == data.len() as isize {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A thread in a ptrace stop, ready to run functions: each string given to [`Caller::call`]
/// is copied onto its stack, well below where the thread was.
pub struct Caller {
    tid: u32,
    saved: Regs,
    /// A signal that arrived for the thread during a call, to deliver when it is let go.
    pub pending_signal: i32,
}

impl Caller {
    /// Takes thread `tid`, which must be in a ptrace stop of ours.
    pub fn new(tid: u32) -> io::Result<Caller> {
        if LAYOUT.is_none() {
            return Err(io::Error::other(
                "calling into another process is not supported on this architecture",
            ));
        }
        Ok(Caller {
            tid,
            saved: get_regs(tid)?,
            pending_signal: 0,
        })
    }

    /// Calls the function at `func` with `args` (integers, or addresses of `strings` copied
    /// into the thread's stack: an argument `u64::MAX - i` stands for the address of string
    /// `i`) and returns its result.
    pub fn call(&mut self, func: u64, args: &[u64], strings: &[&[u8]]) -> io::Result<u64> {
        let Some(l) = LAYOUT.as_ref() else {
            return Err(io::Error::other("not supported on this architecture"));
        };
        let mut regs = self.saved.clone();
        // Below the red zone (128 bytes on x86_64) and anything the thread may have there.
        let mut sp = self.saved.words[l.sp] as u64 - 1024;
        let mut addresses = Vec::new();
        for s in strings {
            sp = (sp - s.len() as u64 - 1) & !15;
            let mut bytes = s.to_vec();
            bytes.push(0);
            write_memory(self.tid, sp, &bytes)?;
            addresses.push(sp);
        }
        sp = (sp - 256) & !(l.align as u64 - 1);
        for (i, &a) in args.iter().enumerate().take(l.args.len()) {
            let v = match (u64::MAX - a) as usize {
                k if k < addresses.len() => addresses[k],
                _ => a,
            };
            regs.words[l.args[i]] = v as usize;
        }
        match l.lr {
            Some(lr) => regs.words[lr] = 0,
            None => {
                // The return address, pushed: at the callee's entry sp + 8 is aligned.
                sp -= std::mem::size_of::<usize>() as u64;
                write_memory(self.tid, sp, &0usize.to_ne_bytes())?;
            }
        }
        regs.words[l.sp] = sp as usize;
        regs.words[l.pc] = func as usize;
        arch_fixups(&mut regs, func);
        set_regs(self.tid, &regs)?;
        let result = self.run_until_return(l);
        // Whatever happened, the thread gets its own registers back.
        let restored = set_regs(self.tid, &self.saved);
        let r = result?;
        restored?;
        Ok(r)
    }

    /// Lets the thread run until the call returns to address 0.
    fn run_until_return(&mut self, l: &Layout) -> io::Result<u64> {
        let tid = self.tid as libc::pid_t;
        let mut signal = 0;
        let started = Instant::now();
        loop {
            // SAFETY: resuming a tracee of ours, with the signal to deliver (0: none).
            if unsafe { libc::ptrace(libc::PTRACE_CONT, tid, 0usize, signal as usize) } != 0 {
                return Err(io::Error::last_os_error());
            }
            signal = 0;
            let status = loop {
                let mut status = 0;
                // SAFETY: polling a tracee of ours.
                let r = unsafe { libc::waitpid(tid, &mut status, libc::__WALL | libc::WNOHANG) };
                if r == tid {
                    break status;
                }
                if r < 0 {
                    return Err(io::Error::last_os_error());
                }
                if started.elapsed() > TIMEOUT {
                    return Err(io::Error::other(format!(
                        "the call did not return within {} s",
                        TIMEOUT.as_secs()
                    )));
                }
                std::thread::sleep(Duration::from_millis(1));
            };
            if !libc::WIFSTOPPED(status) {
                return Err(io::Error::other("the thread ended during the call"));
            }
            let sig = libc::WSTOPSIG(status);
            if sig == libc::SIGSEGV || sig == libc::SIGBUS {
                let now = get_regs(self.tid)?;
                if now.words[l.pc] & !1 == 0 {
                    return Ok(now.words[l.result] as u64);
                }
                return Err(io::Error::other(format!(
                    "the called function crashed (signal {sig} at {:#x})",
                    now.words[l.pc]
                )));
            }
            // A ptrace event stop resumes as it is; another signal is kept for the end.
            if status >> 16 == 0
                && sig != libc::SIGTRAP
                && sig != libc::SIGSTOP
                && self.pending_signal == 0
            {
                self.pending_signal = sig;
            }
        }
    }
}

/// What else a call needs on some architectures.
#[allow(unused_variables)]
fn arch_fixups(regs: &mut Regs, func: u64) {
    #[cfg(target_arch = "x86_64")]
    {
        // orig_rax = -1: no system call to restart on the way into the function.
        regs.words[15] = usize::MAX;
        regs.words[10] = 0;
    }
    #[cfg(target_arch = "arm")]
    {
        // Thumb functions have bit 0 set: run them in Thumb state (CPSR.T), without the
        // If-Then state of wherever the thread stopped.
        const T: usize = 1 << 5;
        const IT: usize = (0x3f << 10) | (0x3 << 25);
        let cpsr = regs.words[16] & !IT;
        regs.words[16] = if func & 1 != 0 { cpsr | T } else { cpsr & !T };
        regs.words[15] = (func & !1) as usize;
    }
}
