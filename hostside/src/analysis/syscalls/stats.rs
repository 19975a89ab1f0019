//! The paired calls summed up: per system call (count, errors and their errnos, time, the
//! calling stacks) and per thread.
//!
//! Times are those of finished calls: an unfinished call (no exit recorded) is counted in
//! `count` and `unfinished` but adds nothing to `total_ns` or `max_ns`, since how long it
//! lasted is unknown (see [`crate::analysis::syscalls`]).

use std::collections::HashMap;

use crossprof_format::Arch;

use super::names;
use super::pairing::Call;

/// One calling stack of a system call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallStack {
    /// The callers' process.
    pub pid: u32,
    /// Index into the profile's stacks (see `Syscalls::profile`); `None` when the entry's
    /// sample was not met again in the pass over the stacks (a damaged file).
    pub stack: Option<u32>,
    /// Calls made from it, unfinished ones included.
    pub count: u64,
    /// Time in its finished calls, nanoseconds.
    pub total_ns: u64,
}

/// One system call's statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyscallStats {
    /// Its name on the recording's architecture (`syscall_<nr>` when unknown).
    pub name: String,
    /// Its number on that architecture.
    pub nr: i64,
    /// Calls entered, unfinished ones included.
    pub count: u64,
    /// Calls that returned an error (-4095..=-1).
    pub errors: u64,
    /// The errors by errno, most first.
    pub errnos: Vec<(i32, u64)>,
    /// Time in finished calls, from entry to exit, nanoseconds.
    pub total_ns: u64,
    /// The longest finished call, nanoseconds.
    pub max_ns: u64,
    /// Calls with no exit recorded: their time is unknown and not in `total_ns`.
    pub unfinished: u64,
    /// Its calling stacks, most time first (then most calls).
    pub stacks: Vec<CallStack>,
}

impl SyscallStats {
    /// Mean time of a finished call, nanoseconds (0 when none finished).
    pub fn mean_ns(&self) -> u64 {
        self.total_ns
            .checked_div(self.count.saturating_sub(self.unfinished))
            .unwrap_or(0)
    }
}

/// One thread's system calls, all names together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadStats {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Thread name (the last one seen).
    pub comm: String,
    /// Calls entered.
    pub calls: u64,
    /// Calls that returned an error.
    pub errors: u64,
    /// Time in finished calls, nanoseconds.
    pub total_ns: u64,
    /// Calls with no exit recorded.
    pub unfinished: u64,
}

/// Counts of one group of calls as they are summed.
#[derive(Default)]
struct Sums {
    count: u64,
    errors: u64,
    total_ns: u64,
    max_ns: u64,
    unfinished: u64,
}

impl Sums {
    /// Adds `c`; returns its errno when it failed.
    fn add(&mut self, c: &Call) -> Option<i32> {
        self.count += 1;
        match c.exit {
            None => {
                self.unfinished += 1;
                None
            }
            Some(e) => {
                self.total_ns = self.total_ns.saturating_add(e.ns);
                self.max_ns = self.max_ns.max(e.ns);
                let errno = names::errno_of(e.ret);
                self.errors += u64::from(errno.is_some());
                errno
            }
        }
    }
}

/// Per system call on `arch`, most time first (then most calls, then by name): `stack_of`
/// names the profile stack of a call's entry.
pub fn per_call(
    calls: &[Call],
    arch: Arch,
    stack_of: impl Fn(&Call) -> Option<u32>,
) -> Vec<SyscallStats> {
    type Stacks = HashMap<(u32, Option<u32>), (u64, u64)>;
    let mut by_nr: HashMap<i64, (Sums, HashMap<i32, u64>, Stacks)> = HashMap::new();
    for c in calls {
        let (sums, errnos, stacks) = by_nr.entry(c.nr).or_default();
        if let Some(errno) = sums.add(c) {
            *errnos.entry(errno).or_default() += 1;
        }
        let s = stacks.entry((c.pid, stack_of(c))).or_default();
        s.0 += 1;
        s.1 = s.1.saturating_add(c.exit.map_or(0, |e| e.ns));
    }
    let mut rows: Vec<SyscallStats> = by_nr
        .into_iter()
        .map(|(nr, (sums, errnos, stacks))| {
            let mut errnos: Vec<(i32, u64)> = errnos.into_iter().collect();
            errnos.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let mut stacks: Vec<CallStack> = stacks
                .into_iter()
                .map(|((pid, stack), (count, total_ns))| CallStack {
                    pid,
                    stack,
                    count,
                    total_ns,
                })
                .collect();
            stacks.sort_unstable_by(|a, b| {
                b.total_ns
                    .cmp(&a.total_ns)
                    .then(b.count.cmp(&a.count))
                    .then(a.stack.cmp(&b.stack))
                    .then(a.pid.cmp(&b.pid))
            });
            SyscallStats {
                name: names::syscall_name(arch, nr),
                nr,
                count: sums.count,
                errors: sums.errors,
                errnos,
                total_ns: sums.total_ns,
                max_ns: sums.max_ns,
                unfinished: sums.unfinished,
                stacks,
            }
        })
        .collect();
    rows.sort_unstable_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then(b.count.cmp(&a.count))
            .then_with(|| a.name.cmp(&b.name))
            .then(a.nr.cmp(&b.nr))
    });
    rows
}

/// Per thread, most time first (then most calls, then by ids); `comm` names a thread.
pub fn per_thread(calls: &[Call], comm: impl Fn(u32) -> String) -> Vec<ThreadStats> {
    let mut by_thread: HashMap<(u32, u32), Sums> = HashMap::new();
    for c in calls {
        by_thread.entry((c.pid, c.tid)).or_default().add(c);
    }
    let mut rows: Vec<ThreadStats> = by_thread
        .into_iter()
        .map(|((pid, tid), s)| ThreadStats {
            pid,
            tid,
            comm: comm(tid),
            calls: s.count,
            errors: s.errors,
            total_ns: s.total_ns,
            unfinished: s.unfinished,
        })
        .collect();
    rows.sort_unstable_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then(b.calls.cmp(&a.calls))
            .then(a.pid.cmp(&b.pid))
            .then(a.tid.cmp(&b.tid))
    });
    rows
}
