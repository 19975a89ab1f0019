//! One recording, opened and analysed: the shared first step of `report`, `flamegraph`,
//! `export`, `html`, `annotate` and `diff`. The steps run one way, each using only what the
//! ones before it made, and the file is read twice at most, whatever the command asks for:
//!
//! 1. [`Recording`]: the file, its header and a tolerant reader;
//! 2. `metadata::open`, the first pass ([`open`]): [`Processes`] (tasks, address spaces and the
//!    modules mapped into them), the user's [`Filter`] bound to the recording's clock
//!    ([`Window`]), each module located in the sysroot ([`Resolver`]), and what the off-CPU,
//!    `--event`, system call and thread analyses keep from the metadata: an [`Opened`]
//!    recording, on which a command checks what the file holds before asking for it;
//! 3. [`Opened::analyze`], the second pass (`pass::run`): every sample's stack unwound once
//!    by one [`crate::unwinding::StackUnwinder`] and handed to each profile that takes it
//!    (CPU, off-CPU waits and wakers, one `--event`, system call entries), the heap events
//!    to the heap analysis, then every distinct address resolved once per profile: a
//!    [`Loaded`] recording;
//! 4. [`Loaded::context`]: the small [`ReportContext`] that, with a profile, is all an output
//!    in [`crate::output`] reads.
//!
//! Two passes, not one: a sample's address space must be known before its stack copy is
//! unwound, and `rec` writes each CPU's ring buffer in turn, so a mapping can follow in the
//! file a sample that needs it.

mod metadata;
mod pass;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use crossprof_format::{Arch, Record, Summary};
use crossprof_symbols::Lookup;

use crate::analysis::cpu::CpuProfile;
use crate::analysis::events::{DataMaps, EventBuilder, EventProfile};
use crate::analysis::heap::{HeapOptions, HeapProfile};
use crate::analysis::off_cpu_profile::{OffCpuBuilder, OffCpuEvents, OffCpuProfile};
use crate::analysis::stack_usage::{StackMaps, StackUsage, StackUsageBuilder};
use crate::analysis::syscalls::{SyscallBuilder, SyscallEvents, Syscalls};
use crate::analysis::thread_timeline::{self, Grid, ThreadTimeline, TimelineEvents};
use crate::diagnostics::{self, Sources};
use crate::filter::{Filter, Window};
use crate::output::context::{LostMark, ModuleRow, ReportContext};
use crate::processes::{Mappings, Processes};
use crate::recording::{KeptStubs, Recording};
use crate::resolve::Resolver;

/// One pass over the file: what it was for, how many compressed frames it decoded and how
/// long it took (`hostside --verbose` prints them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PassStats {
    /// What the pass read.
    pub what: &'static str,
    /// Compressed frames decoded.
    pub frames: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// A recording after its metadata pass: what the file holds, before any profile is made.
pub struct Opened {
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
    /// Samples of every event in the file: what the pass over the stacks reads.
    pub samples: u64,
    /// The part of the recording analysed (`--from/--to/--pid/--tid`): the profiles hold only
    /// what it selects.
    pub window: Window,
    /// The threads' lives as the metadata pass saw them, for [`Opened::timeline`].
    pub timeline_events: TimelineEvents,
    /// Every mapping, data ones included, as the metadata pass saw them (for `--event`).
    pub data_maps: DataMaps,
    /// The mappings stacks can live in and the stack limits (for stack usage).
    pub stack_maps: StackMaps,
    /// The switches, sample times and wakeups the off-CPU analysis needs, kept by the
    /// metadata pass when the header says switches were recorded (`rec --off-cpu`).
    pub off_cpu_events: Option<OffCpuEvents>,
    /// Whether the recording sampled system calls (`rec -e syscalls`: a
    /// `raw_syscalls:sys_enter` event in its header).
    pub has_syscalls: bool,
    /// Each thread's system call entries and exits, kept by the metadata pass when the
    /// recording sampled them.
    pub syscall_events: Option<SyscallEvents>,
    /// The records of the metadata the heap analysis reads (see
    /// [`crate::analysis::heap::HeapBuilder::reads_metadata`]), in file order.
    pub heap_metadata: Vec<Record>,
    /// What `rec --snapshot` found each thread doing (empty for other recordings).
    pub thread_states: Vec<crossprof_format::ThreadState>,
    /// The samples' stubs, kept by the metadata pass for the pass over the stacks.
    pub stubs: KeptStubs,
    /// The passes over the file so far.
    pub passes: Vec<PassStats>,
}

/// The profiles a command asks for besides the CPU profile, which is always made.
#[derive(Debug, Clone, Default)]
pub struct Wants {
    /// The off-CPU profile (waits and wakers), when the recording has context switches.
    pub off_cpu: bool,
    /// The profile of the event of this name (`--event`).
    pub event: Option<String>,
    /// The heap profile with these options (an empty one for a recording without heap
    /// events).
    pub heap: Option<HeapOptions>,
    /// The system call analysis, when the recording sampled system calls.
    pub syscalls: bool,
    /// Each thread's deepest stack (an empty analysis for a recording without stack
    /// mappings).
    pub stack_usage: bool,
}

/// A recording with the profiles its command asked for.
pub struct Loaded {
    /// The recording and what its metadata pass found.
    pub opened: Opened,
    /// The CPU profile.
    pub cpu: CpuProfile,
    /// The off-CPU profile, when asked for and recorded.
    pub off_cpu: Option<OffCpuProfile>,
    /// The `--event` profile, when asked for.
    pub event: Option<EventProfile>,
    /// The heap profile, when asked for.
    pub heap: Option<HeapProfile>,
    /// The system call analysis, when asked for and recorded.
    pub syscalls: Option<Syscalls>,
    /// Each thread's deepest stack, when asked for.
    pub stack_usage: Option<StackUsage>,
}

/// Opens `path` and runs its metadata pass, restricted to `filter`'s time window, process and
/// thread; an unknown architecture or a filter that does not fit the recording (see
/// [`Filter::bind`]) is an error that says why.
pub fn open(path: &Path, lookup: &Lookup, filter: &Filter) -> Result<Opened> {
    metadata::open(Recording::open(path)?, lookup, filter)
}

/// [`open`] and [`Opened::analyze`] with `wants`.
pub fn load(path: &Path, lookup: &Lookup, filter: &Filter, wants: Wants) -> Result<Loaded> {
    open(path, lookup, filter)?.analyze(wants)
}

/// [`Opened::analyze`] of an already opened recording, unfiltered (tests, stdin).
pub fn analyze(recording: Recording, lookup: &Lookup, wants: Wants) -> Result<Loaded> {
    metadata::open(recording, lookup, &Filter::default())?.analyze(wants)
}

impl Opened {
    /// Makes the CPU profile and those of `wants` the recording has, in one pass over the
    /// file. An `--event` the recording did not sample is an error that lists those it did.
    pub fn analyze(mut self, wants: Wants) -> Result<Loaded> {
        let header = self.recording.header();
        let event = match &wants.event {
            Some(name) => Some(EventBuilder::new(
                header,
                self.recording.path(),
                name,
                std::mem::take(&mut self.data_maps),
            )?),
            None => None,
        };
        let off_cpu = (wants.off_cpu && self.has_switches).then(|| {
            let events = self.off_cpu_events.take().unwrap_or_else(|| {
                // Kept by the metadata pass when the header says switches were recorded;
                // read them now otherwise (recordings older than that header field).
                let started = std::time::Instant::now();
                let mut e = OffCpuEvents::new(header, self.duration_ns);
                let s = self.recording.for_each_metadata(|r| e.observe(&r));
                self.passes.push(PassStats {
                    what: "switches",
                    frames: s.frames,
                    seconds: started.elapsed().as_secs_f64(),
                });
                e
            });
            OffCpuBuilder::new(events, header, self.duration_ns, &self.window)
        });
        let syscalls = match (wants.syscalls, self.syscall_events.take()) {
            (true, Some(events)) => Some(SyscallBuilder::new(events, self.arch, &self.window)),
            _ => None,
        };
        let stack_usage = wants
            .stack_usage
            .then(|| StackUsageBuilder::new(std::mem::take(&mut self.stack_maps), self.arch));
        let stubs = std::mem::take(&mut self.stubs);
        let builders = pass::Builders {
            off_cpu,
            event,
            syscalls,
            heap: wants.heap,
            stack_usage,
        };
        let profiles = pass::run(&self, stubs, builders);
        self.passes.extend(profiles.pass);
        Ok(Loaded {
            opened: self,
            cpu: profiles.cpu,
            off_cpu: profiles.off_cpu,
            event: profiles.event,
            heap: profiles.heap,
            syscalls: profiles.syscalls,
            stack_usage: profiles.stack_usage,
        })
    }
}

impl Opened {
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
}

impl Loaded {
    /// The profiles made besides the CPU one, each by the name its stack diagnostics carry.
    fn other_profiles(&self) -> Vec<(&'static str, &CpuProfile)> {
        self.off_cpu
            .as_ref()
            .map(OffCpuProfile::named)
            .into_iter()
            .chain(self.event.as_ref().map(EventProfile::named))
            .chain(self.syscalls.as_ref().map(Syscalls::named))
            .collect()
    }

    /// [`Loaded::context`] with the mappings of the address spaces of every profile made:
    /// for the exports that print addresses.
    pub fn context_with_mappings(&self) -> ReportContext {
        let more = self.other_profiles();
        let spaces = [&self.cpu]
            .into_iter()
            .chain(more.iter().map(|(_, p)| *p))
            .flat_map(|p| p.stacks.iter().map(|s| s.space))
            .chain(
                self.heap
                    .iter()
                    .flat_map(|h| h.traces.iter().map(|t| t.space)),
            );
        ReportContext {
            mappings: self.opened.processes.mappings_of(spaces),
            ..self.context()
        }
    }

    /// What the outputs need besides a profile, with the [`diagnostics`] of the recording and
    /// of every profile made. Module load errors are known only once the modules were used,
    /// which the profiles did.
    pub fn context(&self) -> ReportContext {
        let o = &self.opened;
        let modules = o.resolver.modules();
        let other_stacks: Vec<(&'static str, &crate::unwinding::UnwindStats)> = self
            .other_profiles()
            .into_iter()
            .map(|(name, p)| (name, &p.unwind))
            .collect();
        let diagnostics = diagnostics::gather(&Sources {
            bytes_discarded: o.summary.bytes_discarded,
            lost: &o.lost,
            modules: &modules,
            vdso_error: o.resolver.vdso_error(),
            unwind: &self.cpu.unwind,
            other_stacks: &other_stacks,
            unwind_errors: &self.cpu.unwind_errors,
            unmapped_frames: self.cpu.unmapped_frames,
            jit: &o.processes.jit.stats,
            heap: self.heap.as_ref(),
        });
        ReportContext {
            path: o.recording.path().to_path_buf(),
            header: o.recording.header().clone(),
            summary: o.summary.clone(),
            duration_ns: o.duration_ns,
            lost_samples: o.lost_samples,
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
            names: o.processes.final_names(),
            lost_marks: o.lost_marks.clone(),
            mappings: Mappings::default(),
            diagnostics,
            window: o.window,
        }
    }
}
