//! One recording, opened and analysed: the shared first step of `report`, `flamegraph`,
//! `export` and `diff`. The steps run one way, each using only what the ones before it made:
//!
//! 1. [`Recording`]: the file, its header and a tolerant reader;
//! 2. [`Processes`]: tasks, address spaces and the modules mapped into them (one metadata pass),
//!    after which the user's [`Filter`] is checked and bound to the recording's clock
//!    ([`Window`]): the CPU pass keeps only its samples, the other analyses read it from
//!    [`Loaded::window`], and [`ReportContext::window`] tells the outputs what was selected;
//! 3. [`Resolver`]: each module located in the sysroot (build-id, debuglink, path) and loaded;
//! 4. [`StackUnwinder`] and [`cpu::analyze`]: stack copies unwound, samples aggregated by
//!    distinct stack, then every distinct address resolved once into frames;
//! 5. the profiles ([`CpuProfile`], and on demand [`HeapProfile`] from [`Loaded::heap`]);
//! 6. [`Loaded::context`]: the small [`ReportContext`] that, with a profile, is all an output
//!    in [`crate::output`] reads.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Result};
use crossprof_format::{Arch, Record, Summary};
use crossprof_symbols::Lookup;

use crate::analysis::cpu::{self, CpuProfile};
use crate::analysis::events::DataMaps;
use crate::analysis::heap::{self, HeapOptions, HeapProfile};
use crate::analysis::off_cpu_profile::OffCpuEvents;
use crate::analysis::thread_timeline::{self, Grid, ThreadTimeline, TimelineEvents};
use crate::diagnostics::{self, Sources};
use crate::filter::{Filter, Tasks, Window};
use crate::output::context::{LostMark, ModuleRow, ReportContext};
use crate::processes::{Mappings, Processes};
use crate::recording::Recording;
use crate::resolve::Resolver;
use crate::unwinding::StackUnwinder;

/// A recording with its CPU profile.
pub struct Loaded {
    /// The file.
    pub recording: Recording,
    /// Its target architecture, read from the header once, before the first pass.
    pub arch: Arch,
    /// What the reader saw.
    pub summary: Summary,
    /// Tasks and mappings.
    pub processes: Processes,
    /// Module lookup and symbolization.
    pub resolver: Resolver,
    /// The CPU profile.
    pub cpu: CpuProfile,
    /// Samples the kernel or recorder dropped.
    pub lost_samples: u64,
    /// Every `Lost` record's count, summed by kind (`samples`, `heap`, and what `rec` could
    /// not decode, resynchronize or enable).
    pub lost: BTreeMap<String, u64>,
    /// Where samples were lost (see [`LostMark`]).
    pub lost_marks: Vec<LostMark>,
    /// Nanoseconds from the recording's start to its end (or its last event).
    pub duration_ns: u64,
    /// Whether the file holds heap allocation records.
    pub has_heap: bool,
    /// Whether the file holds context-switch records.
    pub has_switches: bool,
    /// Whether the file holds CPU samples (inside the window or not).
    pub has_samples: bool,
    /// The part of the recording analysed (`--from/--to/--pid/--tid`): [`Loaded::cpu`] holds
    /// only its samples, and the other analyses read it from here.
    pub window: Window,
    /// The threads' lives as the metadata pass saw them, for [`Loaded::timeline`].
    pub timeline_events: TimelineEvents,
    /// Every mapping, data ones included, as the metadata pass saw them (for `--event`).
    pub data_maps: DataMaps,
    /// The switches, sample times and wakeups the off-CPU analysis needs, kept by the
    /// metadata pass when the header says switches were recorded (`rec --off-cpu`).
    pub off_cpu_events: Option<OffCpuEvents>,
}

/// Opens and analyses `path`; an architecture this hostside does not know is refused (see
/// [`analyze`]).
pub fn load_checked(path: &Path, lookup: &Lookup) -> Result<Loaded> {
    analyze(Recording::open(path)?, lookup)
}

/// [`load_checked`] restricted to `filter`'s time window, process and thread; a filter that
/// does not fit the recording (see [`Filter::bind`]) is an error that says why.
pub fn load(path: &Path, lookup: &Lookup, filter: &Filter) -> Result<Loaded> {
    analyze_filtered(Recording::open(path)?, lookup, filter)
}

/// Analyses an opened recording. The architecture is read from the header first, before any
/// pass, and an unknown one is an error that says so instead of guessing; after that nothing
/// fails: a damaged recording yields what its intact frames hold.
pub fn analyze(recording: Recording, lookup: &Lookup) -> Result<Loaded> {
    analyze_filtered(recording, lookup, &Filter::default())
}

/// [`analyze`] with a filter: checked against the recording after the metadata pass, then
/// applied to the CPU samples as they stream past (samples outside it are not even unwound).
pub fn analyze_filtered(recording: Recording, lookup: &Lookup, filter: &Filter) -> Result<Loaded> {
    let Some(arch) = Arch::from_name(&recording.header().arch) else {
        bail!(
            "{}: unknown target architecture {:?}",
            recording.path().display(),
            recording.header().arch
        );
    };
    let mut last_time = 0u64;
    let mut lost: BTreeMap<String, u64> = BTreeMap::new();
    let mut lost_marks = Vec::new();
    let mut end_time = None;
    let mut has_heap = false;
    let mut has_switches = false;
    let mut has_samples = false;
    let mut summary = Summary::default();
    let mut tasks = Tasks::default();
    let mut timeline_events = TimelineEvents::default();
    let mut data_maps = DataMaps::default();
    let mut off_cpu_events =
        (!recording.header().off_cpu.is_empty()).then(|| OffCpuEvents::new(recording.header(), 0));
    let processes = Processes::build(&mut |f| {
        summary = recording.for_each_metadata(|r| {
            timeline_events.observe(&r);
            data_maps.observe(&r);
            if let Some(e) = off_cpu_events.as_mut() {
                e.observe(&r);
            }
            match &r {
                Record::Lost(l) => {
                    l.tally(&mut lost);
                    if l.kind == "samples" {
                        LostMark::push(&mut lost_marks, l.time, l.count);
                    }
                }
                Record::End(e) => end_time = Some(e.time),
                Record::Sample(s) => {
                    has_samples = true;
                    last_time = last_time.max(s.time);
                    tasks.add(s.pid, s.tid);
                }
                Record::Comm(c) => tasks.add(c.pid, c.tid),
                Record::Fork(t) | Record::Exit(t) => tasks.add(t.pid, t.tid),
                Record::Alloc(a) => {
                    has_heap = true;
                    last_time = last_time.max(a.time);
                }
                Record::Free(f) => last_time = last_time.max(f.time),
                // Heap events are skipped in this pass: RSS snapshots, taken along with them,
                // tell how far a recording cut short got.
                Record::Rss(r) => last_time = last_time.max(r.time),
                Record::Switch(s) => {
                    has_switches = true;
                    tasks.add(s.pid, s.tid);
                }
                _ => {}
            }
            f(r)
        });
    });
    has_heap |= summary.heap_records > 0;
    data_maps.finish();
    let start = recording.header().start_clock_ns;
    let duration_ns = end_time.unwrap_or(last_time).saturating_sub(start);
    let window = filter.bind(
        &recording.path().display().to_string(),
        start,
        duration_ns,
        &tasks,
    )?;
    let resolver = Resolver::new(&processes, lookup);
    let header = recording.header();
    let mut unwinder = StackUnwinder::new(&processes, &resolver, arch, header.big_endian);
    // Debug info loads on another core while this one reads and unwinds the samples. Without
    // samples, modules load as the heap analysis first needs them: those that hold no
    // allocation site are never read.
    let cpu = std::thread::scope(|scope| {
        if has_samples {
            scope.spawn(|| resolver.preload());
        }
        cpu::analyze(
            &mut |f| {
                // A heap-only recording has no samples: no second pass over it.
                if has_samples {
                    recording.for_each(|r| match &r {
                        Record::Sample(s) if !window.keeps(s.time, s.pid, s.tid) => {}
                        _ => f(r),
                    });
                }
            },
            &processes,
            &resolver,
            &mut unwinder,
        )
    });
    Ok(Loaded {
        recording,
        arch,
        summary,
        processes,
        resolver,
        cpu,
        lost_samples: lost.get("samples").copied().unwrap_or(0),
        lost,
        lost_marks,
        duration_ns,
        has_heap,
        has_switches,
        has_samples,
        window,
        timeline_events,
        data_maps,
        off_cpu_events,
    })
}

impl Loaded {
    /// What the off-CPU and `--event` analyses read (see [`crate::analysis::Input`]).
    pub fn input(&self) -> crate::analysis::Input<'_> {
        crate::analysis::Input {
            recording: &self.recording,
            arch: self.arch,
            processes: &self.processes,
            resolver: &self.resolver,
            window: &self.window,
            duration_ns: self.duration_ns,
            data_maps: &self.data_maps,
            off_cpu_events: self.off_cpu_events.as_ref(),
        }
    }

    /// The threads' timeline within the window ([`thread_timeline::build_on`]), on `grid`'s
    /// slices when given; from what the metadata pass kept, without reading the file again.
    pub fn timeline(&self, grid: Option<Grid>) -> Option<ThreadTimeline> {
        let recorded = thread_timeline::Recorded {
            processes: &self.processes,
            window: &self.window,
            switches: self.has_switches,
            end: self
                .recording
                .header()
                .start_clock_ns
                .saturating_add(self.duration_ns),
        };
        thread_timeline::build_on(&self.timeline_events, &recorded, grid)
    }

    /// Runs the heap analysis (one more pass over the file, decoded on another thread).
    /// Only the allocations of [`Loaded::window`] count (see [`crate::filter`]).
    pub fn heap(&self, opts: HeapOptions) -> HeapProfile {
        let opts = HeapOptions {
            window: self.window,
            ..opts
        };
        heap::analyze_recording(&self.recording, &self.processes, &self.resolver, opts)
    }

    /// What the outputs need besides a profile, with the [`diagnostics`] of this recording,
    /// of `heap` when the report shows one and of the stacks of `more`, the report's other
    /// profiles by name (`off-cpu`, `event`), and the mappings of the address spaces of the CPU
    /// profile, `heap` and `more`. Call it after the analyses: module load errors are only
    /// known once the modules were used.
    pub fn context_with(
        &self,
        heap: Option<&HeapProfile>,
        more: &[(&'static str, &CpuProfile)],
    ) -> ReportContext {
        let spaces = [&self.cpu]
            .into_iter()
            .chain(more.iter().map(|(_, p)| *p))
            .flat_map(|p| p.stacks.iter().map(|s| s.space))
            .chain(
                heap.into_iter()
                    .flat_map(|h| h.traces.iter().map(|t| t.space)),
            );
        ReportContext {
            mappings: self.processes.mappings_of(spaces),
            ..self.context(heap, more)
        }
    }

    /// [`Loaded::context_with`] without mappings (the reports that print no addresses).
    pub fn context(
        &self,
        heap: Option<&HeapProfile>,
        more: &[(&'static str, &CpuProfile)],
    ) -> ReportContext {
        let modules = self.resolver.modules();
        let other_stacks: Vec<(&'static str, &crate::unwinding::UnwindStats)> =
            more.iter().map(|&(name, p)| (name, &p.unwind)).collect();
        let diagnostics = diagnostics::gather(&Sources {
            bytes_discarded: self.summary.bytes_discarded,
            lost: &self.lost,
            modules: &modules,
            vdso_error: self.resolver.vdso_error(),
            unwind: &self.cpu.unwind,
            other_stacks: &other_stacks,
            unwind_errors: &self.cpu.unwind_errors,
            unmapped_frames: self.cpu.unmapped_frames,
            jit: &self.processes.jit.stats,
            heap,
        });
        ReportContext {
            path: self.recording.path().to_path_buf(),
            header: self.recording.header().clone(),
            summary: self.summary.clone(),
            duration_ns: self.duration_ns,
            lost_samples: self.lost_samples,
            modules: modules
                .into_iter()
                .map(|m| ModuleRow {
                    path: m.key.path,
                    build_id: m.key.build_id,
                    debug_file: m.located.debug_file,
                    match_kind: m.located.match_kind,
                    origin: m.located.origin,
                    image: m.located.image,
                    image_origin: m.located.image_origin,
                    addresses: m.addresses,
                })
                .collect(),
            names: self.processes.final_names(),
            lost_marks: self.lost_marks.clone(),
            mappings: Mappings::default(),
            diagnostics,
            window: self.window,
        }
    }
}
