//! Command-line parsing. The names are a contract (DESIGN.md): scripts on boards call them.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

pub use crate::perf::call_graph::CallGraph;
use crate::perf::kind::{self, Kind};

/// The help text. Hand-written, because rec uses a minimal parser to stay small.
pub const HELP: &str = "\
rec: record CPU samples on this board for analysis elsewhere with `hostside`.

Usage:
  rec [OPTIONS] [--] COMMAND [ARGS...]   launch COMMAND and record it and all its children
  rec [OPTIONS] -p PID                   attach to a running process and all its threads
  rec [OPTIONS] -a                       every process on the board, on every CPU, until
                                         --duration or SIGINT/SIGTERM (needs root,
                                         CAP_PERFMON or perf_event_paranoid <= 0)
  rec --snapshot -p PID [--count N] [--interval MS] [--out FILE]
                                         where every thread of a running process is now:
                                         each thread stopped for a moment (ptrace), its
                                         registers, used stack and /proc state copied, then
                                         resumed; hostside report shows them thread by
                                         thread. For hangs and deadlocks, which sampling
                                         cannot see (a blocked thread never runs)
  rec --check [--out FILE]               what this board allows (perf events, paranoid level,
                                         kptr_restrict, a PMU, tracefs, free space) and what
                                         to do about it, with the missing kernel options
                                         from /proc/config.gz or /boot/config-$(uname -r)
  rec --check --kernel-config FILE       the same, naming the options missing from FILE
                                         (the kernel build's .config, plain or gzip)
  rec --print-kernel-options             a kernel configuration fragment with every option
                                         rec uses

Options:
  -o, --out FILE        recording to write [default: crossprof.zst]
  -F, --freq HZ         samples per second per thread [default: 999]
  -e, --event LIST      what to sample, comma-separated, the first drives the recording
                        [default: cpu-clock]: cpu-clock, task-clock (timers, at --freq);
                        page-faults, minor-faults, major-faults (every fault, with the
                        faulting address: the report names the mapping it falls in);
                        context-switches (every switch; needs perf_event_paranoid <= 1);
                        cycles, instructions, cache-misses, branch-misses (where the
                        board has a hardware PMU); syscalls (every system call with its
                        number, duration, result and the stack that made it, beside
                        CPU sampling: hostside report --syscalls; needs root or
                        CAP_PERFMON and tracefs; the stack copy is --syscall-stack)
      --call-graph MODE how call stacks are captured [default: dwarf; fp when the first
                        -e event is a fault or context-switches event: those come in bursts
                        that stack copies overflow (24 KiB copies lose 95% of a 64 MiB
                        buffer's first-touch faults, fp chains none)]
                          fp           frame-pointer chains walked by the kernel: cheap,
                                       complete only for code built with
                                       -fno-omit-frame-pointer (useless for Thumb-2)
                          dwarf[=SIZE] copy the used top of the user stack (at most SIZE
                                       bytes, default 32768, max 65528) and the registers
                                       with each sample; hostside unwinds them with the
                                       debug sysroot's unwind tables. Full stacks for
                                       ordinary -O2 builds, as Yocto and Buildroot make
                                       them. The default is four times perf's 8 KiB,
                                       measured on real programs: a database's VM needs
                                       16 KiB to reach main on x86_64 and 24 KiB on
                                       AArch64 (8 KiB: none of its stacks do), a
                                       GStreamer Vorbis encoder 28 KiB
      --heap            also record every malloc-family call with its stack, through a
                        preloaded library (libcrossprof_heap.so, found next to rec, in
                        ../lib/crossprof/, or at $CROSSPROF_HEAP_LIB); dynamically linked
                        programs only. With -p PID: attached to the running process
                        through ptrace (glibc programs on x86_64, AArch64, ARMv7; needs
                        root or CAP_SYS_PTRACE where kernel.yama.ptrace_scope >= 1), from
                        now until SIGINT, --duration or its exit; it runs on afterwards
      --heap-sample BYTES  with --heap: record a sample of the allocations, one per BYTES
                        allocated on average (e.g. 512KiB); reports show estimates with
                        standard errors, at a fraction of --heap's cost (a few
                        percent); with a COMMAND or -p
      --heap-max-live BLOCKS
                        with --heap: the most live blocks rec keeps track of itself
                        [default: 196608, 4 MiB]; past it rec hands blocks to the file
                        with their address, so its memory stays bounded however much a
                        daemon leaks over days (frees of those blocks cost a few bytes
                        more on disk; --max-size segments do not carry them)
      --off-cpu         also record when each thread leaves and re-enters a CPU (context
                        switches) for hostside report --off-cpu: where it waited and for how
                        long. Where the kernel allows (perf_event_paranoid <= 1, root or
                        CAP_PERFMON), each switch-out carries the stack it blocked in;
                        else the report takes the thread's last CPU sample (approximate)
      --off-cpu-stack BYTES
                        user stack copied with each blocking stack in dwarf mode
                        [default: 2048]: enough for the system call wrapper and its
                        callers' frames; every context switch copies it, so a switch-heavy
                        program pays for each byte (perf copies 8192)
      --syscall-stack BYTES
                        user stack copied with each system call of -e syscalls in dwarf
                        mode [default: 512]: the wrapper and the frames above it; every
                        call copies it, and a program listing a tree makes 500,000 calls
                        a second (2048 lost 15% of them on a busy 2-core machine)
      --no-wakeups      with --off-cpu, leave out who woke each thread (recorded where
                        the scheduler's sched_waking tracepoint is readable: root or
                        CAP_PERFMON, tracefs mounted; see rec --check): half the samples
                        of a program that switches all the time
      --no-cpu          no CPU sampling (with --heap: heap only; works where the kernel or
                        an emulator has no perf events)
      --flush-ms MS     close, write and fdatasync a frame at least this often; everything
                        synced survives power loss or kill -9 [default: 1000]
      --max-size SIZE   a flight recorder: keep the recording within SIZE bytes of disk
                        (K, M, G: powers of 1000; KiB, MiB, GiB: of 1024; at least
                        64KiB) by writing it as segments, FILE, FILE.1, FILE.2, ..., each
                        a quarter of SIZE and readable alone, and deleting the oldest
                        when the next starts: the newest data stays, and everything
                        synced survives power loss or kill -9. hostside reads FILE's
                        segments as one recording. With --heap each segment starts
                        with the blocks still live and their stacks
      --duration SECS   stop after SECS seconds; a launched COMMAND gets SIGTERM then
                        (up to 5 s to exit; rec returns its status)
  -p, --pid PID         record an existing process instead of launching one
      --count N         with --snapshot: how many snapshots [default: 1]
      --interval MS     with --snapshot: milliseconds between them [default: 100]
  -a, --all-cpus        record every process (system-wide, one event per CPU) with the
                        maps and build-ids of every process seen; hostside report then
                        lists each process's share
  -h, --help            print this help
  -V, --version         print the version

The recording holds raw addresses, memory maps and build-ids only; copy it to your machine and
run `hostside report --sysroot DIR FILE` there, with DIR the board's debug sysroot.

Exit status: the application's (128+N when signal N ended it); 2 when rec itself fails, with
one line saying what to do. SIGINT/SIGTERM stop the recording cleanly (and are passed on to a
launched COMMAND first).

Examples:
  rec --out /tmp/t.zst ./app --its-args
  rec -F 4999 --duration 10 -p $(pidof daemon)
  rec -a --duration 30 --out /tmp/all.zst  # then: hostside report all.zst (per process)
  rec -a --max-size 10M --out /data/fr.zst   # runs until SIGTERM; the last ~10 MB stay
  rec --heap --no-cpu --out /tmp/h.zst ./app
  rec --off-cpu --out /tmp/w.zst ./app     # then: hostside report --off-cpu w.zst
  rec --snapshot -p $(pidof daemon) --count 5 --interval 200 --out /tmp/s.zst
";

/// What to record.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// Launch this command line.
    Launch(Vec<OsString>),
    /// Attach to this process.
    Attach(u32),
    /// Every process on the board (`-a`), until `--duration` or a signal.
    System,
}

/// Parsed options.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Output file.
    pub out: PathBuf,
    /// Sampling frequency in Hz.
    pub freq: u32,
    /// How call stacks are captured.
    pub call_graph: CallGraph,
    /// How call stacks of events sampled at every occurrence (faults, context switches) are
    /// captured when they are not the first `-e` event: `fp` unless `--call-graph` was given
    /// (see [`CallGraph::default_for`]).
    pub every_event_call_graph: CallGraph,
    /// Frame flush interval.
    pub flush: Duration,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// What to record.
    pub target: Target,
    /// Record heap allocations (`--heap`).
    pub heap: bool,
    /// Mean bytes between sampled allocations (`--heap-sample`); `None`: every allocation.
    pub heap_sample: Option<u64>,
    /// Most live heap blocks rec tracks itself (`--heap-max-live`).
    pub heap_max_live: usize,
    /// Sample CPU (not `--no-cpu`).
    pub cpu: bool,
    /// Record context switches and blocking stacks (`--off-cpu`).
    pub off_cpu: bool,
    /// Stack bytes copied with each blocking stack in `dwarf` mode (`--off-cpu-stack`).
    pub off_cpu_stack: u32,
    /// With `--off-cpu`, record who woke each thread where the kernel allows (not
    /// `--no-wakeups`).
    pub wakeups: bool,
    /// The events to sample (`-e`), the main one first.
    pub events: Vec<Kind>,
    /// Record every system call with its stack (`-e syscalls`).
    pub syscalls: bool,
    /// Stack bytes copied with each system call in `dwarf` mode (`--syscall-stack`).
    pub syscall_stack: u32,
    /// Bound on the recording's disk use in bytes (`--max-size`): segment files.
    pub max_size: Option<u64>,
}

/// What the command line asks for.
pub enum Parsed {
    /// Record.
    Run(Options),
    /// Print this text and exit 0.
    Print(String),
    /// `--check`: say what this board allows, for a recording that would go to this file,
    /// and which kernel options are missing from the configuration (`--kernel-config`, else
    /// the running kernel's).
    Check(PathBuf, Option<PathBuf>),
    /// `--snapshot -p PID`: every thread's stack, now.
    Snapshot(crate::snapshot::Options),
}

impl Options {
    /// What the perf layer is to sample.
    pub fn request(&self) -> crate::perf::events::Request {
        crate::perf::events::Request {
            freq: self.freq,
            call_graph: self.call_graph,
            every_event_call_graph: self.every_event_call_graph,
            cpu: self.cpu,
            off_cpu: self.off_cpu,
            off_cpu_stack: self.off_cpu_stack,
            wakeups: self.wakeups,
            syscalls: self.syscalls,
            syscall_stack: self.syscall_stack,
            events: self.events.clone(),
        }
    }
}

/// Parses the arguments (without the program name). Errors are one-line messages.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Parsed, String> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(args);
    let mut out = PathBuf::from("crossprof.zst");
    let mut freq = 999u32;
    let mut call_graph = None;
    let mut flush = Duration::from_millis(1000);
    let mut duration = None;
    let mut pid = None;
    let mut command = Vec::new();
    let mut heap = false;
    let mut heap_sample = None;
    let mut heap_max_live = crossprof_format::DEFAULT_LIVE_LIMIT;
    let mut cpu = true;
    let mut off_cpu = false;
    let mut off_cpu_stack = crate::perf::off_cpu::DEFAULT_STACK;
    let mut wakeups = true;
    let mut events = vec![Kind::CpuClock];
    let mut syscalls = false;
    let mut syscall_stack = crate::perf::syscalls::DEFAULT_STACK;
    let mut check = false;
    let mut kernel_config = None;
    let mut all = false;
    let mut max_size = None;
    let mut snapshot = false;
    let mut count = None;
    let mut interval = None;
    let err = |e: lexopt::Error| e.to_string();
    while let Some(arg) = p.next().map_err(err)? {
        match arg {
            Short('o') | Long("out") => out = p.value().map_err(err)?.into(),
            Short('F') | Long("freq") => {
                freq = p.value().map_err(err)?.parse().map_err(err)?;
                if !(1..=100_000).contains(&freq) {
                    return Err(format!("--freq {freq}: choose 1 to 100000 Hz"));
                }
            }
            Long("call-graph") => {
                call_graph = Some(CallGraph::parse(
                    &p.value().map_err(err)?.string().map_err(err)?,
                )?);
            }
            Long("flush-ms") => {
                let ms: u64 = p.value().map_err(err)?.parse().map_err(err)?;
                if ms == 0 {
                    return Err("--flush-ms must be at least 1".into());
                }
                flush = Duration::from_millis(ms);
            }
            Long("duration") => {
                let s: f64 = p.value().map_err(err)?.parse().map_err(err)?;
                if !(s > 0.0 && s < 1e9) {
                    return Err(format!(
                        "--duration {s}: must be a positive number of seconds"
                    ));
                }
                duration = Some(Duration::from_secs_f64(s));
            }
            Long("max-size") => {
                max_size = Some(crate::segments::parse_size(
                    &p.value().map_err(err)?.string().map_err(err)?,
                )?)
            }
            Long("heap") => heap = true,
            Long("heap-sample") => {
                heap_sample = Some(crate::heap::sample::parse(
                    &p.value().map_err(err)?.string().map_err(err)?,
                )?)
            }
            Long("heap-max-live") => {
                heap_max_live = p.value().map_err(err)?.parse().map_err(err)?;
                if heap_max_live < 1024 {
                    return Err(format!(
                        "--heap-max-live {heap_max_live}: at least 1024 blocks"
                    ));
                }
            }
            Long("no-cpu") => cpu = false,
            Long("off-cpu") => off_cpu = true,
            Long("no-wakeups") => wakeups = false,
            Long("off-cpu-stack") => {
                let n: u32 = p.value().map_err(err)?.parse().map_err(err)?;
                if !(8..=CallGraph::MAX_STACK).contains(&n) {
                    return Err(format!(
                        "--off-cpu-stack {n}: must be 8 to {} bytes",
                        CallGraph::MAX_STACK
                    ));
                }
                // The kernel wants a multiple of 8.
                off_cpu_stack = n & !7;
            }
            Long("syscall-stack") => {
                let n: u32 = p.value().map_err(err)?.parse().map_err(err)?;
                if !(8..=CallGraph::MAX_STACK).contains(&n) {
                    return Err(format!(
                        "--syscall-stack {n}: must be 8 to {} bytes",
                        CallGraph::MAX_STACK
                    ));
                }
                syscall_stack = n & !7;
            }
            Long("check") => check = true,
            Long("snapshot") => snapshot = true,
            Long("count") => count = Some(p.value().map_err(err)?.parse::<u32>().map_err(err)?),
            Long("interval") => {
                interval = Some(Duration::from_millis(
                    p.value().map_err(err)?.parse::<u64>().map_err(err)?,
                ))
            }
            Long("kernel-config") => kernel_config = Some(PathBuf::from(p.value().map_err(err)?)),
            Long("print-kernel-options") => {
                return Ok(Parsed::Print(crate::check::options::fragment()))
            }
            Short('e') | Long("event") => {
                let list = p.value().map_err(err)?.string().map_err(err)?;
                let (rest, with_syscalls) = split_syscalls(&list);
                syscalls |= with_syscalls;
                if !with_syscalls || !rest.is_empty() {
                    events = kind::parse_list(&rest)?;
                }
            }
            Short('p') | Long("pid") => {
                pid = Some(p.value().map_err(err)?.parse::<u32>().map_err(err)?)
            }
            Short('a') | Long("all-cpus") => all = true,
            Short('h') | Long("help") => return Ok(Parsed::Print(HELP.into())),
            Short('V') | Long("version") => {
                return Ok(Parsed::Print(format!(
                    "rec {}\n",
                    env!("CARGO_PKG_VERSION")
                )))
            }
            Value(v) => {
                command.push(v);
                command.extend(p.raw_args().map_err(err)?);
            }
            other => return Err(other.unexpected().to_string()),
        }
    }
    if check {
        return Ok(Parsed::Check(out, kernel_config));
    }
    if kernel_config.is_some() {
        return Err("--kernel-config goes with --check".into());
    }
    if snapshot {
        return crate::snapshot::Options::parsed(out, pid, command.is_empty(), count, interval)
            .map(Parsed::Snapshot);
    }
    if count.is_some() || interval.is_some() {
        return Err("--count and --interval are for --snapshot".into());
    }
    let target = match (pid, command.is_empty(), all) {
        (Some(_), false, _) => return Err("give either -p PID or a COMMAND, not both".into()),
        (_, _, true) if pid.is_some() || !command.is_empty() => {
            return Err("-a records every process: give no COMMAND or -p PID with it".into())
        }
        (None, true, true) => Target::System,
        (Some(pid), true, _) => Target::Attach(pid),
        (None, false, _) => Target::Launch(command),
        (None, true, false) => {
            return Err("nothing to record: give a COMMAND, -p PID or -a (see rec --help)".into())
        }
    };
    if heap && target == Target::System {
        return Err("--heap cannot record every process (-a): the heap library must be preloaded into a launched COMMAND".into());
    }
    if off_cpu && events.contains(&Kind::ContextSwitches) {
        return Err(
            "--off-cpu samples context switches itself: leave context-switches out of -e".into(),
        );
    }
    crate::heap::sample::check(heap, heap_sample)?;
    if !heap && !cpu && !off_cpu && !syscalls {
        return Err(
            "--no-cpu leaves nothing to record: add --heap, --off-cpu or -e syscalls".into(),
        );
    }
    let main_event = events.first().copied().unwrap_or(Kind::CpuClock);
    let every_event_call_graph = call_graph.unwrap_or(CallGraph::Fp);
    let call_graph = call_graph.unwrap_or_else(|| CallGraph::default_for(main_event));
    Ok(Parsed::Run(Options {
        out,
        freq,
        call_graph,
        every_event_call_graph,
        flush,
        duration,
        target,
        heap,
        heap_sample,
        heap_max_live,
        cpu,
        off_cpu,
        off_cpu_stack,
        wakeups,
        events,
        syscalls,
        syscall_stack,
        max_size,
    }))
}

/// `-e`'s list without `syscalls`, and whether it named it: system calls are recorded beside
/// the sampled events, not as one.
fn split_syscalls(list: &str) -> (String, bool) {
    let names: Vec<&str> = list.split(',').map(str::trim).collect();
    let rest: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| *n != "syscalls" && !n.is_empty())
        .collect();
    (rest.join(","), names.contains(&"syscalls"))
}

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;
