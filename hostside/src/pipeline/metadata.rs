//! The first pass over a recording: who ran, what was mapped and what was lost, without the
//! samples' stack copies or the heap events. What it builds ([`Opened`]) is what the pass
//! over the stacks needs before it starts: address spaces to unwind in, modules located in
//! the sysroot, the user's filter bound to the recording's clock, and the switch and sample
//! times the off-CPU analysis measures waits from.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{bail, Result};
use crossprof_format::{Arch, Record, Summary};
use crossprof_symbols::Lookup;

use crate::analysis::events::DataMaps;
use crate::analysis::heap::HeapBuilder;
use crate::analysis::off_cpu_profile::OffCpuEvents;
use crate::analysis::stack_usage::StackMaps;
use crate::analysis::syscalls::SyscallEvents;
use crate::analysis::thread_timeline::TimelineEvents;
use crate::filter::{Filter, Tasks};
use crate::output::context::LostMark;
use crate::pipeline::{Opened, PassStats};
use crate::processes::Processes;
use crate::recording::{KeptStubs, Recording};
use crate::resolve::Resolver;

/// Runs the metadata pass over `recording`. The architecture is read from the header first,
/// and an unknown one is an error that says so instead of guessing; a filter that does not
/// fit the recording (see [`Filter::bind`]) is an error that says why. After that nothing
/// fails: a damaged recording yields what its intact frames hold.
pub fn open(recording: Recording, lookup: &Lookup, filter: &Filter) -> Result<Opened> {
    let Some(arch) = Arch::from_name(&recording.header().arch) else {
        bail!(
            "{}: unknown target architecture {:?}",
            recording.path().display(),
            recording.header().arch
        );
    };
    let started = Instant::now();
    let mut last_time = 0u64;
    let mut lost: BTreeMap<String, u64> = BTreeMap::new();
    let mut lost_marks = Vec::new();
    let mut end_time = None;
    let mut has_heap = false;
    let mut has_switches = false;
    let mut has_samples = false;
    let mut samples = 0u64;
    let mut summary = Summary::default();
    let mut tasks = Tasks::default();
    let mut timeline_events = TimelineEvents::default();
    let mut data_maps = DataMaps::default();
    let mut stack_maps = StackMaps::default();
    let mut heap_metadata = Vec::new();
    let mut off_cpu_events =
        (!recording.header().off_cpu.is_empty()).then(|| OffCpuEvents::new(recording.header(), 0));
    let mut syscall_events = SyscallEvents::new(recording.header());
    let mut stubs = KeptStubs::default();
    let mut thread_states = Vec::new();
    let processes = Processes::build(&mut |f| {
        (summary, stubs) = recording.for_each_metadata_keeping_stubs(|r| {
            timeline_events.observe(&r);
            data_maps.observe(&r);
            stack_maps.observe(&r);
            if let Some(e) = off_cpu_events.as_mut() {
                e.observe(&r);
            }
            if let Some(e) = syscall_events.as_mut() {
                e.observe(&r);
            }
            if HeapBuilder::reads_metadata(&r) {
                heap_metadata.push(r.clone());
            }
            match &r {
                Record::Lost(l) => {
                    l.tally(&mut lost);
                    if l.kind == "samples" {
                        LostMark::push(&mut lost_marks, l.time, l.count);
                    }
                }
                Record::End(e) => end_time = Some(e.time),
                Record::EventSample(_) => samples += 1,
                Record::Sample(s) => {
                    has_samples = true;
                    samples += 1;
                    last_time = last_time.max(s.time);
                    tasks.add(s.pid, s.tid);
                }
                Record::Comm(c) => tasks.add(c.pid, c.tid),
                Record::ThreadState(t) => {
                    tasks.add(t.pid, t.tid);
                    thread_states.push(t.clone());
                }
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
    stack_maps.finish();
    let start = recording.header().start_clock_ns;
    let duration_ns = end_time.unwrap_or(last_time).saturating_sub(start);
    let window = filter.bind(
        &recording.path().display().to_string(),
        start,
        duration_ns,
        &tasks,
    )?;
    let resolver = Resolver::new(&processes, lookup);
    let passes = vec![PassStats {
        what: "metadata",
        frames: summary.frames,
        seconds: started.elapsed().as_secs_f64(),
    }];
    Ok(Opened {
        recording,
        arch,
        summary,
        processes,
        resolver,
        lost_samples: lost.get("samples").copied().unwrap_or(0),
        lost,
        lost_marks,
        duration_ns,
        has_heap,
        has_switches,
        has_samples,
        samples,
        window,
        timeline_events,
        data_maps,
        stack_maps,
        off_cpu_events,
        has_syscalls: syscall_events.is_some(),
        syscall_events,
        heap_metadata,
        thread_states,
        stubs,
        passes,
    })
}
