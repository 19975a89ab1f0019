//! The Firefox Profiler's processed format, written through `fxprof-processed-profile` (the
//! crate samply uses, pinned in `Cargo.toml` so the format cannot change under us): the file
//! opens in <https://profiler.firefox.com> with "Load a profile from file".
//!
//! Frames are labels carrying the symbolized names (the profile needs no symbol server).
//! CPU samples go to one track per thread at their board time; lost-sample records become
//! "Lost samples" markers where the board dropped them. A heap recording becomes the
//! profiler's native-allocation tracks (one per process, as the profiler keeps them) and a
//! memory counter of the live heap over time. With the analysis' event log
//! ([`crate::analysis::heap::events`]) each allocation and its free sit at their board times,
//! with their sizes and the allocating stack (a free has no stack of its own: it carries its
//! allocation's), so the "Allocations" and "Retained memory" call trees follow a selected time
//! range; when the log kept one allocation in N (huge recordings), a "Heap events sampled"
//! marker at the start says so. Without the log, per allocating stack, one allocation of the
//! bytes later freed (and their free) plus one of the bytes still live sit at the recording's
//! end.

use std::collections::HashMap;

use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CategoryPairHandle, CpuDelta, Frame, FrameFlags, FrameInfo,
    MarkerFieldFlags, MarkerFieldFormat, MarkerTiming, ProcessHandle, Profile, ReferenceTimestamp,
    SamplingInterval, StackHandle, StaticSchemaMarker, StaticSchemaMarkerField, StringHandle,
    ThreadHandle, Timestamp,
};

use crate::analysis::cpu::CpuProfile;
use crate::analysis::heap::{HeapEvent, HeapEvents, HeapProfile};
use crate::frames::{FrameId, FrameTable};
use crate::output::context::ReportContext;
use crate::resolve::is_kernel_module;

/// A "Lost samples" marker: the kernel's ring buffer overflowed and `count` samples are missing.
struct LostMarker {
    name: StringHandle,
    count: u64,
}

impl StaticSchemaMarker for LostMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "CrossprofLost";
    const DESCRIPTION: Option<&'static str> =
        Some("Samples the board dropped (ring buffer full): the profile is thinner here.");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.data.count} samples lost");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[StaticSchemaMarkerField {
        key: "count",
        label: "Lost samples",
        format: MarkerFieldFormat::Integer,
        flags: MarkerFieldFlags::empty(),
    }];

    fn name(&self, _profile: &mut Profile) -> StringHandle {
        self.name
    }

    fn category(&self, _profile: &mut Profile) -> CategoryHandle {
        CategoryHandle::OTHER
    }

    fn string_field_value(&self, _field_index: u32) -> StringHandle {
        self.name
    }

    fn number_field_value(&self, _field_index: u32) -> f64 {
        self.count as f64
    }
}

/// A note on the whole profile (e.g. that allocations were sampled), as a marker whose text
/// the profiler shows in its marker table and tooltip.
struct NoteMarker {
    name: StringHandle,
    text: StringHandle,
}

impl StaticSchemaMarker for NoteMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "CrossprofNote";
    const DESCRIPTION: Option<&'static str> = Some("What the export left out, and why.");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.data.text}");
    const TOOLTIP_LABEL: Option<&'static str> = Some("{marker.data.text}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[StaticSchemaMarkerField {
        key: "text",
        label: "Note",
        format: MarkerFieldFormat::String,
        flags: MarkerFieldFlags::empty(),
    }];

    fn name(&self, _profile: &mut Profile) -> StringHandle {
        self.name
    }

    fn category(&self, _profile: &mut Profile) -> CategoryHandle {
        CategoryHandle::OTHER
    }

    fn string_field_value(&self, _field_index: u32) -> StringHandle {
        self.text
    }

    fn number_field_value(&self, _field_index: u32) -> f64 {
        0.0
    }
}

/// Builds tracks, labels and stacks on a profile.
struct Tracks<'a> {
    profile: Profile,
    start: u64,
    processes: HashMap<u32, ProcessHandle>,
    threads: HashMap<(u32, u32), ThreadHandle>,
    /// Each process's first track: the crate puts all of a process's allocation samples on
    /// it, and reads their stacks from that track's stack table.
    first_thread: HashMap<u32, ThreadHandle>,
    user: CategoryPairHandle,
    kernel: CategoryPairHandle,
    ctx: &'a ReportContext,
}

impl Tracks<'_> {
    fn at(&self, time: u64) -> Timestamp {
        Timestamp::from_nanos_since_reference(time.saturating_sub(self.start))
    }

    fn process(&mut self, pid: u32) -> ProcessHandle {
        if let Some(&p) = self.processes.get(&pid) {
            return p;
        }
        let name = self.ctx.names.get(pid).to_string();
        let p = self
            .profile
            .add_process(&name, pid, Timestamp::from_nanos_since_reference(0));
        self.processes.insert(pid, p);
        p
    }

    fn thread(&mut self, pid: u32, tid: u32) -> ThreadHandle {
        if let Some(&t) = self.threads.get(&(pid, tid)) {
            return t;
        }
        let p = self.process(pid);
        let t =
            self.profile
                .add_thread(p, tid, Timestamp::from_nanos_since_reference(0), pid == tid);
        let name = self.ctx.names.get(tid).to_string();
        self.profile.set_thread_name(t, &name);
        self.first_thread.entry(pid).or_insert(t);
        self.threads.insert((pid, tid), t);
        t
    }

    /// The track that holds `pid`'s allocation samples: the process's first (the crate's
    /// rule), whose stack table their stacks must come from. A process with no track yet gets
    /// its main thread's.
    fn alloc_thread(&mut self, pid: u32) -> ThreadHandle {
        match self.first_thread.get(&pid) {
            Some(&t) => t,
            None => self.thread(pid, pid),
        }
    }

    /// The stack of `frames` (innermost first) on `thread`.
    fn stack(
        &mut self,
        thread: ThreadHandle,
        table: &FrameTable,
        frames: &[FrameId],
    ) -> Option<StackHandle> {
        let infos: Vec<FrameInfo> = frames
            .iter()
            .rev()
            .map(|&id| {
                // The name alone: a label per line would split a function's call-tree node.
                let f = table.get(id);
                FrameInfo {
                    frame: Frame::Label(self.profile.intern_string(&f.function)),
                    category_pair: if is_kernel_module(&f.module) {
                        self.kernel
                    } else {
                        self.user
                    },
                    flags: FrameFlags::empty(),
                }
            })
            .collect();
        self.profile.intern_stack_frames(thread, infos.into_iter())
    }
}

/// The recording as a Firefox Profiler profile: CPU samples, and the heap when `heap` is given.
pub fn profile(ctx: &ReportContext, cpu: &CpuProfile, heap: Option<&HeapProfile>) -> Profile {
    let h = &ctx.header;
    let interval = if h.sample_freq > 0 {
        SamplingInterval::from_hz(h.sample_freq as f32)
    } else {
        SamplingInterval::from_millis(1)
    };
    let mut profile = Profile::new(
        &h.command.join(" "),
        ReferenceTimestamp::from_millis_since_unix_epoch(h.start_unix_ns as f64 / 1e6),
        interval,
    );
    profile.set_os_name(&format!("Linux {} ({})", h.kernel_release, h.arch));
    profile.set_symbolicated(true);
    let user = profile.add_category("User", CategoryColor::Yellow).into();
    let kernel = profile.add_category("Kernel", CategoryColor::Orange).into();
    let mut t = Tracks {
        profile,
        start: h.start_clock_ns,
        processes: HashMap::new(),
        threads: HashMap::new(),
        first_thread: HashMap::new(),
        user,
        kernel,
        ctx,
    };

    let mut stacks: HashMap<u32, Option<StackHandle>> = HashMap::new();
    for s in &cpu.timeline {
        let st = &cpu.stacks[s.stack as usize];
        let thread = t.thread(st.pid, st.tid);
        let stack = match stacks.get(&s.stack) {
            Some(&h) => h,
            None => {
                let h = t.stack(thread, &cpu.table, &st.frames);
                stacks.insert(s.stack, h);
                h
            }
        };
        let ts = t.at(s.time);
        t.profile
            .add_sample(thread, ts, stack, CpuDelta::from_nanos(s.period), 1);
    }

    if !ctx.lost_marks.is_empty() {
        // Lost records carry no thread: they go on the main thread of the first process.
        let (pid, tid) = cpu.threads.first().map_or((0, 0), |r| (r.pid, r.pid));
        let thread = t.thread(pid, tid);
        let name = t.profile.intern_string("Lost samples");
        for m in &ctx.lost_marks {
            let (time, count) = (m.time, m.count);
            let ts = t.at(time);
            t.profile.add_marker(
                thread,
                MarkerTiming::Instant(ts),
                LostMarker { name, count },
            );
        }
    }

    if let Some(p) = heap {
        heap_tracks(&mut t, p);
    }
    t.profile
}

/// Each logged allocation and free at its time, on its process's allocation track.
fn heap_events(t: &mut Tracks<'_>, p: &HeapProfile, ev: &HeapEvents) {
    let mut stacks: HashMap<usize, (ThreadHandle, Option<StackHandle>)> = HashMap::new();
    // Time order (stable: a free stamped with its allocation's coarse tick stays after it);
    // the stream is in time order per thread, not across threads and processes.
    let mut order: Vec<&HeapEvent> = ev.events.iter().collect();
    order.sort_by_key(|e| e.time);
    for e in order {
        let Some(tr) = p.traces.get(e.trace) else {
            continue;
        };
        let (thread, stack) = match stacks.get(&e.trace) {
            Some(&s) => s,
            None => {
                let thread = t.alloc_thread(tr.pid);
                let s = (thread, t.stack(thread, &p.table, &tr.frames));
                stacks.insert(e.trace, s);
                s
            }
        };
        let ts = t.at(e.time);
        t.profile
            .add_allocation_sample(thread, ts, stack, e.id, e.size);
    }
    let hidden = ev.not_shown();
    if let (true, Some(tr)) = (hidden > 0, p.traces.first()) {
        let thread = t.alloc_thread(tr.pid);
        let name = t.profile.intern_string("Heap events sampled");
        let text = t.profile.intern_string(&format!(
            "{} of {} allocations shown at their times (one in {}, at most {}), each with its \
             free; the counter and `hostside report --heap` count them all",
            ev.allocations - hidden,
            ev.allocations,
            ev.every,
            ev.cap
        ));
        let ts = t.at(t.start);
        t.profile
            .add_marker(thread, MarkerTiming::Instant(ts), NoteMarker { name, text });
    }
}

/// Allocation samples per stack, at the recording's end (without an event log).
fn heap_sums(t: &mut Tracks<'_>, p: &HeapProfile) {
    let end = t.at(p.end_time.max(t.start));
    // Unique addresses pair each aggregated allocation with its free; they are no real
    // addresses.
    let mut address = 0u64;
    for tr in &p.traces {
        let thread = t.alloc_thread(tr.pid);
        let stack = t.stack(thread, &p.table, &tr.frames);
        let c = &tr.counts;
        let freed = c.allocated_bytes.saturating_sub(c.leaked_bytes);
        if freed > 0 {
            address += 1;
            let size = i64::try_from(freed).unwrap_or(i64::MAX);
            t.profile
                .add_allocation_sample(thread, end, stack, address, size);
            t.profile
                .add_allocation_sample(thread, end, stack, address, -size);
        }
        if c.leaked_bytes > 0 {
            address += 1;
            let size = i64::try_from(c.leaked_bytes).unwrap_or(i64::MAX);
            t.profile
                .add_allocation_sample(thread, end, stack, address, size);
        }
    }
}

/// The allocation tracks and the live-heap counter.
fn heap_tracks(t: &mut Tracks<'_>, p: &HeapProfile) {
    match &p.events {
        Some(ev) => heap_events(t, p, ev),
        None => heap_sums(t, p),
    }
    if let Some(pid) = p.traces.first().map(|tr| tr.pid) {
        let process = t.process(pid);
        let counter = t.profile.add_counter(
            process,
            "malloc",
            "Memory",
            "Live heap bytes (all recorded processes)",
        );
        let mut last = 0f64;
        for (i, b) in p.timeline.iter().enumerate() {
            if let Some(v) = b.heap_last {
                let time = p.timeline_start + i as u64 * p.timeline_width;
                let ts = t.at(time);
                t.profile
                    .add_counter_sample(counter, ts, v as f64 - last, 1);
                last = v as f64;
            }
        }
    }
}
