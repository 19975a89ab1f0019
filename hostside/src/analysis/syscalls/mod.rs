//! System calls (`report --syscalls`, recordings made with `rec -e syscalls`): how many calls
//! of each kind, how many failed and with which errno, how long they took, and from which
//! stacks they were made.
//!
//! `rec -e syscalls` samples the `raw_syscalls:sys_enter` tracepoint (the call's number in
//! the sample's `addr`, the calling thread's stack) and `raw_syscalls:sys_exit` (the return
//! value in `addr`, no stack). The metadata pass keeps every entry and exit per thread
//! ([`SyscallEvents::observe`], 24 bytes an event); before the pass over the stacks they are
//! paired ([`pairing`]) into calls (48 bytes a call), so that this pass hands
//! [`SyscallBuilder::stacks`] each kept entry once, weighted by the call's time, and the
//! stacks are symbolized like CPU samples. The stacks are then found again by thread and
//! entry time (which name one record of the file) and the calls summed ([`stats`]).
//!
//! Choices, said here once:
//! - A call belongs to the `--from/--to/--pid/--tid` window when its entry does, and counts
//!   its whole time even when its exit lies past the window's end.
//! - An unfinished call (no exit recorded: lost, a call that never returns like
//!   `exit_group`, or still blocked when the recording stopped) is counted, but its time is
//!   unknown and left out of every time and of the flame graph's weight, rather than charged
//!   up to the recording's end, which would make a thread that waited in `read` at the end
//!   look like it spent the whole recording there.
//! - An exit with no entry (entry lost) is only counted, in [`Syscalls::unpaired_exits`].

pub mod names;
pub mod pairing;
pub mod stats;
#[cfg(test)]
mod tests;

use crossprof_format::{Arch, Record, Sample};

use crate::analysis::cpu::{Accumulator, CpuProfile};
use crate::analysis::wakers;
use crate::filter::Window;
use crate::frames::FrameId;
use crate::processes::Processes;
use crate::resolve::Resolver;
use crate::unwinding::StackUnwinder;

use self::pairing::{Paired, Threads};
pub use self::stats::{CallStack, SyscallStats, ThreadStats};

/// The header's name of the event sampled at each system call's entry.
pub const ENTER_EVENT: &str = "raw_syscalls:sys_enter";
/// The header's name of the event sampled at each system call's exit.
pub const EXIT_EVENT: &str = "raw_syscalls:sys_exit";

/// The system call analysis of a recording.
pub struct Syscalls {
    /// The entries' stacks, symbolized; each stack's count is nanoseconds in its finished
    /// calls.
    pub profile: CpuProfile,
    /// Per system call, most time first.
    pub calls: Vec<SyscallStats>,
    /// Per thread, most time first.
    pub threads: Vec<ThreadStats>,
    /// Exits with no entry to close (entries lost, or made before the recording started).
    pub unpaired_exits: u64,
    /// Whether the recording has exits at all (`raw_syscalls:sys_exit` in its header):
    /// without them every call is unfinished.
    pub exits_recorded: bool,
}

impl Syscalls {
    /// The profile with the name its stack diagnostics carry (see
    /// `Loaded::context`, which lists each profile's stack diagnostics).
    pub fn named(&self) -> (&'static str, &CpuProfile) {
        ("syscalls", &self.profile)
    }

    /// Every call, errors, finished time and unfinished calls summed over all names.
    pub fn totals(&self) -> (u64, u64, u64, u64) {
        self.calls.iter().fold((0, 0, 0, 0), |t, c| {
            (
                t.0 + c.count,
                t.1 + c.errors,
                t.2.saturating_add(c.total_ns),
                t.3 + c.unfinished,
            )
        })
    }

    /// The user frames of a profile stack, innermost first: where the program made the call.
    /// The kernel's part (the tracepoint and the system call entry path, the same for every
    /// call) is left out.
    pub fn user_frames(&self, stack: Option<u32>) -> &[FrameId] {
        stack
            .and_then(|i| self.profile.stacks.get(i as usize))
            .map_or(&[], |s| s.user_frames())
    }
}

/// The indices of the entry and exit events in a recording's `events`.
fn event_indices(header: &crossprof_format::Header) -> Option<(u32, Option<u32>)> {
    let index = |name: &str| header.events.iter().position(|e| e == name);
    let enter = index(ENTER_EVENT)?;
    Some((enter as u32, index(EXIT_EVENT).map(|i| i as u32)))
}

/// Whether a recording with `header` sampled system call entries.
pub fn recorded(header: &crossprof_format::Header) -> bool {
    event_indices(header).is_some()
}

/// The sample of `r` and its event index (0 for the main event), if it is a sample.
fn sample_of(r: &Record) -> Option<(u32, &Sample)> {
    match r {
        Record::Sample(s) => Some((0, s)),
        Record::EventSample(e) => Some((e.event, &e.sample)),
        _ => None,
    }
}

/// What the system call analysis reads of the recording besides the stacks: each thread's
/// entries and exits, kept as the metadata pass goes by ([`SyscallEvents::observe`]) so that
/// the file is not read again for them. 24 bytes an event.
#[derive(Debug, Clone)]
pub struct SyscallEvents {
    enter: u32,
    exit: Option<u32>,
    threads: Threads,
}

impl SyscallEvents {
    /// Empty, for a recording with `header`; `None` when it did not sample system calls.
    pub fn new(header: &crossprof_format::Header) -> Option<SyscallEvents> {
        let (enter, exit) = event_indices(header)?;
        Some(SyscallEvents {
            enter,
            exit,
            threads: Threads::default(),
        })
    }

    /// Keeps `r` when it is a system call's entry or exit.
    pub fn observe(&mut self, r: &Record) {
        let Some((event, s)) = sample_of(r) else {
            return;
        };
        if event == self.enter {
            self.threads.enter(s.pid, s.tid, s.time, s.addr);
        } else if Some(event) == self.exit {
            self.threads.exit(s.pid, s.tid, s.time, s.addr);
        }
    }
}

/// The system call analysis while the pass over the stacks runs: made from the metadata
/// pass's [`SyscallEvents`], paired, so that it knows which entry samples to take and with
/// what weight ([`SyscallBuilder::weight`]); the pass pushes those into
/// [`SyscallBuilder::stacks`].
pub struct SyscallBuilder {
    arch: Arch,
    enter: u32,
    exits_recorded: bool,
    paired: Paired,
    /// The entries' stacks, weighted by their calls' time.
    pub stacks: Accumulator,
}

impl SyscallBuilder {
    /// Pairs `events` of a recording made on `arch`, keeping the calls whose entry lies in
    /// `window` (and the unpaired exits that do).
    pub fn new(events: SyscallEvents, arch: Arch, window: &Window) -> SyscallBuilder {
        let word32 = arch.pointer_size() == 4;
        let paired = events
            .threads
            .pair(|time, pid, tid| window.keeps(time, pid, tid), word32);
        SyscallBuilder {
            arch,
            enter: events.enter,
            exits_recorded: events.exit.is_some(),
            paired,
            stacks: Accumulator::new(true),
        }
    }

    /// The nanoseconds charged to `s`, a sample of the main event (`event` `None`) or of the
    /// secondary event `event`, when it is the entry of a kept call (0 for an unfinished
    /// one, whose stack is still counted).
    pub fn weight(&self, s: &Sample, event: Option<u32>) -> Option<u64> {
        if event.unwrap_or(0) != self.enter {
            return None;
        }
        let call = self.paired.find(s.tid, s.time)?;
        Some(call.exit.map_or(0, |e| e.ns))
    }

    /// The analysis, once the pass is over.
    pub fn finish(
        self,
        processes: &Processes,
        resolver: &Resolver,
        unwinder: &StackUnwinder<'_>,
    ) -> Syscalls {
        let profile = self.stacks.finish(processes, resolver, unwinder);
        let stack_of = wakers::stacks_by_sample(&profile);
        let calls = &self.paired.calls;
        Syscalls {
            calls: stats::per_call(calls, self.arch, |c| {
                stack_of.get(&(c.tid, c.entry)).copied()
            }),
            threads: stats::per_thread(calls, |tid| processes.name(tid, u64::MAX).to_string()),
            profile,
            unpaired_exits: self.paired.unpaired_exits,
            exits_recorded: self.exits_recorded,
        }
    }
}
