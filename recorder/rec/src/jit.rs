//! Carrying JIT symbol files into the recording: each recorded process's `/tmp/perf-PID.map`
//! (written by Node's `--perf-basic-prof`, Java agents, Python 3.12's `-X perf`, LuaJIT) and
//! its `jit-PID.dump` files (Node's `--perf-prof`, Java's perf agent, anything following perf's
//! jitdump specification) are read when the process exits, or when the recording ends for those
//! still running, and written as [`JitMap`] records. The host never sees the board's files.
//!
//! A jitdump is found the way perf finds it: the runtime maps the dump file executable once (a
//! "marker" mapping), so the kernel reports a mapping of a file named `jit-PID.dump`, wherever
//! it lies. rec does not parse the dump (that is hostside's work); it copies it in pieces of
//! [`CHUNK_BYTES`], so neither the board nor the reader holds a large file at once.
//!
//! Frugal by design: one read per file, only of a file that exists, each perf map bounded by
//! [`MAX_MAP_BYTES`] and all maps together by [`MAX_TOTAL_BYTES`]; each jitdump by
//! [`MAX_DUMP_BYTES`] and all dumps together by [`MAX_DUMP_TOTAL_BYTES`] (the board's disk and the
//! recording's size matter more than the last names of a runaway file). What a bound cut is
//! said in the record (`truncated`, and `file_size` against the bytes carried).

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Read;

use crossprof_format::{is_jitdump, JitMap, Record};

/// The most bytes kept of one process's perf map.
pub const MAX_MAP_BYTES: u64 = 16 << 20;
/// The most bytes of perf maps one recording carries.
pub const MAX_TOTAL_BYTES: u64 = 64 << 20;
/// The most bytes kept of one jitdump file (a dump holds the generated code too: Node writes
/// about 2 MiB for a short script).
pub const MAX_DUMP_BYTES: u64 = 64 << 20;
/// The most bytes of jitdumps one recording carries.
pub const MAX_DUMP_TOTAL_BYTES: u64 = 256 << 20;
/// A jitdump travels in pieces of this size.
pub const CHUNK_BYTES: usize = 1 << 20;
/// At most this many jitdump files are remembered per process (a process maps one; more is a
/// runtime that restarts its dump, or noise).
const MAX_DUMPS_PER_PROCESS: usize = 8;

/// At most this many processes are remembered as seen, and as taken (a u32 each): `rec -a`
/// on a board that forks all day must not grow without bound. Past it, new processes' JIT
/// files are not carried, and the list of taken ones starts over (a late record of a long
/// gone process may then carry its file twice).
const MAX_PROCESSES: usize = 32768;

/// The processes seen, their jitdump files, and whose files were taken.
#[derive(Default)]
pub struct JitMaps {
    seen: HashSet<u32>,
    taken: HashSet<u32>,
    dumps: HashMap<u32, Vec<String>>,
    bytes: u64,
    dump_bytes: u64,
}

impl JitMaps {
    /// Remembers a process the recording saw (a fork, an exec, a mapping or a sample).
    pub fn note(&mut self, pid: u32) {
        let room = self.seen.len() < MAX_PROCESSES || self.seen.contains(&pid);
        if pid != 0 && room && !self.taken.contains(&pid) {
            self.seen.insert(pid);
        }
    }

    /// Remembers a process and, when `path` is a jitdump's marker mapping, its dump file.
    pub fn note_mmap(&mut self, pid: u32, path: &str) {
        self.note(pid);
        if self.seen.contains(&pid) && is_jitdump(path) {
            let files = self.dumps.entry(pid).or_default();
            if files.len() < MAX_DUMPS_PER_PROCESS && !files.iter().any(|f| f == path) {
                files.push(path.to_string());
            }
        }
    }

    /// The JIT files of `pid`, which just exited, read lazily piece by piece as the caller
    /// iterates (at most [`CHUNK_BYTES`] in memory at once).
    pub fn take(&mut self, pid: u32, time: u64) -> Taken {
        let mut taken = Taken::default();
        if self.taken.len() >= MAX_PROCESSES {
            self.taken.clear();
        }
        if !self.seen.remove(&pid) || !self.taken.insert(pid) {
            return taken;
        }
        let budget = MAX_TOTAL_BYTES
            .saturating_sub(self.bytes)
            .min(MAX_MAP_BYTES);
        if let Some(map) = read_perf_map(pid, time, budget) {
            self.bytes += map.data.len() as u64;
            taken.maps.push(map);
        }
        for path in self.dumps.remove(&pid).unwrap_or_default() {
            let Ok(file) = File::open(&path) else {
                continue;
            };
            let size = match file.metadata() {
                Ok(m) if m.is_file() => m.len(),
                _ => continue,
            };
            // The budget is set aside now, so the pieces can be read later without `self`.
            let budget = MAX_DUMP_TOTAL_BYTES
                .saturating_sub(self.dump_bytes)
                .min(MAX_DUMP_BYTES);
            let keep = size.min(budget);
            self.dump_bytes += keep;
            taken.dumps.push(Dump {
                file,
                path,
                pid,
                time,
                size,
                keep,
                offset: 0,
                started: false,
            });
        }
        taken.dumps.reverse();
        taken
    }

    /// The JIT files of every process still running when the recording ends.
    pub fn take_all(&mut self, time: u64) -> impl Iterator<Item = Record> {
        let mut pids: Vec<u32> = self.seen.iter().copied().collect();
        pids.sort_unstable();
        let all: Vec<Taken> = pids.into_iter().map(|p| self.take(p, time)).collect();
        all.into_iter().flatten()
    }
}

fn read_perf_map(pid: u32, time: u64, budget: u64) -> Option<JitMap> {
    let path = format!("/tmp/perf-{pid}.map");
    let file = File::open(&path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut data = Vec::new();
    file.take(budget + 1).read_to_end(&mut data).ok()?;
    let truncated = data.len() as u64 > budget;
    data.truncate(budget as usize);
    Some(JitMap {
        time,
        pid,
        kind: "perf-map".into(),
        truncated,
        data,
        path: String::new(),
        offset: 0,
        file_size: 0,
    })
}

/// One process's JIT files, as records: the perf map first, then each jitdump in pieces.
#[derive(Default)]
pub struct Taken {
    maps: Vec<JitMap>,
    /// In reverse order, so the next is popped from the end.
    dumps: Vec<Dump>,
}

/// A jitdump being copied.
struct Dump {
    file: File,
    path: String,
    pid: u32,
    time: u64,
    /// The file's size when it was opened.
    size: u64,
    /// How many bytes of it the bounds allow.
    keep: u64,
    /// Bytes copied so far.
    offset: u64,
    /// Whether a piece was written (an empty dump still gets one record).
    started: bool,
}

impl Dump {
    /// The next piece, or `None` when the file (or its allowance) is used up.
    fn next_piece(&mut self) -> Option<JitMap> {
        let want = (self.keep - self.offset).min(CHUNK_BYTES as u64);
        if want == 0 && self.started {
            return None;
        }
        let mut data = Vec::with_capacity(want as usize);
        // A read error or a file that shrank ends the copy where it is.
        let got = (&mut self.file)
            .take(want)
            .read_to_end(&mut data)
            .unwrap_or(0) as u64;
        if got == 0 && self.started {
            return None;
        }
        self.started = true;
        let offset = self.offset;
        self.offset += got;
        let last = got < want || self.offset >= self.keep;
        Some(JitMap {
            time: self.time,
            pid: self.pid,
            kind: "jitdump".into(),
            truncated: last && self.offset < self.size,
            data,
            path: self.path.clone(),
            offset,
            file_size: self.size,
        })
    }
}

impl Iterator for Taken {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        if let Some(m) = self.maps.pop() {
            return Some(Record::JitMap(m));
        }
        while let Some(d) = self.dumps.last_mut() {
            if let Some(piece) = d.next_piece() {
                return Some(Record::JitMap(piece));
            }
            self.dumps.pop();
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn maps(t: Taken) -> Vec<JitMap> {
        t.map(|r| match r {
            Record::JitMap(j) => j,
            other => panic!("{other:?}"),
        })
        .collect()
    }

    #[test]
    fn each_map_is_taken_once_and_only_for_seen_processes() {
        let pid = std::process::id();
        let path = format!("/tmp/perf-{pid}.map");
        std::fs::write(&path, "1000 10 jit_a\n").unwrap();
        let mut m = JitMaps::default();
        assert!(maps(m.take(pid, 1)).is_empty(), "never seen");
        m.note(pid);
        let got = maps(m.take(pid, 2));
        assert_eq!(got.len(), 1);
        let j = &got[0];
        assert_eq!(
            (j.pid, j.truncated, j.data.as_slice()),
            (pid, false, &b"1000 10 jit_a\n"[..])
        );
        m.note(pid);
        assert!(maps(m.take(pid, 3)).is_empty(), "taken once");
        assert_eq!(m.take_all(4).count(), 0);
        std::fs::remove_file(&path).unwrap();
    }

    /// A fresh scratch directory for one test.
    fn scratch(name: &str) -> std::path::PathBuf {
        let d =
            std::env::temp_dir().join(format!("crossprof-rec-jit-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn jitdump_names() {
        assert!(is_jitdump("/home/u/jit-1234.dump"));
        assert!(is_jitdump("jit-1.dump"));
        assert!(!is_jitdump("/home/u/jit-.dump"));
        assert!(!is_jitdump("/home/u/jit-12a.dump"));
        assert!(!is_jitdump("/home/u/xjit-12.dump"));
        assert!(!is_jitdump("/home/u/jit-12.dump.so"));
    }

    #[test]
    fn a_dump_comes_in_pieces_that_add_up_to_the_file() {
        let dir = scratch("pieces");
        let path = dir.join("jit-4242.dump");
        let data: Vec<u8> = (0..CHUNK_BYTES * 2 + 5).map(|i| i as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let path = path.to_str().unwrap().to_string();
        let mut m = JitMaps::default();
        m.note_mmap(4242, "/usr/lib/libc.so.6");
        m.note_mmap(4242, &path);
        m.note_mmap(4242, &path);
        let pieces: Vec<JitMap> = m
            .take_all(7)
            .map(|r| match r {
                Record::JitMap(j) => j,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(pieces.len(), 3);
        let mut joined = Vec::new();
        for p in &pieces {
            assert_eq!(
                (p.kind.as_str(), p.pid, p.offset, p.file_size, p.truncated),
                (
                    "jitdump",
                    4242,
                    joined.len() as u64,
                    data.len() as u64,
                    false
                )
            );
            assert_eq!(p.path, path);
            joined.extend_from_slice(&p.data);
        }
        assert_eq!(joined, data);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_bound_cuts_a_dump_and_says_so() {
        let dir = scratch("bound");
        let path = dir.join("jit-5.dump");
        std::fs::write(&path, vec![1u8; 100]).unwrap();
        let mut m = JitMaps {
            dump_bytes: MAX_DUMP_TOTAL_BYTES - 60,
            ..JitMaps::default()
        };
        m.note_mmap(5, path.to_str().unwrap());
        let pieces = maps(m.take(5, 1));
        assert_eq!(pieces.len(), 1);
        assert_eq!(
            (
                pieces[0].data.len(),
                pieces[0].truncated,
                pieces[0].file_size
            ),
            (60, true, 100)
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
