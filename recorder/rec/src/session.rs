//! One recording from start to end: open the output, start or attach to the target, move
//! records from the kernel's rings into the frame writer, flush and sync on schedule, and stop
//! when the target ends, the duration is up, or a signal asks.
//!
//! Memory is bounded by the rings (fixed at start), the frame writer's buffer (closed early at
//! 1 MiB) and the per-path identity cache.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crossprof_format::{
    Arch, Blob, End, FrameWriter, Header, HeapEvent, Lost, Record, FORMAT_VERSION,
};

use crate::cli::{Options, Target};
use crate::disk::{Disk, DiskThread};
use crate::drain::{wait_readable, Destination, Drain};
use crate::error::RecError;
use crate::heap::{self, Heap, MapsSource};
use crate::identity::Identities;
use crate::jit;
use crate::launch;
use crate::perf::events::{self, Events};
use crate::procfs;
use crate::segments::{self, Segments};
use crate::signals;
use crate::system_wide::{self, Tracker};

/// How long the main loop sleeps at most between drains.
const POLL_MS: i32 = 100;
/// With `--heap`, the interposers' rings are drained this often (ms): a 2 MiB ring then only
/// fills when a process makes more than ~6 M events per second.
const HEAP_POLL_MS: i32 = 10;
/// RSS is sampled this often with `--heap`.
const RSS_EVERY: Duration = Duration::from_millis(100);
/// How long a launched command may take to exit after being asked to stop.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Nanoseconds on CLOCK_MONOTONIC, the clock the events are told to use.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    // SAFETY: ts is a valid timespec for clock_gettime to fill.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The writer side of a recording: counts what passes and survives a failing disk by
/// stopping writes (what was synced stays valid) and reporting once.
struct Output {
    writer: Option<FrameWriter<Disk>>,
    path: String,
    failed: Option<std::io::Error>,
    samples: u64,
    lost: u64,
    identities: Identities,
    /// Distinct kernel addresses seen in call chains, for the kallsyms subset written at the end.
    kernel_addrs: HashSet<u64>,
    /// The JIT maps and jitdumps of recorded processes, taken when each exits.
    jit: jit::JitMaps,
    /// With `-a`: the processes whose maps are known, to read those of newcomers from /proc.
    /// With `--max-size`, the processes whose state each new segment starts with.
    procs: Option<Tracker>,
    /// With `--max-size`: the segment files (absent while a segment starts).
    segments: Option<Segments>,
    /// The event indexes of blocking stacks and wakeups: they choose a frame's zstd level.
    off_cpu: Vec<u32>,
    /// Fault events are recorded: /proc snapshots include the data mappings.
    data_maps: bool,
}

/// At most this many distinct kernel addresses are remembered (8 MiB of set at worst); frames
/// beyond it stay unnamed rather than costing the board memory.
const MAX_KERNEL_ADDRS: usize = 1 << 19;

impl Output {
    fn push(&mut self, r: &Record) {
        if let Some(w) = self.writer.as_mut() {
            if let Err(e) = w.push(r) {
                self.fail(e);
            }
        }
        if let (Some(s), Some(w)) = (self.segments.as_mut(), self.writer.as_mut()) {
            match s.due(w) {
                Ok(true) => self.next_segment(),
                Ok(false) => {}
                Err(e) => self.fail(e),
            }
        }
    }

    /// Starts the next segment of a `--max-size` recording with the state a reader needs to
    /// read it alone: the vDSO and every live recorded process (see [`segments`]).
    fn next_segment(&mut self) {
        let (Some(w), Some(mut s)) = (self.writer.take(), self.segments.take()) else {
            return;
        };
        match s.next(w, monotonic_ns()) {
            Ok(w) => self.writer = Some(w),
            Err(e) => return self.fail(e),
        }
        write_vdso(self);
        for pid in self.procs.as_mut().map(|t| t.live()).unwrap_or_default() {
            let data = self.data_maps;
            system_wide::snapshot(self, pid, data);
        }
        self.flush();
        if let Some(w) = &self.writer {
            s.retire(w);
        }
        self.segments = Some(s);
    }

    fn flush(&mut self) {
        if let Some(w) = self.writer.as_mut() {
            if let Err(e) = w.flush() {
                self.fail(e);
            }
        }
    }

    /// Stops writing after an I/O error (a full disk, a removed device); the application runs
    /// on, and rec reports the failure when it ends.
    fn fail(&mut self, e: std::io::Error) {
        self.writer = None;
        self.failed = Some(e);
    }

    /// Writes a `Lost` record of `kind` when `count` is not zero: events rec itself could not
    /// record (the kernel's own losses come as decoded `Lost` records).
    fn lost(&mut self, kind: &str, count: u64) {
        if count > 0 {
            self.push(&Record::Lost(Lost {
                time: monotonic_ns(),
                count,
                kind: kind.into(),
            }));
        }
    }

    /// Handles one sample (`Sample` or `EventSample`).
    fn sample(&mut self, r: &Record) {
        if let Some(pid) = self.procs.as_mut().and_then(|t| t.first_seen(r)) {
            let data = self.data_maps;
            system_wide::snapshot(self, pid, data);
        }
        let s = match r {
            Record::Sample(s) => {
                self.samples += 1;
                s
            }
            Record::EventSample(e) => {
                if let (Some(w), true) = (self.writer.as_mut(), self.off_cpu.contains(&e.event)) {
                    w.sink_mut().note_blocking(e.sample.stack.len());
                }
                &e.sample
            }
            _ => return,
        };
        for &a in &s.kernel_chain {
            if self.kernel_addrs.len() < MAX_KERNEL_ADDRS {
                self.kernel_addrs.insert(a);
            }
        }
        self.push(r);
    }

    /// Handles one decoded kernel record.
    fn record(&mut self, r: Record) {
        if let Record::Sample(_) | Record::EventSample(_) = r {
            return self.sample(&r);
        }
        if let Some(pid) = self.procs.as_mut().and_then(|t| t.first_seen(&r)) {
            let data = self.data_maps;
            system_wide::snapshot(self, pid, data);
        }
        if let Record::Lost(ref l) = r {
            self.lost += l.count;
        }
        match &r {
            Record::Fork(t) => self.jit.note(t.pid),
            Record::Comm(c) => self.jit.note(c.pid),
            Record::Mmap(m) => self.jit.note_mmap(m.pid, &m.path),
            Record::Exit(t) if t.pid == t.tid => {
                for map in self.jit.take(t.pid, t.time) {
                    self.push(&map);
                }
            }
            _ => {}
        }
        match r {
            Record::Mmap(mut m) => {
                let root = format!("/proc/{}/root", m.pid);
                self.identities.fill(&mut m, Some(&root));
                self.push(&Record::Mmap(m));
            }
            Record::Comm(c) if c.exec => {
                let (pid, time) = (c.pid, c.time);
                self.push(&Record::Comm(c));
                // The kernel does not report the vDSO it maps at exec; read it from /proc
                // while the process is (very likely) still alive.
                if let Ok(maps) = procfs::maps(pid) {
                    if let Some(v) = maps.into_iter().find(|m| m.path == "[vdso]") {
                        self.push(&Record::Mmap(v.into_mmap(pid, time)));
                    }
                }
            }
            other => self.push(&other),
        }
    }
}

impl Destination for Output {
    fn record(&mut self, r: Record) {
        Output::record(self, r);
    }
    fn sample(&mut self, r: &Record) {
        Output::sample(self, r);
    }
    fn lost(&mut self, kind: &str, count: u64) {
        Output::lost(self, kind, count);
    }
}

impl heap::Emit for Output {
    fn record(&mut self, r: Record) {
        Output::record(self, r);
    }

    fn heap_events(&mut self, pid: u32, events: &[HeapEvent]) {
        if let Some(w) = self.writer.as_mut() {
            if let Err(e) = w.heap_events(pid, events) {
                self.fail(e);
            }
        }
    }

    fn forget(&mut self, pid: u32) {
        if let Some(w) = self.writer.as_mut() {
            w.heap_forget(pid);
        }
    }
}

fn header(opts: &Options, kernel: bool, events: &Events) -> Header {
    let blocking_stacks = events.blocking_stacks;
    let (kernel_release, hostname) = procfs::uname();
    let arch = Arch::native();
    let main_event = events
        .names
        .first()
        .cloned()
        .unwrap_or_else(|| "none".into());
    let command = match &opts.target {
        Target::Launch(c) => c.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
        Target::Attach(pid) => vec!["-p".into(), pid.to_string()],
        Target::System => vec!["-a".into()],
    };
    Header {
        format_version: FORMAT_VERSION,
        arch: arch.map_or("unknown", |a| a.name()).into(),
        big_endian: cfg!(target_endian = "big"),
        pointer_size: std::mem::size_of::<usize>() as u8,
        page_size: procfs::page_size() as u32,
        kernel_release,
        hostname,
        command,
        clock: "monotonic".into(),
        start_unix_ns: clock_ns(libc::CLOCK_REALTIME),
        start_clock_ns: monotonic_ns(),
        sample_freq: if opts.cpu { opts.freq } else { 0 },
        call_graph: if kernel {
            opts.call_graph.name()
        } else {
            format!("{} (user only)", opts.call_graph.name())
        },
        rec_version: env!("CARGO_PKG_VERSION").into(),
        event: main_event,
        events: events.names.clone(),
        off_cpu: match (opts.off_cpu, blocking_stacks) {
            (false, _) => "",
            (true, true) => "exact",
            (true, false) => "approximate",
        }
        .into(),
        // Segment 0; later segments of `--max-size` number themselves.
        ..Default::default()
    }
}

/// Writes the vDSO image, which the host cannot find on disk.
fn write_vdso(out: &mut Output) {
    if let Some((addr, data)) = procfs::own_vdso() {
        out.push(&Record::Blob(Blob {
            name: "[vdso]".into(),
            addr,
            data,
        }));
    }
}

/// Writes the kernel symbols that name the sampled kernel addresses (and the loaded modules'
/// ranges, for frames in modules). Done once at the end: a
/// recording cut short by kill -9 or power loss shows kernel frames as addresses.
fn write_kallsyms(out: &mut Output) {
    if out.kernel_addrs.is_empty() {
        return;
    }
    for (name, data) in procfs::kernel_symbols(&out.kernel_addrs) {
        let (name, addr) = (name.into(), 0);
        out.push(&Record::Blob(Blob { name, addr, data }));
    }
}

/// Records as the options say; returns rec's exit status. Three steps: [`start`] (output,
/// target, events), [`record`] (drain the rings until the target ends or a stop is asked for)
/// and [`finish`] (last drain, end record, warnings).
pub fn run(opts: &Options) -> Result<i32, RecError> {
    let mut live = start(opts)?;
    let status = record(opts, &mut live);
    finish(live, status)
}

/// A recording under way: where records go and where they come from.
struct Live {
    out: Output,
    events: Events,
    child: Option<launch::Launched>,
    heap: Option<Heap>,
    drain: Drain,
}

/// Opens the output, launches or finds the target, opens its perf events and writes the
/// header, the vDSO and (when attaching) the /proc snapshot. The target runs on return.
fn start(opts: &Options) -> Result<Live, RecError> {
    let file = segments::create_first(&opts.out)
        .map_err(|e| RecError::Output(opts.out.display().to_string(), e))?;
    let request = events::Request::new(opts);
    let mut heap = match (&opts.target, opts.heap) {
        (Target::Launch(cmd), true) => Some(heap::prepare(cmd)?),
        _ => None,
    };
    let (events, mut child) = match &opts.target {
        Target::Launch(cmd) => {
            let env = match &heap {
                Some((h, lib)) => heap::preload::environment(lib, h.socket_name()),
                None => Vec::new(),
            };
            let child = launch::spawn(cmd, &env)?;
            match events::for_launch(child.pid, &request) {
                Ok(ev) => (ev, Some(child)),
                // Heap only, and no perf events here (qemu-user, kernels without
                // CONFIG_PERF_EVENTS, paranoid settings): maps come from /proc instead.
                Err(RecError::NoPerf(_)) | Err(RecError::Paranoid(_))
                    if heap.is_some() && !opts.cpu =>
                {
                    if let Some((h, _)) = heap.as_mut() {
                        h.set_source(MapsSource::Procfs);
                    }
                    (Events::none(), Some(child))
                }
                Err(e) => {
                    // Dropping the start pipe makes the child exit without running.
                    child.start_never();
                    return Err(e);
                }
            }
        }
        Target::Attach(pid) => {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                return Err(RecError::NoSuchProcess(*pid));
            }
            (events::for_attach(*pid, &request)?, None)
        }
        Target::System => (events::for_system(&request)?, None),
    };
    let kernel = events.settings.kernel;
    let header = header(opts, kernel, &events);
    let disk = match opts.max_size {
        // Segments measure the compressed bytes as frames are written: those stay inline.
        Some(_) => Ok(Disk::Inline(file)),
        None => file
            .try_clone()
            .and_then(|syncer| DiskThread::new(file, syncer))
            .map(Disk::Thread),
    };
    let writer = disk
        .and_then(|disk| FrameWriter::new(disk, &header))
        .map_err(|e| RecError::Output(opts.out.display().to_string(), e))?;
    let data_maps = request.cpu && request.events.iter().any(|k| k.is_fault());
    let mut out = Output {
        writer: Some(writer),
        path: opts.out.display().to_string(),
        failed: None,
        samples: 0,
        lost: 0,
        identities: Identities::default(),
        kernel_addrs: HashSet::new(),
        jit: jit::JitMaps::default(),
        procs: (opts.target == Target::System || opts.max_size.is_some()).then(Tracker::default),
        segments: opts
            .max_size
            .map(|max| Segments::new(&opts.out, max, header.clone())),
        off_cpu: events.off_cpu_events(),
        data_maps,
    };
    write_vdso(&mut out);
    match (&opts.target, child.as_mut()) {
        (Target::Attach(pid), _) => {
            system_wide::snapshot(&mut out, *pid, data_maps);
            signals::install(None);
            let failed = events
                .fds
                .iter()
                .filter(|fd| {
                    crate::perf::attr::ioctl(fd, crate::perf::attr::IOC_ENABLE, 0).is_err()
                })
                .count() as u64;
            if failed > 0 {
                eprintln!(
                    "rec: {failed} of {} perf events could not be enabled; those threads or CPUs \
                     are not sampled",
                    events.fds.len()
                );
            }
            out.lost("enable-failed", failed);
        }
        (Target::Launch(_), Some(c)) => {
            signals::install(Some(c.pid));
            if let Err(e) = c.start() {
                launch::reap(c.pid);
                return Err(e);
            }
        }
        (Target::System, _) => {
            signals::install(None);
            let mut t = out.procs.take().unwrap_or_default();
            system_wide::snapshot_all(&mut out, &mut t, data_maps);
            out.procs = Some(t);
        }
        (Target::Launch(_), None) => unreachable!("a launch always has a child"),
    }
    out.flush();
    Ok(Live {
        out,
        events,
        child,
        heap: heap.map(|(h, _)| h),
        drain: Drain::default(),
    })
}

/// The main loop: drains the rings, flushes on schedule and returns the target's exit status
/// once it ended, the duration is up or a signal asked to stop.
fn record(opts: &Options, live: &mut Live) -> i32 {
    let Live {
        out,
        events,
        child,
        heap,
        drain,
    } = live;
    let started = Instant::now();
    let mut last_flush = Instant::now();
    let mut stop_at: Option<Instant> = None;
    let mut last_rss = Instant::now();
    let poll_ms = if heap.is_some() {
        HEAP_POLL_MS
    } else {
        POLL_MS
    };
    if heap.is_some() {
        signals::install_doorbell();
    }
    loop {
        let urgent = heap.as_ref().is_some_and(|h| h.urgent());
        wait_readable(events, heap.as_ref(), if urgent { 0 } else { poll_ms });
        drain.run(events, out);
        if let Some(h) = heap.as_mut() {
            h.tick(out);
            if last_rss.elapsed() >= RSS_EVERY {
                h.sample_rss(out);
                h.reap(out);
                last_rss = Instant::now();
            }
        }
        if last_flush.elapsed() >= opts.flush {
            out.flush();
            last_flush = Instant::now();
        }
        let timed_out = opts.duration.is_some_and(|d| started.elapsed() >= d);
        let stop = signals::stop_requested().is_some() || timed_out;
        match &child {
            Some(c) => {
                if let Some(s) = launch::try_wait(c.pid) {
                    return launch::exit_status(s);
                }
                if stop && stop_at.is_none() {
                    if timed_out && signals::stop_requested().is_none() {
                        // SAFETY: plain kill of our own child.
                        unsafe { libc::kill(c.pid as i32, libc::SIGTERM) };
                    }
                    stop_at = Some(Instant::now() + STOP_GRACE);
                }
                if stop_at.is_some_and(|t| Instant::now() >= t) {
                    eprintln!(
                        "rec: {} did not exit after being asked to; stopping the recording anyway",
                        c.pid
                    );
                    return 128 + libc::SIGTERM;
                }
            }
            None => {
                let Target::Attach(pid) = opts.target else {
                    // -a: until the duration is up or a signal asks.
                    if stop {
                        return 0;
                    }
                    continue;
                };
                let gone = procfs::has_exited(pid);
                if stop || gone {
                    return 0;
                }
            }
        }
    }
}

/// Drains what is left, closes the file with its End record and says what went missing.
fn finish(live: Live, status: i32) -> Result<i32, RecError> {
    let Live {
        mut out,
        mut events,
        mut heap,
        mut drain,
        ..
    } = live;
    drain.run(&mut events, &mut out);
    if let Some(h) = heap.as_mut() {
        h.sample_rss(&mut out);
        h.finish(&mut out);
        out.lost("heap-rings-unreadable", h.bad_rings());
    }
    let untracked = out.procs.as_ref().map_or(0, |t| t.untracked);
    out.lost("untracked-process", untracked);
    write_kallsyms(&mut out);
    for map in out.jit.take_all(monotonic_ns()) {
        out.push(&map);
    }
    let end = End {
        time: monotonic_ns(),
        exit_status: status.into(),
        samples: out.samples,
        lost_samples: out.lost,
    };
    if let Some(w) = out.writer.take() {
        if let Err(e) = w.finish(end).and_then(Disk::close) {
            out.fail(e);
        }
    }
    if let Some(e) = out.failed {
        return Err(RecError::WriteFailed(out.path, e));
    }
    if out.lost > 0 {
        eprintln!(
            "rec: the kernel dropped {} samples (ring buffer full); try a lower --freq",
            out.lost
        );
    }
    if let Some(h) = heap.as_ref().filter(|h| h.bad_rings() > 0) {
        eprintln!(
            "rec: {} heap rings could not be read (is libcrossprof_heap.so from this rec's \
             release? see CROSSPROF_HEAP_LIB); their events are missing",
            h.bad_rings()
        );
    }
    if let Some(h) = heap.as_ref().filter(|h| h.lost > 0) {
        eprintln!(
            "rec: {} heap events were lost (see the Lost records); counts are not exact",
            h.lost
        );
    }
    Ok(status)
}
