//! `rec --heap`: receives each process's ring from the preloaded interposer, turns its events
//! into `Alloc`/`Free`/`StackNode` records (and the program's own anonymous mappings into
//! `AnonMap` records) in ring order (which is the process's event order), adds the maps when
//! perf cannot report them, and samples RSS (with its split by kind of mapping,
//! [`rss_split`]).
//!
//! Emulated processes: a process run by qemu-user holds its guest's code as data in its maps
//! (`r--p`, under the host's paths), so neither perf nor /proc tell where the code the stacks
//! name lies. Its interposer describes the modules it sees loaded ([`ring::Module`]); rec
//! writes them as the process's `Mmap` records when, and only when, the address of the
//! interposer's own code (given in its hello) lies in no executable mapping of the process's
//! /proc/PID/maps (read when the process connects): the kernel does not run that code, an
//! emulator does. Natively the interposer's code always lies in one (it is running), so a
//! native recording holds only the mappings it always held, and the interposer is told to
//! stop sending its list ([`ring::Ring::want_modules`]). A process rec finds gone or
//! unreadable when it connects counts as native.
//!
//! Trace-tree ids: the interposer numbers nodes from 1 in each process image. After an exec
//! the same pid starts again at 1, so rec offsets a later image's ids past the largest id
//! it saw for that pid: ids stay unique per pid, as the host expects.
//!
//! Memory: one mapped ring per live process (2 MiB each), unmapped once the process is gone
//! and its ring drained; per pid a few counters and the set of mappings already written.
//! The frame writer keeps each process's live blocks (about 21 bytes each, to write frees
//! without addresses) and its distinct (size, stack) pairs; with `--max-size` each segment
//! starts the pairs afresh, rec keeps the trace-tree nodes to carry (24 bytes each, at most
//! 1M: [`carry`]), and while a segment starts, its carried live set is copied once (24
//! bytes per live block). So rec's memory stays bounded for as long as the program's live
//! block count and stack count do, whatever the run's length: about 4 MiB of peak RSS for a
//! 25 s and for a 10 minute run of a program with 1050 live blocks and 100000 allocations a
//! second (`tests/tests/heap_max_size.rs`, bench/RESULTS.md).

pub mod attach;
pub mod carry;
pub mod endpoint;
pub mod preload;
pub mod ring;
pub mod rss_split;
pub mod sample;

use std::collections::{HashMap, HashSet};

use crossprof_format::{AnonMap, Comm, HeapEvent, Lost, MapOp, Mmap, Record, Rss, StackNode, Task};
use crossprof_heap_wire::kind;

use crate::procfs::{self, MapLine};
use endpoint::Endpoint;
use ring::{Event, Module, Ring};

/// Where mappings come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapsSource {
    /// perf events (CPU sampling or a dummy event) report MMAP2/COMM/FORK.
    Perf,
    /// No perf: rec reads /proc/PID/maps when a process connects and when its interposer says
    /// the modules changed, and writes Comm/Fork itself.
    Procfs,
}

struct Connected {
    pid: u32,
    ring: Ring,
    /// Added to this image's node ids.
    id_base: u64,
}

#[derive(Default)]
struct Proc {
    /// Largest id written for this pid (after offsetting).
    max_id: u64,
    /// Mappings already written (procfs mode): (start, end, pgoff).
    written: HashSet<(u64, u64, u64)>,
    /// The process runs its code emulated: its modules come from its interposer.
    emulated: bool,
    /// Emulated: the module last written at each (start, end, pgoff), by path and build-id.
    described: HashMap<(u64, u64, u64), Described>,
}

/// A module rec wrote for an emulated process: its path and build-id.
type Described = (Vec<u8>, Vec<u8>);

/// Where the heap side's output goes: records in file order, and heap events, which the
/// writer encodes without building a record each (see `FrameWriter::heap_alloc`).
pub trait Emit {
    /// Any record other than a heap event.
    fn record(&mut self, r: Record);
    /// Heap events of process `pid`, in order.
    fn heap_events(&mut self, pid: u32, events: &[HeapEvent]);
    /// The address space of `pid` is gone (exec or exit): its live blocks are never freed.
    fn forget(&mut self, pid: u32);
}

/// The heap side of a recording.
pub struct Heap {
    endpoint: Endpoint,
    rings: Vec<Connected>,
    procs: HashMap<u32, Proc>,
    source: MapsSource,
    page_size: u64,
    /// Events written (allocs + frees), for the end summary.
    pub events: u64,
    /// Events the interposers reported lost.
    pub lost: u64,
    bad_rings: u64,
    /// Heap events on their way to the writer (see `drain`).
    batch: Vec<HeapEvent>,
    /// RSS by kind of mapping, at the RSS ticks its cost allows.
    split: rss_split::Sampler,
}

/// Heap events handed to the writer at once.
const BATCH: usize = 512;

impl Heap {
    /// Starts listening.
    pub fn new(source: MapsSource) -> std::io::Result<Heap> {
        Ok(Heap {
            endpoint: Endpoint::listen()?,
            rings: Vec::new(),
            procs: HashMap::new(),
            source,
            page_size: procfs::page_size() as u64,
            events: 0,
            lost: 0,
            bad_rings: 0,
            batch: Vec::with_capacity(BATCH),
            split: rss_split::Sampler::default(),
        })
    }

    /// Switches to reading maps from /proc (perf events are unavailable).
    pub fn set_source(&mut self, source: MapsSource) {
        self.source = source;
    }

    /// The socket name for the application's environment.
    pub fn socket_name(&self) -> &str {
        &self.endpoint.name
    }

    /// The listening descriptor (poll it to learn of new processes early).
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.endpoint.fd()
    }

    /// Drains every ring, then takes in new processes. `emit` receives the records in file
    /// order.
    pub fn tick(&mut self, emit: &mut dyn Emit) {
        for i in 0..self.rings.len() {
            self.drain(i, emit);
        }
        for a in self.endpoint.arrivals() {
            let pid = a.hello.pid;
            let Some(ring) = Ring::map(&a.memfd, a.hello.map_bytes) else {
                ring::refuse(&a.memfd);
                self.bad_rings += 1;
                continue;
            };
            // A new image of a known pid (exec): finish the old ring first.
            while let Some(i) = self.rings.iter().position(|c| c.pid == pid) {
                self.drain(i, emit);
                self.rings.swap_remove(i);
            }
            emit.forget(pid);
            let known = self.procs.contains_key(&pid);
            let p = self.procs.entry(pid).or_default();
            let id_base = p.max_id;
            // Read once: whether the process is emulated, and (procfs mode) its mappings.
            let maps = procfs::maps(pid).unwrap_or_default();
            p.emulated = emulated(&maps, a.hello.code);
            p.described.clear();
            ring.want_modules(p.emulated);
            let now = crate::clock::monotonic_ns();
            if self.source == MapsSource::Procfs {
                if !known {
                    emit.record(Record::Fork(Task {
                        time: now,
                        pid,
                        tid: pid,
                        ppid: a.hello.ppid,
                        ptid: a.hello.ppid,
                    }));
                }
                emit.record(Record::Comm(Comm {
                    time: now,
                    pid,
                    tid: pid,
                    comm: procfs::comm(pid, pid),
                    exec: true,
                }));
                p.written.clear();
                write_maps(pid, now, maps, p, emit);
            }
            self.rings.push(Connected { pid, ring, id_base });
            let i = self.rings.len() - 1;
            self.drain(i, emit);
        }
    }

    /// Rings rec could not use: refused (an interposer of another version) or malformed.
    pub fn bad_rings(&self) -> u64 {
        self.bad_rings + self.endpoint.refused
    }

    /// Whether a producer asked for an early drain (then do not sleep before the next tick).
    pub fn urgent(&self) -> bool {
        self.rings.iter().any(|c| c.ring.bell())
    }

    /// Drops the rings of processes that are gone (after a last drain).
    pub fn reap(&mut self, emit: &mut dyn Emit) {
        let mut i = 0;
        while i < self.rings.len() {
            if alive(self.rings[i].pid) {
                i += 1;
                continue;
            }
            self.drain(i, emit);
            let pid = self.rings.swap_remove(i).pid;
            emit.forget(pid);
        }
    }

    /// Writes an `Rss` record for each process with a ring, and when due (see [`rss_split`])
    /// an `RssSplit`.
    pub fn sample_rss(&mut self, emit: &mut dyn Emit) {
        let time = crate::clock::monotonic_ns();
        let mut seen = HashSet::new();
        let mut pids = Vec::new();
        for c in &self.rings {
            if !seen.insert(c.pid) {
                continue;
            }
            pids.push(c.pid);
            if let Some(pages) = procfs::statm_resident(c.pid) {
                emit.record(Record::Rss(Rss {
                    time,
                    pid: c.pid,
                    bytes: pages * self.page_size,
                }));
            }
        }
        if self.split.due() && !pids.is_empty() {
            for s in self.split.take(&pids, time) {
                emit.record(Record::RssSplit(s));
            }
        }
    }

    /// Final drain; tells every producer to stop.
    pub fn finish(&mut self, emit: &mut dyn Emit) {
        self.tick(emit);
        for i in 0..self.rings.len() {
            self.drain(i, emit);
            self.rings[i].ring.close();
        }
        self.rings.clear();
    }

    fn drain(&mut self, i: usize, emit: &mut dyn Emit) {
        let Connected { pid, ring, id_base } = &mut self.rings[i];
        let (pid, base) = (*pid, *id_base);
        let p = self.procs.entry(pid).or_default();
        let source = self.source;
        let mut events = 0;
        // Heap events go to the writer in batches (it prefetches ahead within one), and
        // always before any other record, so file order stays ring order.
        let batch = &mut self.batch;
        batch.clear();
        let ok = ring.drain(|ev| {
            let heap = match ev {
                Event::Alloc {
                    tid,
                    time,
                    addr,
                    size,
                    stack,
                } => Some(HeapEvent {
                    tid,
                    time,
                    addr,
                    size,
                    stack: if stack == 0 { 0 } else { stack + base },
                    alloc: true,
                }),
                Event::Free { tid, time, addr } => Some(HeapEvent {
                    tid,
                    time,
                    addr,
                    size: 0,
                    stack: 0,
                    alloc: false,
                }),
                _ => None,
            };
            if let Some(h) = heap {
                events += 1;
                batch.push(h);
                if batch.len() == BATCH {
                    emit.heap_events(pid, batch);
                    batch.clear();
                }
                return;
            }
            if !batch.is_empty() {
                emit.heap_events(pid, batch);
                batch.clear();
            }
            other_event(ev, pid, base, source, p, emit);
        });
        if !batch.is_empty() {
            emit.heap_events(pid, batch);
            batch.clear();
        }
        self.events += events;
        if !ok {
            self.bad_rings += 1;
        }
        let lost = ring.take_lost();
        if lost > 0 {
            self.lost += lost;
            emit.record(Record::Lost(Lost {
                time: crate::clock::monotonic_ns(),
                count: lost,
                kind: "heap".into(),
            }));
        }
    }
}

/// Writes an event of the ring that is not a heap event (a trace-tree node, a mapping, a
/// module): out of line, so that the per-event path of heap events stays small.
#[inline(never)]
fn other_event(
    ev: Event,
    pid: u32,
    base: u64,
    source: MapsSource,
    p: &mut Proc,
    emit: &mut dyn Emit,
) {
    match ev {
        Event::Node { id, parent, ip } => {
            let id = id + base;
            p.max_id = p.max_id.max(id);
            emit.record(Record::StackNode(StackNode {
                pid,
                id,
                parent: if parent == 0 { 0 } else { parent + base },
                ip,
            }))
        }
        Event::Maps { time } if source == MapsSource::Procfs => {
            write_maps(pid, time, procfs::maps(pid).unwrap_or_default(), p, emit);
        }
        Event::Module(m) if p.emulated => write_module(pid, &m, p, emit),
        Event::Mapping {
            kind: k,
            tid,
            time,
            words: w,
        } => {
            let stack = |id: u64| if id == 0 { 0 } else { id + base };
            let (op, addr, len, old_addr, old_len, id) = match k {
                kind::MMAP => (MapOp::Map, w[0], w[1], 0, 0, w[2]),
                kind::MUNMAP => (MapOp::Unmap, w[0], w[1], 0, 0, 0),
                _ => (MapOp::Remap, w[2], w[3], w[0], w[1], w[4]),
            };
            emit.record(Record::AnonMap(AnonMap {
                time,
                pid,
                tid,
                op,
                addr,
                len,
                old_addr,
                old_len,
                stack: stack(id),
            }));
        }
        _ => {}
    }
}

/// Writes the executable mappings of `pid` not written before.
fn write_maps(pid: u32, time: u64, maps: Vec<MapLine>, p: &mut Proc, emit: &mut dyn Emit) {
    for m in maps {
        if m.prot & libc::PROT_EXEC as u32 == 0 || m.path.is_empty() {
            continue;
        }
        if !p.written.insert((m.start, m.end, m.pgoff)) {
            continue;
        }
        emit.record(Record::Mmap(m.into_mmap(pid, time)));
    }
}

/// Whether a process with mappings `maps` runs the interposer's code at `code` emulated: its
/// maps could be read (not empty) and show no executable mapping there (see the module docs).
fn emulated(maps: &[MapLine], code: u64) -> bool {
    !maps.is_empty()
        && !maps
            .iter()
            .any(|m| m.prot & libc::PROT_EXEC as u32 != 0 && m.start <= code && code < m.end)
}

/// Writes an emulated process's module segment as a mapping, unless the same module is
/// already written at that place.
fn write_module(pid: u32, m: &Module, p: &mut Proc, emit: &mut dyn Emit) {
    let key = (m.start, m.start.saturating_add(m.len), m.pgoff);
    let known = p.described.get(&key);
    if known.is_some_and(|(path, id)| *path == m.path && *id == m.build_id) {
        return;
    }
    p.described
        .insert(key, (m.path.clone(), m.build_id.clone()));
    emit.record(Record::Mmap(Mmap {
        time: m.time,
        pid,
        tid: m.tid,
        start: m.start,
        len: m.len,
        pgoff: m.pgoff,
        path: String::from_utf8_lossy(&m.path).into_owned(),
        build_id: m.build_id.clone(),
        prot: m.prot,
        // The path is the emulated program's: a file of this machine by that name (if
        // any) is another one.
        inode: 0,
        file_size: 0,
        mtime: 0,
        fingerprint: 0,
    }));
}

/// Everything `--heap` needs before the launch: the library, a program it can be preloaded
/// into, and the socket the interposers will connect to.
pub fn prepare(
    cmd: &[std::ffi::OsString],
) -> Result<(Heap, std::path::PathBuf), crate::error::RecError> {
    use crate::error::RecError;
    let lib = preload::find_library()?;
    if let Some(path) = crate::launch::resolve(&cmd[0]) {
        // An interposer for another architecture than rec's can only be meant for a program
        // an emulator runs (qemu-user, itself static, hands LD_PRELOAD to its guest).
        if preload::is_static_elf(&path) && !preload::for_another_machine(&lib) {
            return Err(RecError::StaticProgram(path.display().to_string()));
        }
    }
    let h = Heap::new(MapsSource::Perf)
        .map_err(|e| RecError::Io("--heap: cannot listen on a Unix socket".into(), e))?;
    Ok((h, lib))
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    let r = unsafe { libc::kill(pid as i32, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}
