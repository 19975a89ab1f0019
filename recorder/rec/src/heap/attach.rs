//! `rec --heap -p PID`: heap recording of a process that is already running, without gdb or
//! anything else on the board. Its main thread is stopped with ptrace and made to call the C
//! library's `dlopen` on the interposer, then the interposer's `crossprof_heap_attach` with
//! rec's socket: the interposer connects its ring as at a launch and redirects every loaded
//! module's malloc-family calls to itself by rewriting their call slots (see the interposer's
//! `got` module). The thread then carries on where it was; the other threads never stop.
//! At the end, `crossprof_heap_detach` is called the same way: the slots are put back and the
//! process runs on without recording.
//!
//! Blocks allocated before the attach and freed after it are frees of unknown blocks, which
//! the host counts apart (as it does for a `--from` window); in sampled mode (`--heap-sample`,
//! the rate passed to the interposer with the socket) only frees of sampled blocks are
//! recorded, so those frees are not seen at all. Where attaching is impossible (a
//! static program, no glibc, ptrace refused) rec exits 2 saying why.

use std::path::{Path, PathBuf};

#[cfg(target_pointer_width = "32")]
use object::elf::FileHeader32;
#[cfg(target_pointer_width = "64")]
use object::elf::FileHeader64;
use object::read::elf::ElfFile;
use object::{Endianness, Object, ObjectSegment, ObjectSymbol};

use super::{Heap, MapsSource};
use crate::error::RecError;
use crate::procfs;
use crate::ptrace::remote::Caller;
use crate::ptrace::Stopped;

/// `RTLD_NOW` of dlfcn.h (the same on every Linux architecture).
const RTLD_NOW: u64 = 2;

/// A process with the interposer attached: where to call to let it go.
pub struct Injected {
    pid: u32,
    detach: u64,
}

/// Checks that `pid` can take the interposer and prepares rec's side: the library to load
/// and the socket it will connect to.
pub fn prepare(pid: u32) -> Result<(Heap, PathBuf), RecError> {
    if procfs::has_exited(pid) {
        return Err(RecError::NoSuchProcess(pid));
    }
    let lib = super::preload::find_library()?;
    let exe = PathBuf::from(format!("/proc/{pid}/exe"));
    if super::preload::is_static_elf(&exe) {
        let name = std::fs::read_link(&exe).unwrap_or(exe);
        return Err(RecError::StaticProgram(name.display().to_string()));
    }
    let h = Heap::new(MapsSource::Perf)
        .map_err(|e| RecError::Io("--heap: cannot listen on a Unix socket".into(), e))?;
    Ok((h, lib))
}

/// The ELF class of the programs rec attaches to: its own (one parser instantiated, not the
/// four of `object::File`, which keeps rec small).
#[cfg(target_pointer_width = "64")]
type Elf<'a> = ElfFile<'a, FileHeader64<Endianness>>;
#[cfg(target_pointer_width = "32")]
type Elf<'a> = ElfFile<'a, FileHeader32<Endianness>>;

/// A module mapped into `pid`: its path and load address.
struct Module {
    path: String,
    base: u64,
    elf: Vec<u8>,
}

impl Module {
    /// The module of `pid` whose file name satisfies `is`, with its ELF image read through
    /// the process's root.
    fn find(pid: u32, is: impl Fn(&str) -> bool) -> Option<Module> {
        let maps = procfs::maps(pid).ok()?;
        let m = maps
            .iter()
            .find(|m| m.pgoff == 0 && is(m.path.rsplit('/').next().unwrap_or(&m.path)))?;
        let elf = std::fs::read(format!("/proc/{pid}/root{}", m.path)).ok()?;
        let file = Elf::parse(&*elf).ok()?;
        let first = file.segments().map(|s| s.address()).min().unwrap_or(0);
        let page = procfs::page_size() as u64;
        Some(Module {
            path: m.path.clone(),
            base: m.start - (first & !(page - 1)),
            elf,
        })
    }

    /// The run-time address of exported function `name`.
    fn symbol(&self, name: &str) -> Option<u64> {
        let file = Elf::parse(&*self.elf).ok()?;
        let s = file
            .dynamic_symbols()
            .find(|s| s.name() == Ok(name) && s.address() != 0)?;
        Some(self.base + s.address())
    }
}

/// glibc's C library by file name (`libc.so.6`, or `libc-2.31.so` in older releases).
fn is_libc(name: &str) -> bool {
    name.starts_with("libc.so") || (name.starts_with("libc-") && name.ends_with(".so"))
}

/// Loads the interposer `lib` into `pid` and starts its recording to `socket`, of every
/// allocation or, with `sample`, of a sample with that mean bytes between samples.
pub fn inject(
    pid: u32,
    lib: &Path,
    socket: &str,
    sample: Option<u64>,
) -> Result<Injected, RecError> {
    let fail = |why: String| RecError::HeapAttach(pid, why);
    // Passed in a register of the process's own width.
    let mean = usize::try_from(sample.unwrap_or(0))
        .map_err(|_| fail("--heap-sample is above what this board's registers hold".into()))?;
    let libc = Module::find(pid, is_libc).ok_or_else(|| {
        fail("no glibc C library is mapped in it (only dynamically linked glibc programs can be attached to)".into())
    })?;
    let dlopen = libc
        .symbol("dlopen")
        .or_else(|| libc.symbol("__libc_dlopen_mode"))
        .ok_or_else(|| fail(format!("{} has no dlopen", libc.path)))?;
    let lib_path = lib.canonicalize().unwrap_or_else(|_| lib.to_path_buf());
    let lib_str = lib_path.display().to_string();
    let stopped = Stopped::stop_one(pid).map_err(|e| fail(stop_error(e)))?;
    let mut caller = Caller::new(pid).map_err(|e| fail(e.to_string()))?;
    let handle = caller
        .call(dlopen, &[u64::MAX, RTLD_NOW], &[lib_str.as_bytes()])
        .map_err(|e| fail(format!("dlopen of {lib_str} inside it: {e}")))?;
    if handle == 0 {
        let why = dlerror(&libc, &mut caller, pid).unwrap_or_default();
        return Err(fail(format!("dlopen of {lib_str} inside it failed {why}")));
    }
    let name = lib_path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let ours = Module::find(pid, |n| n == name)
        .ok_or_else(|| fail(format!("{lib_str} was loaded but is not in its maps")))?;
    let (attach, detach) = match (
        ours.symbol("crossprof_heap_attach"),
        ours.symbol("crossprof_heap_detach"),
    ) {
        (Some(a), Some(d)) => (a, d),
        _ => return Err(fail(format!("{lib_str} is not from this rec's release"))),
    };
    let slots = caller
        .call(
            attach,
            &[u64::MAX, std::process::id().into(), mean as u64],
            &[socket.as_bytes()],
        )
        .map_err(|e| fail(format!("starting the heap library inside it: {e}")))?;
    let pending = caller.pending_signal;
    drop(stopped);
    redeliver(pid, pending);
    if slots as i64 <= 0 {
        return Err(fail(
            "the heap library inside it could not reach rec".into(),
        ));
    }
    eprintln!("rec: attached to {pid}: {slots} malloc-family call slots redirected");
    Ok(Injected { pid, detach })
}

impl Injected {
    /// Puts the process's call slots back and stops its recording; the process runs on. A
    /// process that has ended needs nothing.
    pub fn detach(self) {
        if procfs::has_exited(self.pid) {
            return;
        }
        let result = Stopped::stop_one(self.pid).and_then(|stopped| {
            let mut caller = Caller::new(self.pid)?;
            let r = caller.call(self.detach, &[], &[]);
            let pending = caller.pending_signal;
            drop(stopped);
            redeliver(self.pid, pending);
            r
        });
        if let Err(e) = result {
            eprintln!(
                "rec: could not detach the heap library from {} ({e}); it keeps forwarding \
                 allocations but records nothing once rec is gone",
                self.pid
            );
        }
    }
}

/// The loader's message after a failed dlopen, read from the process.
fn dlerror(libc: &Module, caller: &mut Caller, pid: u32) -> Option<String> {
    let f = libc.symbol("dlerror")?;
    let at = caller.call(f, &[], &[]).ok().filter(|&a| a != 0)?;
    let bytes = crate::ptrace::read_memory(pid, at, 256);
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    Some(format!("({})", String::from_utf8_lossy(&bytes[..end])))
}

/// A signal that arrived for the thread while rec used it, sent again now that it runs.
fn redeliver(pid: u32, signal: i32) {
    if signal != 0 {
        // SAFETY: tgkill of the thread that should have received it.
        unsafe {
            libc::syscall(
                libc::SYS_tgkill,
                pid as libc::c_long,
                pid as libc::c_long,
                signal as libc::c_long,
            )
        };
    }
}

/// What to say when the process could not be stopped.
fn stop_error(e: std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) => {
            let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
                .map(|s| format!(" (kernel.yama.ptrace_scope is {})", s.trim()))
                .unwrap_or_default();
            format!(
                "the kernel does not let rec trace it{yama}: run rec as root or with \
                 CAP_SYS_PTRACE, or `sysctl -w kernel.yama.ptrace_scope=0`; a process already \
                 traced (gdb, strace) or whose seccomp filter forbids ptrace cannot be attached to"
            )
        }
        _ => format!("cannot stop it: {e}"),
    }
}
