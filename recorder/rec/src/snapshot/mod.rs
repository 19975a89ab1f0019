//! `rec --snapshot -p PID`: where every thread of a running process is, now. The "poor man's
//! profiler" of embedded Linux courses (gdb's `thread apply all bt` in a loop), without gdb on
//! the board and without symbols there: each thread is stopped for a moment with ptrace
//! ([`crate::ptrace`]), its registers and used stack are copied, and the process runs on. The
//! recording is an ordinary one: one stack-copy [`Sample`] per thread and snapshot, which
//! `hostside` unwinds and symbolizes like any dwarf-mode sample, and a [`ThreadState`] beside
//! it with what /proc said the thread was doing ([`thread`]).
//!
//! A process that hangs (a deadlock, a blocked read) never switches, so sampling records
//! nothing of it; a snapshot sees it as it is.

mod thread;

use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crossprof_format::{
    Arch, Blob, Comm, End, FrameWriter, Header, Record, Sample, ThreadState, FORMAT_VERSION,
};

use crate::clock::{monotonic_ns, realtime_ns};
use crate::error::RecError;
use crate::identity::Identities;
use crate::procfs::{self, MapLine};
use crate::ptrace;

/// The stack copied per thread at most, from its stack pointer up to the top of its stack
/// mapping: eight times a sample's default copy, since a snapshot is taken once and must
/// reach the thread's entry through deep stacks (a stopped thread costs nothing while it is
/// copied but the stop itself).
pub const MAX_STACK: usize = 256 << 10;

/// What `rec --snapshot` was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Output file.
    pub out: PathBuf,
    /// The process.
    pub pid: u32,
    /// How many snapshots (`--count`).
    pub count: u32,
    /// Time between snapshots (`--interval`).
    pub interval: Duration,
}

impl Options {
    /// `--snapshot`'s options from the command line: a process to stop and nothing else to
    /// record.
    pub fn parsed(
        out: PathBuf,
        pid: Option<u32>,
        no_command: bool,
        count: Option<u32>,
        interval: Option<Duration>,
    ) -> Result<Options, String> {
        let (Some(pid), true) = (pid, no_command) else {
            return Err("--snapshot takes a running process: rec --snapshot -p PID".into());
        };
        let count = count.unwrap_or(1);
        if count == 0 {
            return Err("--count must be at least 1".into());
        }
        Ok(Options {
            out,
            pid,
            count,
            interval: interval.unwrap_or(Duration::from_millis(100)),
        })
    }
}

/// Takes the snapshots and writes the recording; rec's exit status (0).
pub fn run(opts: &Options) -> Result<i32, RecError> {
    let pid = opts.pid;
    if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
        return Err(RecError::NoSuchProcess(pid));
    }
    let output = |e| RecError::Output(opts.out.display().to_string(), e);
    let file = crate::segments::create_first(&opts.out).map_err(output)?;
    let mut w = FrameWriter::new(file, &header(pid)).map_err(output)?;
    crate::signals::install(None);
    let mut s = Snapshots {
        pid,
        identities: Identities::default(),
        maps_written: HashSet::new(),
        names: HashSet::new(),
        samples: 0,
    };
    if let Some((addr, data)) = procfs::own_vdso() {
        let name = "[vdso]".into();
        w.push(&Record::Blob(Blob { name, addr, data }))
            .map_err(output)?;
    }
    for index in 0..opts.count {
        if index > 0 {
            std::thread::sleep(opts.interval);
        }
        if crate::signals::stop_requested().is_some() || procfs::has_exited(pid) {
            break;
        }
        match s.take(index, &mut w) {
            Ok(()) => {}
            Err(e) if index == 0 => return Err(attach_error(pid, e)),
            Err(e) => {
                eprintln!("rec: snapshot {}: {e}; stopping", index + 1);
                break;
            }
        }
        w.flush().map_err(output)?;
    }
    let end = End {
        time: monotonic_ns(),
        exit_status: 0,
        samples: s.samples,
        lost_samples: 0,
    };
    w.finish(end).map_err(output)?;
    Ok(0)
}

/// The state kept between snapshots of one process.
struct Snapshots {
    pid: u32,
    identities: Identities,
    /// Mappings already written, by (start, end, path).
    maps_written: HashSet<(u64, u64, String)>,
    /// Threads whose name was written, with the name.
    names: HashSet<(u32, String)>,
    samples: u64,
}

impl Snapshots {
    /// One snapshot: /proc's view of each thread, the stop, the copies, the detach, and then
    /// (while the process runs again) the records.
    fn take(&mut self, index: u32, w: &mut FrameWriter<File>) -> io::Result<()> {
        let pid = self.pid;
        let maps = procfs::maps(pid)?;
        let before: Vec<(u32, thread::Seen)> = procfs::threads(pid)?
            .into_iter()
            .map(|tid| (tid, thread::read(pid, tid)))
            .collect();
        let time = monotonic_ns();
        let stopped = ptrace::Stopped::stop(pid)?;
        let mut captured = Vec::with_capacity(stopped.threads.len());
        for t in &stopped.threads {
            if let Ok((mask, regs)) = ptrace::perf_regs(t.tid) {
                let stack = copy_stack(t.tid, mask, &regs, &maps);
                captured.push((t.tid, mask, regs, stack));
            }
        }
        let stopped_ns = stopped.elapsed_ns();
        drop(stopped);
        eprintln!(
            "rec: snapshot {}: {} of {} threads, process stopped for {:.2} ms",
            index + 1,
            captured.len(),
            before.len(),
            stopped_ns as f64 / 1e6
        );
        self.write_maps(maps, time, w)?;
        for (tid, seen) in before {
            let comm = procfs::comm(pid, tid);
            if self.names.insert((tid, comm.clone())) {
                let exec = false;
                w.push(&Record::Comm(Comm {
                    time,
                    pid,
                    tid,
                    comm,
                    exec,
                }))?;
            }
            let copy = captured.iter_mut().find(|c| c.0 == tid);
            let is_captured = copy.is_some();
            if let Some((_, mask, regs, stack)) = copy {
                self.samples += 1;
                w.push(&Record::Sample(Sample {
                    time,
                    pid,
                    tid,
                    period: 1,
                    regs_mask: *mask,
                    regs: std::mem::take(regs),
                    stack: std::mem::take(stack),
                    ..Default::default()
                }))?;
            }
            w.push(&Record::ThreadState(ThreadState {
                time,
                pid,
                tid,
                index,
                state: seen.state,
                wchan: seen.wchan,
                kernel_stack: seen.kernel_stack,
                stopped_ns,
                captured: is_captured,
            }))?;
        }
        Ok(())
    }

    /// Writes the mappings not written before: code with its identity for the host's sysroot
    /// lookup, and the data mappings (thread stacks, heap, anonymous memory) that tell each
    /// thread's stack apart. Inaccessible guard pages are left out.
    fn write_maps(
        &mut self,
        maps: Vec<MapLine>,
        time: u64,
        w: &mut FrameWriter<File>,
    ) -> io::Result<()> {
        let root = format!("/proc/{}/root", self.pid);
        // The main thread's [stack] grows up to RLIMIT_STACK: its size for stack usage.
        if self.maps_written.is_empty() {
            if let Some(limit) = crate::data_maps::stack_limit(self.pid) {
                w.push(&limit)?;
            }
        }
        for m in maps {
            let exec = m.prot & libc::PROT_EXEC as u32 != 0;
            if (exec && m.path.is_empty()) || m.prot == 0 {
                continue;
            }
            if !self.maps_written.insert((m.start, m.end, m.path.clone())) {
                continue;
            }
            let mut r = m.into_mmap(self.pid, time);
            self.identities.fill(&mut r, Some(&root));
            w.push(&Record::Mmap(r))?;
        }
        Ok(())
    }
}

/// The used part of a stopped thread's stack: from its stack pointer to the end of the
/// mapping that holds it, at most [`MAX_STACK`] bytes.
fn copy_stack(tid: u32, mask: u64, regs: &[u64], maps: &[MapLine]) -> Vec<u8> {
    let Some(arch) = Arch::NATIVE else {
        return Vec::new();
    };
    let sp_reg = crossprof_format::PerfRegs::of(arch).sp;
    let Some(sp) = crossprof_format::PerfRegs::get(mask, regs, sp_reg) else {
        return Vec::new();
    };
    let top = maps
        .iter()
        .find(|m| m.start <= sp && sp < m.end)
        .map_or(sp + MAX_STACK as u64, |m| m.end);
    let len = (top - sp).min(MAX_STACK as u64) as usize;
    ptrace::read_memory(tid, sp, len)
}

/// The header of a snapshot recording: stack copies (unwound on the host as `dwarf` samples),
/// the event named `snapshot` so that reports count snapshots, not CPU time.
fn header(pid: u32) -> Header {
    let (kernel_release, hostname) = procfs::uname();
    Header {
        format_version: FORMAT_VERSION,
        arch: Arch::native().map_or("unknown", |a| a.name()).into(),
        big_endian: cfg!(target_endian = "big"),
        pointer_size: std::mem::size_of::<usize>() as u8,
        page_size: procfs::page_size() as u32,
        kernel_release,
        hostname,
        command: vec!["--snapshot".into(), "-p".into(), pid.to_string()],
        clock: "monotonic".into(),
        start_unix_ns: realtime_ns(),
        start_clock_ns: monotonic_ns(),
        call_graph: format!("dwarf={MAX_STACK} (user only)"),
        rec_version: env!("CARGO_PKG_VERSION").into(),
        event: "snapshot".into(),
        events: vec!["snapshot".into()],
        ..Default::default()
    }
}

/// The one line to say when the first stop failed: why, and what to do.
fn attach_error(pid: u32, e: io::Error) -> RecError {
    let why = match e.raw_os_error() {
        Some(libc::EPERM) => {
            let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
                .map(|s| format!(" (kernel.yama.ptrace_scope is {})", s.trim()))
                .unwrap_or_default();
            format!(
                "the kernel does not let rec trace process {pid}{yama}: run rec as root or with \
                 CAP_SYS_PTRACE, or `sysctl -w kernel.yama.ptrace_scope=0`; a process already \
                 traced (by gdb or strace) cannot be stopped twice"
            )
        }
        Some(libc::ESRCH) => format!("process {pid} ended before it could be stopped"),
        _ => format!("cannot stop process {pid}: {e}"),
    };
    RecError::Snapshot(why)
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::time::Duration;

    use crate::cli::{parse, Parsed};

    #[test]
    fn snapshot_takes_a_pid_only() {
        let parse = |a: &[&str]| parse(a.iter().map(OsString::from));
        match parse(&["--snapshot", "-p", "7", "--count", "3", "--interval", "50"]) {
            Ok(Parsed::Snapshot(o)) => {
                assert_eq!((o.pid, o.count), (7, 3));
                assert_eq!(o.interval, Duration::from_millis(50));
            }
            _ => panic!("not a snapshot"),
        }
        assert!(parse(&["--snapshot", "./app"]).is_err());
        assert!(parse(&["--snapshot", "-p", "7", "--count", "0"]).is_err());
        assert!(parse(&["--count", "2", "./app"]).is_err());
    }
}
