//! Opening the sampling events: one per CPU for a launched command (inherited by every thread
//! and child it creates), or one per thread and CPU for an attached process, with all events of
//! a CPU feeding one ring buffer (as `perf record` does), so memory does not grow with threads.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use super::attr::{self, flag, sample, PerfEventAttr};
use super::call_graph::CallGraph;
use super::kind::{self, Kind, Secondary};
use super::off_cpu;
use super::regs;
use super::ring::Ring;
use super::{syscalls, timers, tracepoint};
use crate::data_maps::DataMaps;
use crate::error::RecError;
use crate::procfs;

/// Ring buffer bytes per CPU for frame-pointer samples when the kernel allows it (256 KiB):
/// about a second of 999 Hz samples with deep stacks, drained every 100 ms.
const RING_BYTES_FP: usize = 256 << 10;
/// Stack-copy samples take their full requested size in the ring, so their ring grows with
/// it: room for this many samples per CPU (1 MiB at 8 KiB copies, 2 MiB at 16 KiB), the
/// headroom that loses no samples at 999 Hz on two busy cores while rec waits for a CPU.
const RING_SAMPLES_STACK: usize = 120;
/// The smallest ring per CPU when an event is sampled at every occurrence (faults): 4 MiB
/// holds 20,000 fault samples with frame-pointer chains, a 64 MiB buffer's first touch.
const RING_BYTES_EVERY_EVENT: usize = 4 << 20;
/// A stack-copy record besides the copy: header, ids, time, registers, sizes, kernel frames.
const STACK_RECORD_OVERHEAD: usize = 512;

/// What to sample.
#[derive(Debug, Clone)]
pub struct Request {
    /// The events to sample (`-e`), the main one first.
    pub events: Vec<Kind>,
    /// Samples per second per thread.
    pub freq: u32,
    /// How call stacks are captured.
    pub call_graph: CallGraph,
    /// How call stacks of secondary events sampled at every occurrence are captured.
    pub every_event_call_graph: CallGraph,
    /// Sample the CPU; when false, a dummy event only reports maps, names and tasks
    /// (`rec --heap --no-cpu`).
    pub cpu: bool,
    /// Record context switches, and blocking stacks where allowed (`--off-cpu`).
    pub off_cpu: bool,
    /// Stack bytes copied with each blocking stack in `dwarf` mode (`--off-cpu-stack`).
    pub off_cpu_stack: u32,
    /// Record who woke whom with `off_cpu`, where the kernel allows.
    pub wakeups: bool,
    /// Record every system call with its stack (`-e syscalls`).
    pub syscalls: bool,
    /// Stack bytes copied with each system call in `dwarf` mode (`--syscall-stack`).
    pub syscall_stack: u32,
}

impl Request {
    /// Data pages of one ring (a power of two, as the kernel requires).
    fn ring_pages(&self, page_size: usize) -> usize {
        let mut bytes = match self.call_graph {
            CallGraph::Fp => RING_BYTES_FP,
            CallGraph::Dwarf(size) => {
                RING_SAMPLES_STACK * (size as usize).saturating_add(STACK_RECORD_OVERHEAD)
            }
        };
        if self.off_cpu {
            bytes = bytes.max(off_cpu::MIN_MAIN_RING);
        }
        // Fault events come in bursts (a program touching a new buffer takes a fault per page
        // at memory speed) that a board with one CPU cannot drain while they happen.
        if self.cpu && self.events.iter().any(|k| k.every_event()) {
            bytes = bytes.max(RING_BYTES_EVERY_EVENT);
        }
        bytes.div_ceil(page_size.max(1)).next_power_of_two().max(2)
    }

    /// The data mappings this recording keeps (see [`DataMaps`]).
    pub fn data_maps(&self) -> DataMaps {
        let faults = self.events.iter().any(|k| k.is_fault());
        let copies = matches!(self.call_graph, CallGraph::Dwarf(_));
        match self.cpu {
            true => DataMaps::new(faults, copies),
            false => DataMaps::None,
        }
    }

    /// The main event (the first of `-e`).
    pub fn main(&self) -> Kind {
        self.events.first().copied().unwrap_or(Kind::CpuClock)
    }

    /// How the sample records of the main event are laid out, for the decoder.
    pub fn layout(&self) -> super::parse::Layout {
        let mut l = kind::layout(self.main(), self.call_graph);
        l.addr &= self.cpu;
        l
    }
}

/// What the kernel allowed, decided once on the first event and reused for the rest.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Kernel frames are recorded.
    pub kernel: bool,
    /// MMAP2 records carry build-ids.
    pub build_id: bool,
}

/// What one ring buffer holds, for the decoder.
#[derive(Debug, Clone, Copy)]
pub struct RingKind {
    /// Index of its samples' event in the header's event list (0: the main event).
    pub event: u32,
    /// How its samples are laid out.
    pub layout: super::parse::Layout,
}

/// Open events and their rings.
pub struct Events {
    /// One ring per CPU and sampled event.
    pub rings: Vec<Ring>,
    /// What each ring of `rings` holds.
    pub kinds: Vec<RingKind>,
    /// Blocking stacks are sampled (`--off-cpu` where the kernel allows it).
    pub blocking_stacks: bool,
    /// The sampled events' names, as the header lists them: [`RingKind::event`] indexes it.
    pub names: Vec<String>,
    /// Every event descriptor (ring owners first).
    pub fds: Vec<OwnedFd>,
    /// What the kernel allowed.
    pub settings: Settings,
}

impl Events {
    /// The indexes in [`Events::names`] of `--off-cpu`'s own events (blocking stacks and
    /// wakeups): samples at every switch, whose stack copies choose a frame's zstd level.
    pub fn off_cpu_events(&self) -> Vec<u32> {
        let ours = |n: &String| n == Kind::ContextSwitches.name() || n.starts_with("sched:");
        match self.blocking_stacks {
            true => (1..self.names.len())
                .filter(|&i| ours(&self.names[i]))
                .map(|i| i as u32)
                .collect(),
            false => Vec::new(),
        }
    }

    /// No events at all: heap-only recording where perf is unavailable.
    pub fn none() -> Events {
        Events {
            rings: Vec::new(),
            kinds: Vec::new(),
            blocking_stacks: false,
            names: Vec::new(),
            fds: Vec::new(),
            settings: Settings {
                kernel: false,
                build_id: false,
            },
        }
    }
}

fn make_attr(req: &Request, on_exec: bool, s: Settings, page_size: usize) -> PerfEventAttr {
    let pages = req.ring_pages(page_size);
    let mut flags = flag::INHERIT
        | flag::MMAP
        | flag::MMAP2
        | flag::COMM
        | flag::COMM_EXEC
        | flag::TASK
        | flag::SAMPLE_ID_ALL
        | flag::USE_CLOCKID
        | flag::EXCLUDE_HV
        | flag::EXCLUDE_GUEST
        | flag::WATERMARK;
    if on_exec {
        flags |= flag::DISABLED | flag::ENABLE_ON_EXEC;
    }
    if !s.kernel {
        flags |= flag::EXCLUDE_KERNEL;
    }
    if s.build_id {
        flags |= flag::BUILD_ID;
    }
    let main = req.main();
    if req.cpu && !main.every_event() {
        flags |= flag::FREQ;
    }
    // Fault addresses are told apart by the mapping they fall in: heap, stack, a file; a
    // stack-copy sample's stack pointer by its thread's stack mapping (see `data_maps`).
    if req.data_maps().wanted() {
        flags |= flag::MMAP_DATA;
    }
    if req.off_cpu {
        flags |= flag::CONTEXT_SWITCH;
    }
    let (type_, config) = if req.cpu {
        main.type_config()
    } else {
        (attr::TYPE_SOFTWARE, attr::SW_DUMMY)
    };
    let mut a = PerfEventAttr {
        type_,
        size: attr::ATTR_SIZE,
        config,
        sample_period_or_freq: if req.cpu && !main.every_event() {
            req.freq.into()
        } else {
            1
        },
        sample_type: sample::IP
            | sample::TID
            | sample::TIME
            | sample::CPU
            | sample::PERIOD
            | sample::CALLCHAIN,
        flags,
        wakeup_watermark: (pages * page_size / 4) as u32,
        clockid: libc::CLOCK_MONOTONIC,
        ..Default::default()
    };
    if req.cpu && main.is_fault() {
        a.sample_type |= sample::ADDR;
    }
    if let (CallGraph::Dwarf(bytes), true) = (req.call_graph, req.cpu) {
        // Kernel frames still come from the kernel's own walk; user frames from the copy.
        a.sample_type |= sample::REGS_USER | sample::STACK_USER;
        a.sample_regs_user = regs::USER_MASK;
        a.sample_stack_user = bytes;
        a.flags |= flag::EXCLUDE_CALLCHAIN_USER;
    }
    a
}

/// Opens one event, learning on the way what this kernel and these permissions allow.
fn open_adaptive(
    req: &Request,
    on_exec: bool,
    settings: &mut Option<Settings>,
    pid: i32,
    cpu: i32,
    page_size: usize,
) -> Result<OwnedFd, io::Error> {
    if let Some(s) = *settings {
        return attr::open(&make_attr(req, on_exec, s, page_size), pid, cpu);
    }
    let mut s = Settings {
        kernel: true,
        build_id: true,
    };
    loop {
        match attr::open(&make_attr(req, on_exec, s, page_size), pid, cpu) {
            Ok(fd) => {
                *settings = Some(s);
                return Ok(fd);
            }
            // Kernels before 5.12 do not know the build-id bit.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && s.build_id => s.build_id = false,
            // Without privilege, user-space samples may still be allowed (paranoid 2).
            Err(e)
                if matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM))
                    && s.kernel =>
            {
                s.kernel = false
            }
            Err(e) => return Err(e),
        }
    }
}

fn classify(e: io::Error, pid: u32, kind: Option<Kind>) -> RecError {
    if let Some(k) = kind.filter(|k| k.is_hardware()) {
        if matches!(
            e.raw_os_error(),
            Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)
        ) {
            return RecError::NoPmu(k.name(), e);
        }
    }
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => RecError::Paranoid(procfs::perf_event_paranoid()),
        Some(libc::ESRCH) => RecError::NoSuchProcess(pid),
        Some(libc::ENOENT) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) => {
            RecError::NoPerf(e)
        }
        _ => RecError::Io("perf_event_open failed".into(), e),
    }
}

/// Maps a ring, halving its size while the locked-memory limit refuses it.
fn map_ring(fd: &OwnedFd, page_size: usize, pages: usize) -> Result<Ring, RecError> {
    let mut pages = pages;
    loop {
        match Ring::map(fd, pages, page_size) {
            Ok(r) => return Ok(r),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) && pages > 2 => pages /= 2,
            Err(e) => {
                return Err(RecError::Io(
                    "cannot map a perf ring buffer (raise kernel.perf_event_mlock_kb)".into(),
                    e,
                ))
            }
        }
    }
}

/// Events for a launched child: enabled at its exec, inherited by all its threads and children.
pub fn for_launch(child: u32, req: &Request) -> Result<Events, RecError> {
    open(&[child], req, true, child)
}

/// Events for a running process: one per thread and CPU (new threads inherit them).
pub fn for_attach(pid: u32, req: &Request) -> Result<Events, RecError> {
    let tids = procfs::threads(pid).map_err(|_| RecError::NoSuchProcess(pid))?;
    if tids.is_empty() {
        return Err(RecError::NoSuchProcess(pid));
    }
    open(&tids, req, false, pid)
}

/// The "thread" of events that watch every task on their CPU: pid -1 to the kernel.
const ALL_TASKS: u32 = u32::MAX;

/// Events for every process on the board (`rec -a`): one per CPU, for all tasks (pid -1), as
/// `perf record -a` opens them. The kernel allows that only with kernel profiling rights.
pub fn for_system(req: &Request) -> Result<Events, RecError> {
    open(&[ALL_TASKS], req, false, ALL_TASKS).map_err(|e| match e {
        RecError::Paranoid(level) => RecError::SystemWide(level),
        e => e,
    })
}

fn open(tids: &[u32], req: &Request, on_exec: bool, pid: u32) -> Result<Events, RecError> {
    let page_size = procfs::page_size();
    let cpus = procfs::online_cpus();
    let mut settings = None;
    let mut rings = Vec::new();
    let mut kinds = Vec::new();
    let mut fds = Vec::new();
    let mut followers = Vec::new();
    let main = RingKind {
        event: 0,
        layout: req.layout(),
    };
    for &cpu in &cpus {
        let mut leader: Option<usize> = None;
        for &tid in tids {
            let fd = match open_adaptive(
                req,
                on_exec,
                &mut settings,
                tid as i32,
                cpu as i32,
                page_size,
            ) {
                Ok(fd) => fd,
                // A thread that ended while we attached is not an error.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) && tid != pid => continue,
                Err(e) => return Err(classify(e, pid, req.cpu.then(|| req.main()))),
            };
            let pages = req.ring_pages(page_size);
            share_ring(
                fd,
                &mut leader,
                pages,
                main,
                &mut rings,
                &mut kinds,
                &mut fds,
                &mut followers,
            )?;
        }
    }
    let settings = settings.ok_or(RecError::NoSuchProcess(pid))?;
    let mut names = vec![if req.cpu { req.main().name() } else { "none" }.to_string()];
    let mut secondaries = Vec::new();
    let uses_context_switches = req.cpu && req.events.contains(&Kind::ContextSwitches);
    if uses_context_switches && !settings.kernel {
        // The kernel drops context-switch samples of events that exclude it.
        return Err(RecError::NeedsKernel(
            Kind::ContextSwitches.name(),
            procfs::perf_event_paranoid(),
        ));
    }
    if req.cpu {
        for &k in req.events.iter().skip(1) {
            let call_graph = if k.every_event() {
                req.every_event_call_graph
            } else {
                req.call_graph
            };
            let stack_bytes = match call_graph {
                CallGraph::Dwarf(n) => n,
                CallGraph::Fp => 0,
            };
            secondaries.push(Secondary {
                kind: k,
                freq: req.freq,
                call_graph,
                stack_bytes,
                on_exec,
                kernel: settings.kernel,
                ring_bytes: req.ring_pages(page_size) * page_size,
                tracepoint: None,
                stackless: false,
                no_kernel_chain: false,
            });
        }
    }
    // Blocking stacks need kernel profiling rights; without them the kernel would open the
    // event and silently drop every sample.
    let blocking_stacks = req.off_cpu && settings.kernel;
    if blocking_stacks {
        secondaries.push(off_cpu::secondary(
            req.call_graph,
            req.off_cpu_stack,
            on_exec,
            page_size,
        ));
        // Who woke whom, where the kernel lets us read the scheduler's tracepoint: opened
        // once first, so that a refusal only leaves the wakeups out.
        let waking = req
            .wakeups
            .then(|| off_cpu::waking(req.call_graph, req.off_cpu_stack, on_exec, page_size));
        let opens = |s: &Secondary| match (tids.first(), cpus.first()) {
            (Some(&tid), Some(&cpu)) => attr::open(&s.attr(), tid as i32, cpu as i32).is_ok(),
            _ => false,
        };
        if let Some(w) = waking.flatten().filter(opens) {
            secondaries.push(w);
            // The sleep timers, so that a wakeup's latency runs from when its timer was due.
            if let Some(t) = timers::event(on_exec, page_size).ok().filter(opens) {
                secondaries.push(keep_filter_if_taken(t, tids.first(), cpus.first()));
            }
        }
    }
    if req.syscalls {
        let [enter, exit] = syscalls::events(req.call_graph, req.syscall_stack, on_exec, page_size)
            .map_err(RecError::Syscalls)?;
        if let (Some(&tid), Some(&cpu)) = (tids.first(), cpus.first()) {
            if let Err(e) = attr::open(&enter.attr(), tid as i32, cpu as i32) {
                return Err(RecError::Syscalls(format!(
                    "{} is there but cannot be sampled ({e})",
                    syscalls::ENTER
                )));
            }
        }
        secondaries.push(enter);
        secondaries.push(exit);
    }
    for sec in secondaries {
        let attr = sec.attr();
        let kind = RingKind {
            event: names.len() as u32,
            layout: sec.layout(),
        };
        names.push(sec.name());
        let pages = sec.ring_bytes / page_size.max(1);
        for &cpu in &cpus {
            let mut leader: Option<usize> = None;
            for &tid in tids {
                let fd = match attr::open(&attr, tid as i32, cpu as i32) {
                    Ok(fd) => fd,
                    Err(e) if e.raw_os_error() == Some(libc::ESRCH) && tid != pid => continue,
                    Err(e) => return Err(classify(e, pid, Some(sec.kind))),
                };
                if let Some(f) = sec.tracepoint.as_ref().and_then(|tp| tp.filter.as_ref()) {
                    tracepoint::set_filter(&fd, f).map_err(|e| {
                        RecError::Io(format!("cannot set the filter {f:?} on {}", sec.name()), e)
                    })?;
                }
                share_ring(
                    fd,
                    &mut leader,
                    pages,
                    kind,
                    &mut rings,
                    &mut kinds,
                    &mut fds,
                    &mut followers,
                )?;
            }
        }
    }
    fds.extend(followers);
    Ok(Events {
        rings,
        kinds,
        blocking_stacks,
        names,
        fds,
        settings,
    })
}

/// `sec` with its tracepoint filter when the kernel takes it on a probe descriptor (of `tid`
/// on `cpu`), else without one: the event then records every occurrence, as it would on a
/// kernel without the filter.
fn keep_filter_if_taken(mut sec: Secondary, tid: Option<&u32>, cpu: Option<&u32>) -> Secondary {
    let taken = match (&sec.tracepoint, tid, cpu) {
        (Some(tp), Some(&tid), Some(&cpu)) => match &tp.filter {
            Some(f) => attr::open(&sec.attr(), tid as i32, cpu as i32)
                .is_ok_and(|fd| tracepoint::set_filter(&fd, f).is_ok()),
            None => true,
        },
        _ => true,
    };
    if !taken {
        if let Some(tp) = sec.tracepoint.as_mut() {
            tp.filter = None;
        }
    }
    sec
}

/// Gives `fd` a ring of its own when it is the first of its CPU (`leader` unset), else points
/// it at the leader's ring. Ring owners stay at the front of `fds`, in the order of `rings`.
#[allow(clippy::too_many_arguments)]
fn share_ring(
    fd: OwnedFd,
    leader: &mut Option<usize>,
    pages: usize,
    kind: RingKind,
    rings: &mut Vec<Ring>,
    kinds: &mut Vec<RingKind>,
    fds: &mut Vec<OwnedFd>,
    followers: &mut Vec<OwnedFd>,
) -> Result<(), RecError> {
    match *leader {
        None => {
            rings.push(map_ring(&fd, procfs::page_size(), pages)?);
            kinds.push(kind);
            *leader = Some(fds.len());
            fds.push(fd);
        }
        Some(l) => {
            attr::ioctl(
                &fd,
                attr::IOC_SET_OUTPUT,
                fds[l].as_raw_fd() as libc::c_ulong,
            )
            .map_err(|e| RecError::Io("cannot share a perf ring buffer".into(), e))?;
            followers.push(fd);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Request;
    use crate::perf::call_graph::CallGraph;
    use crate::perf::kind::Kind;

    fn req(call_graph: CallGraph) -> Request {
        Request {
            freq: 999,
            call_graph,
            every_event_call_graph: CallGraph::Fp,
            cpu: true,
            off_cpu: false,
            off_cpu_stack: 8192,
            wakeups: false,
            syscalls: false,
            syscall_stack: 512,
            events: vec![Kind::CpuClock],
        }
    }

    #[test]
    fn stack_copy_rings_hold_the_same_number_of_samples_at_every_size() {
        assert_eq!(req(CallGraph::Fp).ring_pages(4096), 64);
        assert_eq!(req(CallGraph::Dwarf(8192)).ring_pages(4096), 256);
        assert_eq!(req(CallGraph::Dwarf(16384)).ring_pages(4096), 512);
        assert_eq!(req(CallGraph::Dwarf(65528)).ring_pages(4096), 2048);
        // The default copy still fits the 4 MiB that 24 KiB copies took.
        assert_eq!(req(CallGraph::Dwarf(24576)).ring_pages(4096), 1024);
        assert_eq!(
            req(CallGraph::Dwarf(CallGraph::DEFAULT_STACK)).ring_pages(4096),
            1024
        );
        // 64 KiB pages (some AArch64 kernels): still a power of two, at least two pages.
        assert_eq!(req(CallGraph::Dwarf(8192)).ring_pages(65536), 16);
        assert_eq!(req(CallGraph::Fp).ring_pages(1 << 20), 2);
    }
}
