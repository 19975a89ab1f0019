//! The pass over the stacks: every sample and heap event of the recording, decoded once and
//! handed to each profile the command asked for. A sample several profiles take (a CPU sample
//! that also names a wait, a blocking sample that is also the `--event` asked for, a system
//! call entry that is also the `--event`) is unwound
//! once, by the one [`StackUnwinder`], and each profile counts its copy; heap events go to the
//! heap analysis, decoded on another thread while this one unwinds and counts.

use std::time::Instant;

use crossprof_format::{Item, Record, Sample};
use indicatif::{ProgressBar, ProgressStyle};

use crate::analysis::cpu::{Accumulator, CpuProfile, Unwound};
use crate::analysis::events::{EventBuilder, EventProfile};
use crate::analysis::heap::{HeapBuilder, HeapOptions, HeapProfile};
use crate::analysis::off_cpu_profile::{OffCpuBuilder, OffCpuProfile};
use crate::analysis::stack_usage::{StackUsage, StackUsageBuilder};
use crate::analysis::syscalls::{SyscallBuilder, Syscalls};
use crate::pipeline::{Opened, PassStats};
use crate::recording::KeptStubs;
use crate::unwinding::StackUnwinder;

/// What one pass made.
pub struct Profiles {
    /// The CPU profile, always made.
    pub cpu: CpuProfile,
    /// The off-CPU profile, when a builder was given.
    pub off_cpu: Option<OffCpuProfile>,
    /// The `--event` profile, when a builder was given.
    pub event: Option<EventProfile>,
    /// The heap profile, when options were given.
    pub heap: Option<HeapProfile>,
    /// The system call analysis, when a builder was given.
    pub syscalls: Option<Syscalls>,
    /// Each thread's deepest stack, when a builder was given.
    pub stack_usage: Option<StackUsage>,
    /// The pass itself, when the file was read (a recording with neither samples nor a heap
    /// profile asked for is not).
    pub pass: Option<PassStats>,
}

/// The profiles being built while the records stream past.
struct Consumers<'a> {
    o: &'a Opened,
    progress: ProgressBar,
    unwinder: StackUnwinder<'a>,
    cpu: Accumulator,
    off_cpu: Option<OffCpuBuilder>,
    event: Option<EventBuilder>,
    syscalls: Option<SyscallBuilder>,
    heap: Option<HeapBuilder<'a>>,
    stack_usage: Option<StackUsageBuilder>,
}

/// The profiles besides the CPU one that a pass builds: each made before the pass from
/// what the metadata pass kept, `None` when not asked for (or not recorded).
pub struct Builders {
    /// The off-CPU waits and wakers.
    pub off_cpu: Option<OffCpuBuilder>,
    /// The `--event` profile.
    pub event: Option<EventBuilder>,
    /// The system call analysis.
    pub syscalls: Option<SyscallBuilder>,
    /// The heap analysis's options.
    pub heap: Option<HeapOptions>,
    /// Each thread's deepest stack.
    pub stack_usage: Option<StackUsageBuilder>,
}

impl Consumers<'_> {
    fn item(&mut self, item: Item) {
        match item {
            Item::Other(r) if matches!(*r, Record::Sample(_) | Record::EventSample(_)) => {
                match *r {
                    Record::Sample(s) => self.sample(s, None),
                    Record::EventSample(e) => self.sample(e.sample, Some(e.event)),
                    _ => {}
                }
            }
            item => {
                if let Some(h) = self.heap.as_mut() {
                    h.item(item);
                }
            }
        }
    }

    /// Hands `s`, a sample of the main event (`event` `None`) or of a secondary one, to every
    /// profile that takes it, unwound once.
    fn sample(&mut self, s: Sample, event: Option<u32>) {
        self.progress.inc(1);
        let in_window = self.o.window.keeps(s.time, s.pid, s.tid);
        let period = s.period;
        let (waits, wakers) = match self.off_cpu.as_mut() {
            Some(b) => {
                let wait = b.wait_weight(&s, event);
                let waker = b.waker_weight(&s, event);
                (
                    wait.map(|ns| (&mut b.waits, ns)),
                    waker.and_then(|ns| Some((b.wakers.as_mut()?, ns))),
                )
            }
            None => (None, None),
        };
        let chosen = self
            .event
            .as_mut()
            .filter(|_| in_window)
            .and_then(|e| e.take(&s, event).then_some((&mut e.stacks, period)));
        let call = self
            .syscalls
            .as_mut()
            .and_then(|b| Some((b.weight(&s, event)?, &mut b.stacks)))
            .map(|(ns, acc)| (acc, ns));
        let cpu = (event.is_none() && in_window).then_some((&mut self.cpu, period));
        // Any sample with a stack pointer, of any event; its stack is unwound for this only
        // when it is its thread's deepest so far.
        let deeper = match self.stack_usage.as_mut() {
            Some(b) if in_window => b.measure(&s, &self.o.processes),
            _ => None,
        };
        // No allocation per sample: at most five takers, the last one gets the stack itself.
        let mut takers = [cpu, waits, wakers, chosen, call];
        let last = takers.iter().rposition(Option::is_some);
        if last.is_none() && deeper.is_none() {
            return;
        }
        let u = Unwound::of(s, &self.o.processes, &mut self.unwinder);
        if let (Some(d), Some(b)) = (deeper, self.stack_usage.as_mut()) {
            b.keep(d, u.clone());
        }
        let Some(last) = last else {
            return;
        };
        for (acc, p) in takers[..last].iter_mut().filter_map(Option::take) {
            acc.push(u.clone(), p);
        }
        if let Some((acc, p)) = takers[last].take() {
            acc.push(u, p);
        }
    }
}

/// Reads the recording once for the profiles of `builders` (the heap's when its options are
/// given), and always the CPU profile. Debug info loads on another core meanwhile.
pub fn run(o: &Opened, stubs: KeptStubs, builders: Builders) -> Profiles {
    let Builders {
        off_cpu,
        event,
        syscalls,
        heap,
        stack_usage,
    } = builders;
    let (processes, resolver) = (&o.processes, &o.resolver);
    let header = o.recording.header();
    let mut c = Consumers {
        o,
        progress: progress(o.samples),
        unwinder: StackUnwinder::new(processes, resolver, o.arch, header.big_endian),
        cpu: Accumulator::new(false),
        off_cpu,
        event,
        syscalls,
        stack_usage,
        heap: heap.map(|opts| {
            let opts = HeapOptions {
                window: o.window,
                sample_mean: header.heap_sample_bytes,
                page_size: u64::from(header.page_size),
                sparse_arm: (header.heap_stacks == crossprof_format::HEAP_STACKS_ARM_SPARSE)
                    .then_some(header.big_endian),
                ..opts
            };
            let mut h = HeapBuilder::new(processes, resolver, header.start_clock_ns, opts);
            for r in &o.heap_metadata {
                h.item(Item::Other(Box::new(r.clone())));
            }
            h
        }),
    };
    let stacks = o.has_samples
        || c.off_cpu.is_some()
        || c.event.is_some()
        || c.syscalls.is_some()
        || c.stack_usage.is_some();
    let with_heap = c.heap.is_some();
    let started = Instant::now();
    // Without samples, modules load as the heap analysis first needs them: those that hold
    // no allocation site are never read.
    let summary = std::thread::scope(|scope| {
        if o.has_samples {
            scope.spawn(|| resolver.preload());
        }
        if with_heap {
            // Heap events are many and cheap to count: decoding them is half the work.
            Some(
                o.recording
                    .for_each_bulk_in_background(stubs, |i| c.item(i)),
            )
        } else if stacks {
            Some(o.recording.for_each_bulk(stubs, false, |i| c.item(i)))
        } else {
            None
        }
    });
    c.progress.finish_and_clear();
    let pass = summary.map(|s| PassStats {
        what: if with_heap {
            "samples and heap events"
        } else {
            "samples"
        },
        frames: s.frames,
        seconds: started.elapsed().as_secs_f64(),
    });
    let Consumers {
        mut unwinder,
        cpu,
        off_cpu,
        event,
        syscalls,
        heap,
        stack_usage,
        ..
    } = c;
    Profiles {
        cpu: cpu.finish(processes, resolver, &unwinder),
        off_cpu: off_cpu.map(|b| b.finish(processes, resolver, &mut unwinder)),
        event: event.map(|b| b.finish(processes, resolver, &unwinder)),
        heap: heap.map(HeapBuilder::finish),
        syscalls: syscalls.map(|b| b.finish(processes, resolver, &unwinder)),
        stack_usage: stack_usage.map(|b| b.finish(processes, resolver, &unwinder)),
        pass,
    }
}

/// A progress bar over the `samples` of the pass, on a terminal and for long passes only
/// (unwinding takes about 10 µs a sample: 50,000 are half a second).
fn progress(samples: u64) -> ProgressBar {
    if samples < 50_000 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(samples);
    if let Ok(style) =
        ProgressStyle::with_template("unwinding {bar:40} {pos}/{len} samples ({eta})")
    {
        bar.set_style(style);
    }
    bar
}
