//! Carrying JIT symbol maps into the recording: each recorded process's `/tmp/perf-PID.map`
//! (written by Node's `--perf-basic-prof`, Java agents, Python 3.12's `-X perf`, LuaJIT) is
//! read when the process exits, or when the recording ends for those still running, and
//! written as a [`JitMap`] record. The host never sees the board's `/tmp`.
//!
//! Frugal by design: one read per process, only of a file that exists, each bounded by
//! [`MAX_MAP_BYTES`] and all together by [`MAX_TOTAL_BYTES`] (the board's disk and the
//! recording's size matter more than the last names of a runaway map).

use std::collections::HashSet;
use std::io::Read;

use crossprof_format::{JitMap, Record};

/// The most bytes kept of one process's map.
pub const MAX_MAP_BYTES: u64 = 16 << 20;
/// The most bytes of maps one recording carries.
pub const MAX_TOTAL_BYTES: u64 = 64 << 20;

/// The processes seen and whose maps were taken.
#[derive(Default)]
pub struct JitMaps {
    seen: HashSet<u32>,
    taken: HashSet<u32>,
    bytes: u64,
}

impl JitMaps {
    /// Remembers a process the recording saw (a fork, an exec, a mapping or a sample).
    pub fn note(&mut self, pid: u32) {
        if pid != 0 && !self.taken.contains(&pid) {
            self.seen.insert(pid);
        }
    }

    /// The map of `pid`, which just exited, if it wrote one.
    pub fn take(&mut self, pid: u32, time: u64) -> Option<Record> {
        if !self.seen.remove(&pid) || !self.taken.insert(pid) {
            return None;
        }
        let budget = MAX_TOTAL_BYTES
            .saturating_sub(self.bytes)
            .min(MAX_MAP_BYTES);
        let path = format!("/tmp/perf-{pid}.map");
        let file = std::fs::File::open(&path).ok()?;
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let mut data = Vec::new();
        file.take(budget + 1).read_to_end(&mut data).ok()?;
        let truncated = data.len() as u64 > budget;
        data.truncate(budget as usize);
        self.bytes += data.len() as u64;
        Some(Record::JitMap(JitMap {
            time,
            pid,
            kind: "perf-map".into(),
            truncated,
            data,
        }))
    }

    /// The maps of every process still running when the recording ends.
    pub fn take_all(&mut self, time: u64) -> Vec<Record> {
        let mut pids: Vec<u32> = self.seen.iter().copied().collect();
        pids.sort_unstable();
        pids.into_iter()
            .filter_map(|p| self.take(p, time))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_map_is_taken_once_and_only_for_seen_processes() {
        let pid = std::process::id();
        let path = format!("/tmp/perf-{pid}.map");
        std::fs::write(&path, "1000 10 jit_a\n").unwrap();
        let mut m = JitMaps::default();
        assert!(m.take(pid, 1).is_none(), "never seen");
        m.note(pid);
        let Some(Record::JitMap(j)) = m.take(pid, 2) else {
            panic!("no map")
        };
        assert_eq!(
            (j.pid, j.truncated, j.data.as_slice()),
            (pid, false, &b"1000 10 jit_a\n"[..])
        );
        m.note(pid);
        assert!(m.take(pid, 3).is_none(), "taken once");
        assert!(m.take_all(4).is_empty());
        std::fs::remove_file(&path).unwrap();
    }
}
