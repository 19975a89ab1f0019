//! rec's own failures. Each is printed as one line that says what to do, and exits 2.

use std::fmt;
use std::io;

/// Why rec could not record.
#[derive(Debug)]
pub enum RecError {
    /// The command to launch does not exist or is not executable.
    CommandNotFound(String),
    /// No process has this pid.
    NoSuchProcess(u32),
    /// The kernel refused sampling for lack of permission.
    Paranoid(Option<i32>),
    /// `rec -a` without the right to sample every process (root, CAP_PERFMON or
    /// `perf_event_paranoid` at most 0).
    SystemWide(Option<i32>),
    /// The kernel has no perf events.
    NoPerf(io::Error),
    /// A hardware event was asked for and the board has no PMU the kernel can sample.
    NoPmu(&'static str, io::Error),
    /// An event the kernel only samples with kernel profiling rights.
    NeedsKernel(&'static str, Option<i32>),
    /// The output file cannot be written.
    Output(String, io::Error),
    /// Writing stopped during the recording (e.g. a full disk); the file is valid up to there.
    WriteFailed(String, io::Error),
    /// Any other I/O failure, with what was being done.
    Io(String, io::Error),
    /// The heap interposer library cannot be found or used.
    HeapLibrary(String),
    /// `--heap` on a statically linked program, which nothing can be preloaded into.
    StaticProgram(String),
    /// `-e syscalls` where the kernel does not let rec sample the system call tracepoints.
    Syscalls(String),
    /// `--heap -p PID` could not attach the heap library to the process, with why.
    HeapAttach(u32, String),
    /// `--snapshot` could not stop the process, with why and what to do.
    Snapshot(String),
}

impl fmt::Display for RecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecError::CommandNotFound(c) => write!(f, "command not found: {c}"),
            RecError::NoSuchProcess(p) => write!(f, "no process with pid {p}"),
            RecError::Paranoid(level) => {
                let now = level.map_or("unknown".to_string(), |l| l.to_string());
                write!(
                    f,
                    "the kernel forbids sampling (kernel.perf_event_paranoid is {now}): run rec as root, \
                     or allow it with `sysctl -w kernel.perf_event_paranoid=1` (2 still allows user-space samples of your own processes)"
                )
            }
            RecError::SystemWide(level) => {
                let now = level.map_or("unknown".to_string(), |l| l.to_string());
                write!(
                    f,
                    "-a: recording every process needs root, CAP_PERFMON or kernel.perf_event_paranoid <= 0 (it is {now}): run rec -a as root, or `sysctl -w kernel.perf_event_paranoid=0`"
                )
            }
            RecError::NoPerf(e) => write!(
                f,
                "this kernel cannot sample ({e}): it needs CONFIG_PERF_EVENTS"
            ),
            RecError::NoPmu(name, e) => write!(
                f,
                "-e {name}: this board has no hardware PMU the kernel can sample ({e}); use -e cpu-clock or task-clock for CPU time, and page-faults, minor-faults, major-faults or context-switches, which need none"
            ),
            RecError::NeedsKernel(name, level) => {
                let now = level.map_or("unknown".to_string(), |l| l.to_string());
                write!(
                    f,
                    "-e {name}: the kernel only samples it with kernel profiling rights (kernel.perf_event_paranoid is {now}): run rec as root or `sysctl -w kernel.perf_event_paranoid=1`; for off-CPU time use --off-cpu, which works without them"
                )
            }
            RecError::Output(p, e) => write!(f, "cannot write {p}: {e}"),
            RecError::WriteFailed(p, e) => write!(
                f,
                "cannot write {p}: {e}; recording stopped there, the file is valid up to its last flush"
            ),
            RecError::Io(what, e) => write!(f, "{what}: {e}"),
            RecError::HeapLibrary(why) => write!(f, "--heap: {why}"),
            RecError::StaticProgram(p) => write!(
                f,
                "--heap: {p} is statically linked, so the heap library cannot be preloaded into it; rebuild it dynamically linked"
            ),
            RecError::Syscalls(why) => write!(
                f,
                "-e syscalls: {why}; system calls are read from tracefs's raw_syscalls tracepoints, which need root or CAP_PERFMON and tracefs mounted (`mount -t tracefs nodev /sys/kernel/tracing`); rec --check says what this board allows"
            ),
            RecError::HeapAttach(pid, why) => {
                write!(f, "--heap -p {pid}: cannot attach the heap library: {why}")
            }
            RecError::Snapshot(why) => write!(f, "--snapshot: {why}"),
        }
    }
}
