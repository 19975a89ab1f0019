//! `rec -a`: every process on the board. The events watch every task on their CPU (see
//! [`crate::perf::events::for_system`]); this module supplies what the kernel does not say
//! about processes that already ran when the recording started, or whose start it missed:
//!
//! - at start, a snapshot of all of /proc (each process's threads and executable mappings);
//! - afterwards the kernel's FORK, COMM and MMAP2 records (with build-ids where the kernel
//!   gives them) describe new processes, and a process that shows up without them (started
//!   between the scan and the events, or whose records were lost) has its /proc maps read the
//!   first time a record of it arrives.
//!
//! Memory is bounded: at most [`MAX_TRACKED`] processes are remembered (exits forget them);
//! past that, processes are not looked up in /proc, and the recording counts them in a
//! `Lost` record of kind `untracked-process`.

use std::collections::HashSet;

use crossprof_format::{Comm, Record};

use crate::clock::monotonic_ns;
use crate::data_maps::{self, DataMaps};
use crate::heap::Emit;
use crate::procfs;

/// The most processes tracked at once (a u32 each): the default `pid_max` of 32-bit kernels.
pub const MAX_TRACKED: usize = 32768;

/// The processes the recording knows the maps of.
pub struct Tracker {
    known: HashSet<u32>,
    max: usize,
    /// Processes seen while the table was full: their maps were not read.
    pub untracked: u64,
}

impl Default for Tracker {
    fn default() -> Tracker {
        Tracker {
            known: HashSet::new(),
            max: MAX_TRACKED,
            untracked: 0,
        }
    }
}

impl Tracker {
    /// The process `r` shows for the first time and whose maps must be read from /proc, if
    /// any. Forks (the child runs its parent's image, which the host follows) and execs (the
    /// kernel reports the new image's mappings) make a process known without a /proc read;
    /// an exit forgets it.
    pub fn first_seen(&mut self, r: &Record) -> Option<u32> {
        let pid = match r {
            Record::Sample(s) => s.pid,
            Record::EventSample(e) => e.sample.pid,
            Record::Mmap(m) => m.pid,
            Record::Switch(s) => s.pid,
            Record::Comm(c) if c.exec => {
                self.insert(c.pid);
                return None;
            }
            Record::Comm(c) => c.pid,
            Record::Fork(t) => {
                self.insert(t.pid);
                return None;
            }
            Record::Exit(t) if t.pid == t.tid => {
                self.known.remove(&t.pid);
                return None;
            }
            _ => return None,
        };
        // pid 0: the idle task and interrupts, which have no /proc entry.
        if pid == 0 || self.known.contains(&pid) {
            return None;
        }
        self.insert(pid).then_some(pid)
    }

    /// Remembers `pid`; false when the table is full even after forgetting processes that
    /// ended without an exit record (lost, or before the recording).
    fn insert(&mut self, pid: u32) -> bool {
        if self.known.len() >= self.max && !self.known.contains(&pid) {
            self.known.retain(|p| alive(*p));
            if self.known.len() >= self.max {
                self.untracked += 1;
                return false;
            }
        }
        self.known.insert(pid);
        true
    }

    /// The known processes that are still alive (the others are forgotten): those a new
    /// `--max-size` segment describes.
    pub fn live(&mut self) -> Vec<u32> {
        self.known.retain(|p| alive(*p));
        let mut pids: Vec<u32> = self.known.iter().copied().collect();
        pids.sort_unstable();
        pids
    }

    /// Processes known now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.known.len()
    }
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Every process id under /proc, in order.
pub fn all_processes() -> Vec<u32> {
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    pids.sort_unstable();
    pids
}

/// Writes the state of every process on the board and remembers them in `tracker`.
pub fn snapshot_all(out: &mut dyn Emit, tracker: &mut Tracker, data: DataMaps) {
    for pid in all_processes() {
        if tracker.insert(pid) {
            snapshot(out, pid, data);
        }
    }
}

/// Writes the current threads (names) and executable mappings of process `pid`, as the kernel
/// would have reported them had the recording seen it start, and the data mappings `data`
/// keeps (with fault events, whose addresses are told apart by the mapping they fall in: the
/// heap, the stacks, anonymous memory and mapped files; with stack copies the stacks, and the
/// stack limit). A process that is gone writes nothing.
pub fn snapshot(out: &mut dyn Emit, pid: u32, data: DataMaps) {
    let now = monotonic_ns();
    for tid in procfs::threads(pid).unwrap_or_default() {
        out.record(Record::Comm(Comm {
            time: now,
            pid,
            tid,
            comm: procfs::comm(pid, tid),
            exec: false,
        }));
    }
    for m in procfs::maps(pid).unwrap_or_default() {
        let m = m.into_mmap(pid, now);
        if data.keeps(&m, true) {
            out.record(Record::Mmap(m));
        }
    }
    if let Some(limit) = data.wanted().then(|| data_maps::stack_limit(pid)).flatten() {
        out.record(limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossprof_format::{Sample, Task};

    fn sample(pid: u32) -> Record {
        Record::Sample(Sample {
            pid,
            tid: pid,
            ..Default::default()
        })
    }

    fn task(pid: u32, tid: u32) -> Task {
        Task {
            time: 0,
            pid,
            tid,
            ppid: 1,
            ptid: 1,
        }
    }

    #[test]
    fn a_process_is_read_from_proc_once_unless_its_start_was_seen() {
        let mut t = Tracker::default();
        assert_eq!(t.first_seen(&sample(0)), None, "the idle task");
        assert_eq!(t.first_seen(&sample(42)), Some(42));
        assert_eq!(t.first_seen(&sample(42)), None);
        assert_eq!(t.first_seen(&Record::Fork(task(43, 43))), None);
        assert_eq!(
            t.first_seen(&sample(43)),
            None,
            "forked: its parent's image"
        );
        assert_eq!(t.first_seen(&Record::Exit(task(42, 42))), None);
        assert_eq!(t.len(), 1);
        // A thread's exit is not its process's.
        assert_eq!(t.first_seen(&Record::Exit(task(43, 44))), None);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn the_table_is_bounded_and_counts_what_it_could_not_hold() {
        let mut t = Tracker::default();
        // Pids far above any pid_max: none of them is alive, so a full table is pruned.
        let base = 0x7000_0000;
        for i in 0..MAX_TRACKED as u32 {
            t.known.insert(base + i);
        }
        assert_eq!(t.first_seen(&sample(base - 1)), Some(base - 1));
        assert_eq!((t.len(), t.untracked), (1, 0));
        // Full of live processes: a newcomer is counted, not read, and stays unknown.
        let mut t = Tracker {
            max: 2,
            ..Tracker::default()
        };
        assert_eq!(t.first_seen(&sample(1)), Some(1));
        assert_eq!(
            t.first_seen(&sample(std::process::id())),
            Some(std::process::id())
        );
        assert_eq!(t.first_seen(&sample(base)), None);
        assert_eq!(t.first_seen(&Record::Fork(task(base + 1, base + 1))), None);
        assert_eq!((t.len(), t.untracked), (2, 2));
    }

    #[test]
    fn own_process_is_in_the_proc_scan() {
        assert!(all_processes().contains(&std::process::id()));
    }
}
