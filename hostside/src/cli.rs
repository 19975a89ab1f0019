//! Command-line interface. Names follow the contract in DESIGN.md; they may be extended, never
//! renamed.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::filter::{parse_secs, Filter};

/// Analyse crossprof recordings made on a board: symbolize against a debug sysroot and report.
#[derive(Parser)]
#[command(name = "hostside", version, about, long_about = None, after_help = "\
Examples:
  hostside info t.zst
  hostside report --sysroot ~/yocto/build/tmp/work/.../rootfs-dbg t.zst
  hostside report --json --top 50 t.zst > report.json
  hostside report --from 1.5 --to 3 --tid 1234 t.zst   # seconds from the recording's start
  hostside flamegraph --sysroot ./sysroot t.zst -o cpu.svg
  hostside export --format collapsed --sysroot ./sysroot t.zst -o t.folded
  hostside export --format pprof --sysroot ./sysroot t.zst -o t.pb.gz    # go tool pprof t.pb.gz
  hostside html --sysroot ./sysroot t.zst -o report.html
  hostside html --sysroot ./sysroot before.zst after.zst -o diff.html
  hostside annotate --sysroot ./sysroot t.zst hot_loop --source-dir ~/src/app
  hostside diff before.zst after.zst --sysroot ./sysroot
  hostside diff --from 2 --to 5 before.zst after.zst   # the steady phase of both runs
  hostside diff --off-cpu before.zst after.zst          # waits, recorded with rec --off-cpu
  hostside report --heap --fail-on-leak 64K --sysroot ./sysroot h.zst   # in CI
  hostside report --syscalls --sysroot ./sysroot s.zst   # recorded with `rec -e syscalls`
  hostside flamegraph --syscalls --sysroot ./sysroot s.zst -o syscalls.svg

Exit status: 0 on success, 1 when `report --fail-on-leak` found more leaked bytes than allowed,
2 when the input cannot be used (the message says why).")]
pub struct Cli {
    /// Also print to standard error how the recording was read: each pass over the file, what
    /// it was for, the compressed frames it decoded and the time it took.
    #[arg(long, short, global = true)]
    pub verbose: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Where to find debug info for the board's binaries.
#[derive(Args, Clone)]
pub struct SymbolArgs {
    /// Root of a debug sysroot: the board's filesystem with unstripped binaries or debug files
    /// (Yocto's rootfs-dbg / IMAGE_GEN_DEBUGFS, Buildroot's output/staging). Without it, modules
    /// are looked up at their recorded paths on this machine.
    #[arg(long, value_name = "DIR")]
    pub sysroot: Option<PathBuf>,
    /// Extra directories holding `.build-id/xx/yyyy.debug` files or debuglink targets; may be
    /// repeated.
    #[arg(long = "debug-dir", value_name = "DIR")]
    pub debug_dirs: Vec<PathBuf>,
    /// Directory trees searched recursively for the board's binaries and debug files by
    /// build-id, wherever they lie in them (a developer's build tree); may be repeated. The
    /// sysroot and debug dirs are searched the same way for modules not at their paths.
    #[arg(long = "search-dir", value_name = "DIR")]
    pub search_dirs: Vec<PathBuf>,
}

impl SymbolArgs {
    /// The lookup these arguments describe.
    pub fn lookup(&self) -> crossprof_symbols::Lookup {
        crossprof_symbols::Lookup {
            sysroot: self.sysroot.clone(),
            debug_dirs: self.debug_dirs.clone(),
            search_dirs: self.search_dirs.clone(),
        }
    }
}

/// Which part of the recording to analyse: a time window and a process or thread.
#[derive(Args, Clone, Default)]
pub struct FilterArgs {
    /// Only what happened from SECS seconds after the recording's start on (inclusive; e.g.
    /// 0.5). CPU and event samples outside the window are left out, off-CPU waits are cut
    /// to it, and only heap allocations made inside it count (see README, "Time and thread
    /// filters").
    #[arg(long, value_name = "SECS", value_parser = parse_secs, allow_hyphen_values = true)]
    pub from: Option<u64>,
    /// Only what happened before SECS seconds after the recording's start (exclusive).
    #[arg(long, value_name = "SECS", value_parser = parse_secs, allow_hyphen_values = true)]
    pub to: Option<u64>,
    /// Only this process (its threads' samples, waits and allocations).
    #[arg(long, value_name = "N")]
    pub pid: Option<u32>,
    /// Only this thread.
    #[arg(long, value_name = "N")]
    pub tid: Option<u32>,
}

impl FilterArgs {
    /// The filter these arguments describe.
    pub fn filter(&self) -> Filter {
        Filter {
            from_ns: self.from,
            to_ns: self.to,
            pid: self.pid,
            tid: self.tid,
        }
    }
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Show what a recording holds and whether it is complete (no symbolization).
    Info {
        /// The recording.
        file: PathBuf,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Symbolize and report: top functions with self/total counts, call chains, threads.
    Report {
        /// The recording.
        file: PathBuf,
        /// Where debug info comes from.
        #[command(flatten)]
        symbols: SymbolArgs,
        /// The time window, process and thread to analyse.
        #[command(flatten)]
        filter: FilterArgs,
        /// Report CPU samples (the default).
        #[arg(long, conflicts_with_all = ["heap", "off_cpu"])]
        cpu: bool,
        /// Report heap allocations (recordings made with `rec --heap`).
        #[arg(long, conflicts_with = "off_cpu")]
        heap: bool,
        /// Report the samples of this recorded event (`rec -e`) instead of the main one, e.g.
        /// `minor-faults`: counts per function and, for fault events, the mappings (heap,
        /// stack, anonymous memory, files) the faulting addresses fell in.
        #[arg(long, value_name = "NAME", conflicts_with_all = ["cpu", "heap", "off_cpu"])]
        event: Option<String>,
        /// Report off-CPU time: where threads waited and for how long, and each thread's wall
        /// time on and off the CPU (recordings made with `rec --off-cpu`).
        #[arg(long)]
        off_cpu: bool,
        /// Report scheduling latency: per thread, the time from when it was due to run (the
        /// expiry of the sleep timer that woke it, as cyclictest counts, else the wakeup) to
        /// running again (mean, p50, p99, max, a histogram), and for the worst wakeups what
        /// held that CPU instead, with its stack (recordings made with `rec --off-cpu` as
        /// root, which have the scheduler's wakeups and sleep timers; `rec -a` sees every
        /// process that ran).
        #[arg(long, conflicts_with_all = ["cpu", "heap", "event"])]
        latency: bool,
        /// Report system calls, like `strace -c` with the stacks that made them: per call
        /// its share of the time, seconds, microseconds per call, calls and errors (time is
        /// entry to exit, whether the thread ran or waited); then, for the calls that took
        /// most time, the user stacks that made them and the errnos they failed with; then
        /// the threads that spent most time in calls. Needs a recording made with
        /// `rec -e syscalls` (the raw_syscalls tracepoints). `--json` has the same numbers in
        /// its `syscalls` section.
        #[arg(long, conflicts_with_all = ["cpu", "heap", "event", "off_cpu", "latency", "fail_on_leak"])]
        syscalls: bool,
        /// Report stack usage per thread: the deepest stack the samples saw (bytes from the
        /// top of the thread's stack mapping to its stack pointer), its share of the stack's
        /// size (a thread's mapping, the main thread's RLIMIT_STACK) and the call chain at
        /// that moment; a warning for each thread within 10% of its size. Every sample with
        /// registers counts: CPU samples and the off-CPU switch-outs of `rec --call-graph
        /// dwarf` (the default), snapshots. `--json` has it in its `stack_usage` section.
        #[arg(long, conflicts_with_all = ["cpu", "heap", "event", "off_cpu", "latency", "syscalls", "fail_on_leak"])]
        stack_usage: bool,
        /// How many functions to list.
        #[arg(long, default_value_t = 20, value_name = "N")]
        top: usize,
        /// Print the report as JSON (stable field names).
        #[arg(long)]
        json: bool,
        /// For CI: after the report, exit with status 1 when more than BYTES are still live at
        /// the end (heaptrack's "total memory leaked": its built-in suppressions excluded), and
        /// print the top leak sites with their stacks to standard error. Implies `--heap`.
        /// BYTES is a number, optionally followed by K, M or G (powers of 1000, as the report
        /// prints sizes) or KiB, MiB or GiB (powers of 1024).
        #[arg(long, value_name = "BYTES", value_parser = parse_bytes, conflicts_with_all = ["cpu", "off_cpu"])]
        fail_on_leak: Option<u64>,
    },
    /// Draw an interactive SVG flame graph.
    Flamegraph {
        /// The recording.
        file: PathBuf,
        /// Where debug info comes from.
        #[command(flatten)]
        symbols: SymbolArgs,
        /// The time window, process and thread to analyse.
        #[command(flatten)]
        filter: FilterArgs,
        /// Draw a heap flame graph of this quantity instead of CPU samples.
        #[arg(long, value_enum, value_name = "WHAT")]
        heap: Option<HeapGraph>,
        /// Draw the samples of this recorded event (`rec -e`) instead of the main one.
        #[arg(long, value_name = "NAME", conflicts_with_all = ["heap", "off_cpu"])]
        event: Option<String>,
        /// Draw off-CPU time (where threads waited, weighted by nanoseconds) instead of CPU
        /// samples (recordings made with `rec --off-cpu`).
        #[arg(long, conflicts_with = "heap")]
        off_cpu: bool,
        /// Draw the time spent in system calls instead of CPU samples: each call's name on
        /// top of the user stack that made it, weighted by nanoseconds from entry to exit
        /// (recordings made with `rec -e syscalls`).
        #[arg(long, conflicts_with_all = ["heap", "event", "off_cpu"])]
        syscalls: bool,
        /// Output SVG file.
        #[arg(short = 'o', long = "output", value_name = "OUT.svg")]
        output: PathBuf,
    },
    /// Export the profile for other tools (Firefox Profiler, pprof, speedscope, perf script).
    Export {
        /// The recording.
        file: PathBuf,
        /// Where debug info comes from.
        #[command(flatten)]
        symbols: SymbolArgs,
        /// The time window, process and thread to analyse.
        #[command(flatten)]
        filter: FilterArgs,
        /// Output format.
        #[arg(long, value_enum)]
        format: ExportFormat,
        /// Export the heap profile (the default for a recording without CPU samples).
        #[arg(long, conflicts_with = "off_cpu")]
        heap: bool,
        /// Export blocked (off-CPU) time instead of CPU samples (recordings made with
        /// `rec --off-cpu`; not for `--format firefox`).
        #[arg(long)]
        off_cpu: bool,
        /// Export the time spent in system calls instead of CPU samples, as for
        /// `flamegraph --syscalls` (recordings made with `rec -e syscalls`; `--format
        /// collapsed` only).
        #[arg(long, conflicts_with_all = ["heap", "off_cpu"])]
        syscalls: bool,
        /// Output file (`-` for standard output).
        #[arg(short = 'o', long = "output", value_name = "OUT")]
        output: PathBuf,
    },
    /// Write one self-contained interactive HTML report (no network needed to view it):
    /// summary and warnings, timeline with time and thread selection, function table,
    /// callers/callees with file:line, call trees, flame graph, heap views.
    Html {
        /// The recording (with NEW: the baseline).
        file: PathBuf,
        /// A second recording: write a page comparing FILE (old) with it (new), with the
        /// numbers of `hostside diff FILE NEW --json` (the filter applies to both, as there):
        /// per function before, after and the change, a differential flame graph, and the
        /// heap sites' changes.
        #[arg(value_name = "NEW")]
        new: Option<PathBuf>,
        /// Where debug info comes from.
        #[command(flatten)]
        symbols: SymbolArgs,
        /// The time window, process and thread to analyse.
        #[command(flatten)]
        filter: FilterArgs,
        /// Output HTML file.
        #[arg(short = 'o', long = "output", value_name = "OUT.html")]
        output: PathBuf,
    },
    /// Show a function's source lines with the samples taken at each.
    Annotate {
        /// The recording.
        file: PathBuf,
        /// The function (its exact name, or a part that names one function).
        function: String,
        /// Where debug info comes from.
        #[command(flatten)]
        symbols: SymbolArgs,
        /// A directory holding the sources (searched by the debug info's path, then by file
        /// name); may be repeated. Otherwise the sysroot, then the path the debug info names.
        #[arg(long = "source-dir", value_name = "DIR")]
        source_dirs: Vec<PathBuf>,
    },
    /// Compare two recordings per function.
    ///
    /// `--from/--to/--pid/--tid` apply to both recordings alike, so that like windows are
    /// compared: `--from 2 --to 5` compares the steady phase of two runs (seconds after each
    /// recording's own start), leaving out their start-up. `--pid`/`--tid` must name a task
    /// both recordings saw (e.g. one long-running daemon recorded twice with `rec -a`).
    ///
    /// Each function shows its self samples (and time, for cpu-clock) beside its shares, and
    /// `*` (JSON: "significant": true) where the change exceeds the sampling noise: its self
    /// samples changed both in absolute cost and as a share of its recording, by exact
    /// conditional binomial tests (Poisson counts, the larger p-value of the two), with the
    /// Benjamini-Hochberg correction at a 1% false-discovery rate across all rows, when the
    /// change is at least 3% of the longer recording's cost (smaller ones are where the
    /// kernel's interrupts and scheduling come and go in bursts). Samples
    /// are treated as independent (they are not quite: a long call gives many samples), so
    /// compare recordings of the same work or of like windows. With `--off-cpu`,
    /// blocked waits are compared wait by wait (Mann-Whitney U on their durations, exact
    /// binomial on their number; the same correction), and a row is marked only when its
    /// wait time also changed by at least 25% (a loaded machine's oversleeping moves short
    /// waits by that much from run to run).
    Diff {
        /// The baseline recording.
        old: PathBuf,
        /// The recording to compare with it.
        new: PathBuf,
        /// Where debug info comes from.
        #[command(flatten)]
        symbols: SymbolArgs,
        /// The time window, process and thread to compare, the same on both recordings.
        #[command(flatten)]
        filter: FilterArgs,
        /// Compare off-CPU time instead of CPU samples (recordings made with `rec
        /// --off-cpu`): per function and per thread (matched by name), the time waited, its
        /// share of all waiting, the number of blocked waits and their mean, and whether the
        /// waits changed beyond noise.
        #[arg(long)]
        off_cpu: bool,
        /// How many functions to list.
        #[arg(long, default_value_t = 20, value_name = "N")]
        top: usize,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
}

/// Heap flame graph quantities.
#[derive(ValueEnum, Clone, Copy)]
pub enum HeapGraph {
    /// Live bytes at the heap peak.
    Peak,
    /// Bytes still live at exit.
    Leaked,
    /// Number of allocations.
    Allocations,
    /// Number of temporary allocations.
    Temporary,
}

/// Export formats.
#[derive(ValueEnum, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// Folded stacks, one `a;b;c count` line per stack (flamegraph.pl, inferno, speedscope);
    /// heap recordings weigh stacks by allocation calls.
    Collapsed,
    /// Firefox Profiler processed-profile JSON (profiler.firefox.com, "Load a profile from file").
    Firefox,
    /// gzip'd pprof profile.proto (go tool pprof, Pyroscope, Parca); heap recordings in Go's
    /// alloc_objects/alloc_space/inuse_objects/inuse_space layout.
    Pprof,
    /// speedscope's JSON file format (speedscope.app).
    Speedscope,
    /// The text `perf script` prints (stackcollapse-perf.pl, inferno); CPU samples only.
    PerfScript,
    /// Callgrind's format (KCachegrind, QCachegrind, callgrind_annotate): self and inclusive
    /// samples and their period per function and source line; CPU samples or off-CPU waits.
    Callgrind,
    /// perf.data (perf report -i, perf script, hotspot): the samples with hostside's unwound
    /// call chains, thread names, mappings and build-ids; symbolize with --symfs SYSROOT.
    PerfData,
}

impl From<ExportFormat> for crate::output::export::Format {
    fn from(f: ExportFormat) -> Self {
        use crate::output::export::Format;
        match f {
            ExportFormat::Collapsed => Format::Collapsed,
            ExportFormat::Firefox => Format::Firefox,
            ExportFormat::Pprof => Format::Pprof,
            ExportFormat::Speedscope => Format::Speedscope,
            ExportFormat::PerfScript => Format::PerfScript,
            ExportFormat::Callgrind => Format::Callgrind,
            ExportFormat::PerfData => Format::PerfData,
        }
    }
}

/// Parses a byte count: digits, optionally followed by a unit (`K`, `M`, `G` for powers of
/// 1000, `KiB`, `MiB`, `GiB` for powers of 1024; a trailing `B` is allowed, case is ignored).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a byte count (e.g. 0, 4096, 64K, 1MiB)"))?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "m" | "mb" => 1000 * 1000,
        "g" | "gb" => 1000 * 1000 * 1000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?} (use K, M, G, KiB, MiB or GiB)"
            ))
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("{s:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::{parse_bytes, Cli};

    /// clap's own checks of the definitions (no two flags share a name, `--verbose` being
    /// global included), which a release build does not run.
    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        let cli = <Cli as clap::Parser>::try_parse_from(["hostside", "report", "-v", "t.zst"]);
        assert!(cli.is_ok_and(|c| c.verbose));
    }

    #[test]
    fn byte_counts_with_units() {
        assert_eq!(parse_bytes("0"), Ok(0));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("64K"), Ok(64_000));
        assert_eq!(parse_bytes("2mb"), Ok(2_000_000));
        assert_eq!(parse_bytes("1MiB"), Ok(1 << 20));
        assert_eq!(parse_bytes("3 GiB"), Ok(3 << 30));
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("12X").is_err());
        assert!(parse_bytes("99999999999999999999G").is_err());
        assert!(parse_bytes("18446744073709551615G").is_err());
    }
}
