//! Each thread's system call entries paired with their exits, in time order.
//!
//! The kernel's per-CPU rings are drained one after another, so a thread that entered a call
//! on one CPU and left it on another can have its exit before its entry in the file: events
//! are kept per thread and sorted by time before they are paired. An exit belongs to the
//! latest entry of its thread before it; an entry followed by the thread's next entry, or by
//! the end of the recording, without an exit is *unfinished* (its exit was lost, the call
//! never returns, like `exit_group`, or it was still blocked when the recording stopped); an
//! exit with no open entry is *unpaired* (its entry was lost, or made before the recording
//! started).

use std::collections::HashMap;

/// What a recorded event says about a thread's system calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `raw_syscalls:sys_enter`: its value is the call's number.
    Enter,
    /// `raw_syscalls:sys_exit`: its value is the return value.
    Exit,
}

/// One entry or exit of a thread: 24 bytes.
#[derive(Debug, Clone, Copy)]
struct Event {
    time: u64,
    value: u64,
    pid: u32,
    kind: Kind,
}

/// Every thread's entries and exits as a pass over the file met them, keyed by thread id:
/// 24 bytes an event.
#[derive(Debug, Clone, Default)]
pub struct Threads {
    by_tid: HashMap<u32, Vec<Event>>,
}

/// A call's exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// From the entry to the exit, nanoseconds.
    pub ns: u64,
    /// The return value, sign-extended: -4095..=-1 are errors (minus the errno).
    pub ret: i64,
}

/// One system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// Process id of the caller.
    pub pid: u32,
    /// The calling thread.
    pub tid: u32,
    /// When it was entered (board clock, ns): with `tid`, names its `sys_enter` sample.
    pub entry: u64,
    /// The call's number on the recording's architecture, sign-extended (`syscall(-1)` is -1).
    pub nr: i64,
    /// Its exit, `None` when unfinished.
    pub exit: Option<Exit>,
}

/// The calls of a recording, paired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Paired {
    /// Every call kept, by thread and entry time (see [`Paired::find`]).
    pub calls: Vec<Call>,
    /// Exits kept that had no entry to close.
    pub unpaired_exits: u64,
}

impl Paired {
    /// The call thread `tid` entered at `time`, if it was kept.
    pub fn find(&self, tid: u32, time: u64) -> Option<&Call> {
        let i = self
            .calls
            .binary_search_by(|c| (c.tid, c.entry).cmp(&(tid, time)))
            .ok()?;
        self.calls.get(i)
    }
}

/// A value the board wrote as a signed `long`: on a 32-bit board only its low 32 bits are
/// meaningful, whether or not the recorder sign-extended them.
pub fn signed(value: u64, word32: bool) -> i64 {
    if word32 {
        i64::from(value as u32 as i32)
    } else {
        value as i64
    }
}

impl Threads {
    /// Keeps thread `tid` (of process `pid`) entering call number `nr` at `time`.
    pub fn enter(&mut self, pid: u32, tid: u32, time: u64, nr: u64) {
        self.push(tid, pid, time, nr, Kind::Enter);
    }

    /// Keeps thread `tid` (of process `pid`) leaving its call at `time` with `ret`.
    pub fn exit(&mut self, pid: u32, tid: u32, time: u64, ret: u64) {
        self.push(tid, pid, time, ret, Kind::Exit);
    }

    fn push(&mut self, tid: u32, pid: u32, time: u64, value: u64, kind: Kind) {
        self.by_tid.entry(tid).or_default().push(Event {
            time,
            value,
            pid,
            kind,
        });
    }

    /// Pairs every thread's events: calls whose entry `keep` selects (time, pid, tid), and
    /// the exits it selects that had no entry. `word32` reads numbers and return values as a
    /// 32-bit board's `long` (see [`signed`]).
    pub fn pair(self, keep: impl Fn(u64, u32, u32) -> bool, word32: bool) -> Paired {
        let mut paired = Paired::default();
        for (tid, mut events) in self.by_tid {
            // Stable: events of one thread at the same nanosecond keep the file's order,
            // which is the order one CPU's ring saw them in.
            events.sort_by_key(|e| e.time);
            let mut open: Option<Call> = None;
            for e in events {
                match e.kind {
                    Kind::Enter => {
                        paired
                            .calls
                            .extend(open.take().filter(|c| keep(c.entry, c.pid, tid)));
                        open = Some(Call {
                            pid: e.pid,
                            tid,
                            entry: e.time,
                            nr: signed(e.value, word32),
                            exit: None,
                        });
                    }
                    Kind::Exit => match open.take() {
                        Some(mut c) => {
                            c.exit = Some(Exit {
                                ns: e.time.saturating_sub(c.entry),
                                ret: signed(e.value, word32),
                            });
                            if keep(c.entry, c.pid, tid) {
                                paired.calls.push(c);
                            }
                        }
                        None if keep(e.time, e.pid, tid) => paired.unpaired_exits += 1,
                        None => {}
                    },
                }
            }
            paired
                .calls
                .extend(open.filter(|c| keep(c.entry, c.pid, tid)));
        }
        paired
            .calls
            .sort_unstable_by_key(|c| (c.tid, c.entry, c.pid));
        paired
    }
}
