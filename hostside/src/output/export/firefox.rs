//! The Firefox Profiler's processed format, written through `fxprof-processed-profile` (the
//! crate samply uses, pinned in `Cargo.toml` so the format cannot change under us): the file
//! opens in <https://profiler.firefox.com> with "Load a profile from file".
//!
//! Frames are labels carrying the symbolized names (the profile needs no symbol server).
//! CPU samples go to one track per thread at their board time; lost-sample records become
//! "Lost samples" markers where the board dropped them. A heap recording becomes the
//! profiler's native-allocation tracks: per allocating stack, one allocation of the bytes later
//! freed (and their free) plus one of the bytes still live at the end, so its "Allocations"
//! and "Retained memory" call trees show the bytes allocated and leaked per stack, and a memory
//! counter shows the live heap over time. The recording keeps no per-allocation times in the
//! analysis, so those allocation samples sit at the recording's end.

use std::collections::HashMap;

use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CategoryPairHandle, CpuDelta, Frame, FrameFlags, FrameInfo,
    MarkerFieldFlags, MarkerFieldFormat, MarkerTiming, ProcessHandle, Profile, ReferenceTimestamp,
    SamplingInterval, StackHandle, StaticSchemaMarker, StaticSchemaMarkerField, StringHandle,
    ThreadHandle, Timestamp,
};

use crate::analysis::cpu::CpuProfile;
use crate::analysis::heap::HeapProfile;
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

/// Builds tracks, labels and stacks on a profile.
struct Tracks<'a> {
    profile: Profile,
    start: u64,
    processes: HashMap<u32, ProcessHandle>,
    threads: HashMap<(u32, u32), ThreadHandle>,
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
        self.threads.insert((pid, tid), t);
        t
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

/// Allocation samples per stack and the live-heap counter.
fn heap_tracks(t: &mut Tracks<'_>, p: &HeapProfile) {
    let end = t.at(p.end_time.max(t.start));
    // Unique addresses pair each aggregated allocation with its free; they are no real
    // addresses.
    let mut address = 0u64;
    let mut first_pid = None;
    for tr in &p.traces {
        first_pid.get_or_insert(tr.pid);
        let thread = t.thread(tr.pid, tr.pid);
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
    if let Some(pid) = first_pid {
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
