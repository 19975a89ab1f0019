//! Where a recording's records go: the frame writer, with what rec adds on the way (the
//! identity of each mapped file, the vDSO of each exec, JIT maps at each exit, the /proc
//! state of processes first seen, segment rotation with `--max-size`) and what it counts
//! (samples, losses, the kernel addresses to name at the end).
//!
//! A failing disk stops the writes (what was synced stays valid) and is reported once, when
//! the recording closes; the application runs on.

use std::collections::HashSet;

use crossprof_format::{Blob, End, FrameWriter, Header, HeapEvent, Lost, Record};

use crate::cli::{Options, Target};
use crate::clock::monotonic_ns;
use crate::data_maps::{self, DataMaps};
use crate::disk::Disk;
use crate::drain::Destination;
use crate::error::RecError;
use crate::heap;
use crate::identity::Identities;
use crate::jit;
use crate::kernel_symbols::KernelSymbols;
use crate::perf::events::Events;
use crate::perf::kind::Kind;
use crate::procfs;
use crate::segments::Segments;
use crate::system_wide::{self, Tracker};

/// The writer side of a recording: counts what passes and survives a failing disk by
/// stopping writes (what was synced stays valid) and reporting once.
pub(super) struct Output {
    writer: Option<FrameWriter<Disk>>,
    path: String,
    failed: Option<std::io::Error>,
    samples: u64,
    lost: u64,
    identities: Identities,
    /// Distinct kernel addresses seen in call chains, for the kallsyms subset written at the end.
    kernel_addrs: HashSet<u64>,
    /// The kernel's symbol table, read from the first kernel address on.
    kernel_symbols: KernelSymbols,
    /// The JIT maps and jitdumps of recorded processes, taken when each exits.
    jit: jit::JitMaps,
    /// With `-a`: the processes whose maps are known, to read those of newcomers from /proc.
    /// With `--max-size`, the processes whose state each new segment starts with.
    procs: Option<Tracker>,
    /// With `--max-size`: the segment files (absent while a segment starts).
    segments: Option<Segments>,
    /// The event indexes of blocking stacks and wakeups: they choose a frame's zstd level.
    off_cpu: Vec<u32>,
    /// The data mappings kept, from the kernel and from /proc (see [`DataMaps`]).
    data_maps: DataMaps,
    /// What helps when the kernel dropped samples of this recording's kind.
    lost_advice: &'static str,
    /// With `--max-size`: the heap trace-tree nodes each new segment writes again.
    carry: Option<heap::carry::Carry>,
    /// Most live heap blocks each writer tracks (`--heap-max-live`).
    heap_max_live: usize,
    /// Live heap blocks untracked and so not carried into new segments, since the start.
    not_carried: u64,
}

/// At most this many distinct kernel addresses are remembered (8 MiB of set at worst); frames
/// beyond it stay unnamed rather than costing the board memory.
const MAX_KERNEL_ADDRS: usize = 1 << 19;

impl Output {
    /// Records of a recording made as `opts` say with `events`, written by `writer` (which
    /// has written `header`).
    pub(super) fn new(
        mut writer: FrameWriter<Disk>,
        opts: &Options,
        header: &Header,
        events: &Events,
        data_maps: DataMaps,
    ) -> Output {
        writer.set_heap_live_limit(opts.heap_max_live);
        Output {
            heap_max_live: opts.heap_max_live,
            not_carried: 0,
            writer: Some(writer),
            path: opts.out.display().to_string(),
            failed: None,
            samples: 0,
            lost: 0,
            identities: Identities::default(),
            kernel_addrs: HashSet::new(),
            kernel_symbols: KernelSymbols::default(),
            jit: jit::JitMaps::default(),
            procs: (opts.target == Target::System || opts.max_size.is_some())
                .then(Tracker::default),
            segments: opts
                .max_size
                .map(|max| Segments::new(&opts.out, max, header.clone())),
            off_cpu: events.off_cpu_events(),
            data_maps,
            carry: opts.max_size.map(|_| heap::carry::Carry::default()),
            lost_advice: opts
                .call_graph
                .lost_advice(opts.events.first().copied().unwrap_or(Kind::CpuClock)),
        }
    }

    pub(super) fn push(&mut self, r: &Record) {
        if let Some(w) = self.writer.as_mut() {
            if let Err(e) = w.push(r) {
                self.fail(e);
            }
        }
        self.rotate_if_due();
    }

    /// Starts a new segment when the current one is full (`--max-size`).
    fn rotate_if_due(&mut self) {
        if let (Some(s), Some(w)) = (self.segments.as_mut(), self.writer.as_mut()) {
            match s.due(w) {
                Ok(true) => self.next_segment(),
                Ok(false) => {}
                Err(e) => self.fail(e),
            }
        }
    }

    /// Starts the next segment of a `--max-size` recording with the state a reader needs to
    /// read it alone: the vDSO, every live recorded process (see [`crate::segments`]), and
    /// with `--heap` the trace-tree nodes and the live blocks of every process (see
    /// [`heap::carry`]).
    fn next_segment(&mut self) {
        let (Some(mut w), Some(mut s)) = (self.writer.take(), self.segments.take()) else {
            return;
        };
        let live = w.take_heap_live();
        self.not_carried += w.take_heap_untracked();
        let now = monotonic_ns();
        match s.next(w, now) {
            Ok(mut w) => {
                w.set_heap_live_limit(self.heap_max_live);
                self.writer = Some(w);
            }
            Err(e) => return self.fail(e),
        }
        self.write_vdso();
        for pid in self.procs.as_mut().map(|t| t.live()).unwrap_or_default() {
            self.snapshot(pid);
        }
        self.write_carried(&live, now);
        drop(live);
        self.flush();
        if let Some(w) = &self.writer {
            s.retire(w);
        }
        let errors = s.errors();
        self.segments = Some(s);
        // Running totals, into every new segment: the newest ones tell them whatever was
        // deleted.
        self.lost(Lost::DIRECTORY_SYNC_FAILED, errors.dir_sync_failed);
        self.lost(Lost::SEGMENT_DELETE_FAILED, errors.delete_failed);
        let dropped = self.carry.as_ref().map_or(0, |c| c.dropped);
        self.lost(heap::carry::LOST_KIND, dropped);
        self.lost(heap::carry::UNTRACKED_KIND, self.not_carried);
    }

    /// Writes the heap trace-tree nodes kept, then the carried live blocks (stamped `now`).
    fn write_carried(&mut self, live: &crossprof_format::LiveSet, now: u64) {
        let (Some(w), Some(c)) = (self.writer.as_mut(), self.carry.as_ref()) else {
            return;
        };
        let r = c
            .nodes()
            .try_for_each(|n| w.push(&Record::StackNode(n)))
            .and_then(|_| w.carry_heap(live, now));
        if let Err(e) = r {
            self.fail(e);
        }
    }

    pub(super) fn flush(&mut self) {
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
    pub(super) fn lost(&mut self, kind: &str, count: u64) {
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
            self.snapshot(pid);
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
        if !s.kernel_chain.is_empty() {
            self.kernel_symbols.start();
        }
        self.push(r);
    }

    /// Handles one decoded kernel record.
    fn record(&mut self, r: Record) {
        if let Record::Sample(_) | Record::EventSample(_) = r {
            return self.sample(&r);
        }
        if let Some(pid) = self.procs.as_mut().and_then(|t| t.first_seen(&r)) {
            self.snapshot(pid);
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
            Record::Mmap(m) if !self.data_maps.keeps(&m, false) => {}
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
                // Nor the main thread's stack, there before the exec's events were enabled.
                let stacks = self.data_maps != DataMaps::None;
                for m in procfs::maps(pid).unwrap_or_default() {
                    if m.path == "[vdso]" || (stacks && m.path == "[stack]") {
                        self.push(&Record::Mmap(m.into_mmap(pid, time)));
                    }
                }
                if let Some(limit) = stacks.then(|| data_maps::stack_limit(pid)).flatten() {
                    self.push(&limit);
                }
            }
            other => self.push(&other),
        }
    }

    /// Writes the state of process `pid` as it is now (see [`system_wide::snapshot`]).
    pub(super) fn snapshot(&mut self, pid: u32) {
        let data = self.data_maps;
        system_wide::snapshot(self, pid, data);
    }

    /// Writes the state of every process on the board and tracks them (`-a`).
    pub(super) fn snapshot_all(&mut self) {
        let mut t = self.procs.take().unwrap_or_default();
        let data = self.data_maps;
        system_wide::snapshot_all(self, &mut t, data);
        self.procs = Some(t);
    }

    /// Writes the vDSO image, which the host cannot find on disk.
    pub(super) fn write_vdso(&mut self) {
        if let Some((addr, data)) = procfs::own_vdso() {
            self.push(&Record::Blob(Blob {
                name: "[vdso]".into(),
                addr,
                data,
            }));
        }
    }

    /// Writes the kernel symbols that name the sampled kernel addresses (and the loaded
    /// modules' ranges, for frames in modules). Done once at the end: a recording cut short
    /// by kill -9 or power loss shows kernel frames as addresses.
    fn write_kallsyms(&mut self) {
        if self.kernel_addrs.is_empty() {
            return;
        }
        let symbols = std::mem::take(&mut self.kernel_symbols);
        for (name, data) in symbols.blobs(&self.kernel_addrs) {
            let (name, addr) = (name.into(), 0);
            self.push(&Record::Blob(Blob { name, addr, data }));
        }
    }

    /// Closes the recording: the untracked processes' count, the kernel symbols, the JIT maps
    /// of processes still running and the End record with `status`, then the file. Reports
    /// a write that failed at any point, and the kernel's losses.
    pub(super) fn close(mut self, status: i32) -> Result<(), RecError> {
        let untracked = self.procs.as_ref().map_or(0, |t| t.untracked);
        self.lost("untracked-process", untracked);
        self.write_kallsyms();
        for map in self.jit.take_all(monotonic_ns()) {
            self.push(&map);
        }
        let end = End {
            time: monotonic_ns(),
            exit_status: status.into(),
            samples: self.samples,
            lost_samples: self.lost,
        };
        if let Some(w) = self.writer.take() {
            if let Err(e) = w.finish(end).and_then(Disk::close) {
                self.fail(e);
            }
        }
        if let Some(e) = self.failed {
            return Err(RecError::WriteFailed(self.path, e));
        }
        if self.lost > 0 {
            eprintln!(
                "rec: the kernel dropped {} samples (ring buffer full); {}",
                self.lost, self.lost_advice
            );
        }
        Ok(())
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
        if let (Some(c), Record::StackNode(n)) = (self.carry.as_mut(), &r) {
            c.note(n);
        }
        Output::record(self, r);
    }

    fn heap_events(&mut self, pid: u32, events: &[HeapEvent]) {
        if let Some(w) = self.writer.as_mut() {
            if let Err(e) = w.heap_events(pid, events) {
                self.fail(e);
            }
        }
        self.rotate_if_due();
    }

    fn forget(&mut self, pid: u32) {
        if let Some(w) = self.writer.as_mut() {
            w.heap_forget(pid);
        }
        if let Some(c) = self.carry.as_mut() {
            c.forget(pid);
        }
    }
}
