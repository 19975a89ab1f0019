//! Names for JIT-compiled code from the perf maps (`/tmp/perf-PID.map`) and jitdumps
//! (`jit-PID.dump`) `rec` carried in the recording: addresses in anonymous executable memory,
//! which no module covers, are looked up in their process's JIT symbols, as perf does.
//!
//! A jitdump says when each piece of code was loaded (or moved), so a region a runtime reuses
//! for different functions over time names each sample by the function live there at the
//! sample's time: the newest load at or before it. A perf map has no times; its entries count
//! as loaded from the start, and where a JIT reused an address range the entry written last
//! wins. Both are untrusted and parsed by [`crossprof_symbols::perf_map`] and
//! [`crossprof_symbols::jitdump`], which never panic.

use std::collections::HashMap;
use std::sync::Arc;

use crossprof_format::JitMap;

use crate::frames::Frame;
use crossprof_symbols::jitdump::{self, LineEntry};
use crossprof_symbols::perf_map;

/// The module name shown for JIT frames.
pub const JIT_MODULE: &str = "[jit]";
/// A lookup looks at most this many candidate entries below the address (overlapping entries
/// from different times); beyond that, hostile or pathological input costs no more time.
const MAX_SCAN: usize = 4096;

/// Every process's JIT symbols, sorted for lookup once [`JitSymbols::finish`] ran.
#[derive(Debug, Default)]
pub struct JitSymbols {
    /// Every entry; an entry's index is its id.
    syms: Vec<JitSym>,
    by_pid: HashMap<u32, PidTable>,
    /// jitdumps being put back together from their pieces, by (pid, path).
    pending: HashMap<(u32, String), Pieces>,
    /// What the jitdumps held and what was wrong with them.
    pub stats: JitStats,
}

/// Counts the report shows about the jitdumps.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct JitStats {
    /// jitdump files carried.
    pub dumps: u64,
    /// Code loads and moves read from them.
    pub code: u64,
    /// Bytes of jitdumps that `rec`'s size bound left on the board.
    pub bytes_cut: u64,
    /// Records that did not parse or were cut short, pieces that did not follow on.
    pub damaged: u64,
    /// Dumps whose timestamps were a cycle counter (each load counts from the start).
    pub arch_timestamps: u64,
    /// Unwinding-info records seen.
    pub unwinding_info: u64,
}

#[derive(Debug, Default)]
struct Pieces {
    data: Vec<u8>,
    broken: bool,
    cut: u64,
}

#[derive(Debug, Default)]
struct PidTable {
    /// Ids sorted by start address.
    order: Vec<u32>,
    /// `max_end[i]`: the largest end among `order[..=i]`, so a backward scan knows when no
    /// earlier entry can reach an address.
    max_end: Vec<u64>,
}

#[derive(Debug, Clone)]
struct JitSym {
    start: u64,
    end: u64,
    /// Loaded at (0 for perf maps: from the start).
    time: u64,
    name: Arc<str>,
    lines: Arc<[LineEntry]>,
}

impl JitSymbols {
    /// Adds the perf map text of process `pid` (parsed by [`crossprof_symbols::perf_map`]).
    pub fn add_perf_map(&mut self, pid: u32, data: &[u8]) {
        for e in perf_map::parse(data) {
            self.push(
                pid,
                JitSym {
                    start: e.start,
                    end: e.end,
                    time: 0,
                    name: e.name.into(),
                    lines: Arc::new([]),
                },
            );
        }
    }

    /// Takes one piece of a jitdump; the pieces of a file come in order and are parsed by
    /// [`JitSymbols::finish`]. A piece that does not continue where the last ended (a lost
    /// frame of the recording) ends that file's data.
    pub fn add_jitdump_piece(&mut self, j: &JitMap) {
        let p = self.pending.entry((j.pid, j.path.clone())).or_default();
        if p.broken {
            return;
        }
        if j.offset != p.data.len() as u64 {
            p.broken = true;
            return;
        }
        p.data.extend_from_slice(&j.data);
        if j.truncated {
            p.cut = j.file_size.saturating_sub(p.data.len() as u64);
        }
    }

    fn push(&mut self, pid: u32, sym: JitSym) {
        let id = self.syms.len() as u32;
        self.syms.push(sym);
        self.by_pid.entry(pid).or_default().order.push(id);
    }

    /// Parses the jitdumps and sorts every process's entries for lookup. Call once, after
    /// every record was added.
    pub fn finish(&mut self) {
        let mut pending: Vec<_> = std::mem::take(&mut self.pending).into_iter().collect();
        pending.sort_by(|a, b| a.0.cmp(&b.0));
        for ((pid, _), pieces) in pending {
            let d = jitdump::parse(&pieces.data);
            let s = &mut self.stats;
            s.dumps += 1;
            s.code += d.code.len() as u64;
            s.bytes_cut += pieces.cut;
            s.damaged += d.damaged + u64::from(pieces.broken) + u64::from(d.not_a_jitdump);
            s.arch_timestamps += u64::from(d.arch_timestamps);
            s.unwinding_info += d.unwinding_info;
            for c in d.code {
                self.push(
                    pid,
                    JitSym {
                        start: c.start,
                        end: c.end,
                        time: c.time,
                        name: c.name,
                        lines: c.lines,
                    },
                );
            }
        }
        let syms = &self.syms;
        for t in self.by_pid.values_mut() {
            // Stable: entries at the same start keep their order (file order for a perf map).
            t.order.sort_by_key(|&id| syms[id as usize].start);
            let mut max = 0;
            t.max_end = t
                .order
                .iter()
                .map(|&id| {
                    max = max.max(syms[id as usize].end);
                    max
                })
                .collect();
        }
    }

    /// The entry naming the JIT code at `addr` in process `pid` at `time`: among the entries
    /// covering `addr` loaded at or before `time`, the newest (the last written, among equals).
    pub fn id_at(&self, pid: u32, addr: u64, time: u64) -> Option<u32> {
        let t = self.by_pid.get(&pid)?;
        let n = t
            .order
            .partition_point(|&id| self.syms[id as usize].start <= addr);
        let mut best: Option<u32> = None;
        for i in (0..n).rev().take(MAX_SCAN) {
            if t.max_end[i] <= addr {
                break;
            }
            let id = t.order[i];
            let s = &self.syms[id as usize];
            if addr < s.end
                && s.time <= time
                && best.is_none_or(|b| (s.time, id) > (self.syms[b as usize].time, b))
            {
                best = Some(id);
            }
        }
        best
    }

    /// The name of the JIT code at `addr` in `pid` at `time`, if a map or dump names it.
    pub fn lookup(&self, pid: u32, addr: u64, time: u64) -> Option<&str> {
        self.id_at(pid, addr, time)
            .map(|id| &*self.syms[id as usize].name)
    }

    /// Processes that have JIT symbols.
    pub fn len(&self) -> usize {
        self.by_pid.len()
    }

    /// No process has JIT symbols.
    pub fn is_empty(&self) -> bool {
        self.by_pid.is_empty()
    }

    /// The frame for `addr` inside entry `id` (from [`JitSymbols::id_at`]), with the source
    /// line when the jitdump gave one.
    pub fn frame(&self, id: u32, addr: u64) -> Option<Frame> {
        let s = self.syms.get(id as usize)?;
        let n = s.lines.partition_point(|l| l.addr <= addr);
        let line = n.checked_sub(1).map(|i| &s.lines[i]);
        Some(Frame {
            function: s.name.to_string(),
            file: line.map(|l| l.file.to_string()),
            line: line.map(|l| l.line),
            module: JIT_MODULE.into(),
            symbolized: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(f: impl FnOnce(&mut JitSymbols)) -> JitSymbols {
        let mut j = JitSymbols::default();
        f(&mut j);
        j.finish();
        j
    }

    #[test]
    fn perf_map_lines() {
        let j = table(|j| {
            j.add_perf_map(
                7,
                b"1000 10 jit_a\n0x1010 0x20 LazyCompile:*hot /s.js:3\ngarbage\nzz 10 x\n\
              2000 0 empty\nfffffffffffffff0 ff edge\n1000 8 jit_a_v2\n",
            )
        });
        let at = |a| j.lookup(7, a, 0);
        assert_eq!(at(0x1000), Some("jit_a_v2"));
        assert_eq!(at(0x1009), Some("jit_a"));
        assert_eq!(at(0x1010), Some("LazyCompile:*hot /s.js:3"));
        assert_eq!(at(0x102f), Some("LazyCompile:*hot /s.js:3"));
        assert_eq!(at(0x1030), None);
        assert_eq!(at(0x2000), None);
        assert_eq!(at(u64::MAX - 1), Some("edge"));
        assert_eq!(j.lookup(8, 0x1000, 0), None);
    }

    /// A jitdump for the tests: loads (time, addr, size, name) and line tables.
    fn dump(loads: &[(u64, u64, u64, &str)], lines: &[(u64, u32)]) -> Vec<u8> {
        let mut b = b"DTiJ".to_vec();
        for v in [1u32, 40, 62, 0, 7] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&[0; 16]);
        let mut rec = |kind: u32, time: u64, body: Vec<u8>| {
            b.extend_from_slice(&kind.to_le_bytes());
            b.extend_from_slice(&(16 + body.len() as u32).to_le_bytes());
            b.extend_from_slice(&time.to_le_bytes());
            b.extend_from_slice(&body);
        };
        for (i, &(time, addr, size, name)) in loads.iter().enumerate() {
            let mine: Vec<_> = lines
                .iter()
                .filter(|l| l.0 >= addr && l.0 < addr + size)
                .collect();
            if !mine.is_empty() {
                let mut body = addr.to_le_bytes().to_vec();
                body.extend_from_slice(&(mine.len() as u64).to_le_bytes());
                for &&(a, line) in &mine {
                    body.extend_from_slice(&a.to_le_bytes());
                    body.extend_from_slice(&line.to_le_bytes());
                    body.extend_from_slice(&0u32.to_le_bytes());
                    body.extend_from_slice(b"/src/gen.c\0");
                }
                rec(2, time, body);
            }
            let mut body = vec![0; 8];
            for v in [addr, addr, size, i as u64] {
                body.extend_from_slice(&v.to_le_bytes());
            }
            body.extend_from_slice(name.as_bytes());
            body.push(0);
            body.resize(body.len() + size as usize, 0xc3);
            rec(0, time, body);
        }
        b
    }

    fn piece(pid: u32, data: &[u8], offset: u64) -> JitMap {
        JitMap {
            time: 0,
            pid,
            kind: "jitdump".into(),
            truncated: false,
            data: data.to_vec(),
            path: "/x/jit-7.dump".into(),
            offset,
            file_size: 0,
        }
    }

    #[test]
    fn a_reused_region_names_each_time_by_the_code_live_then() {
        let d = dump(
            &[
                (100, 0x1000, 0x40, "first"),
                (200, 0x1000, 0x40, "second"),
                (300, 0x1020, 0x40, "third"),
                (300, 0x4000, 0x10, "lined"),
            ],
            &[(0x4008, 41)],
        );
        // In two pieces, as rec writes a long file.
        let j = table(|j| {
            j.add_jitdump_piece(&piece(7, &d[..100], 0));
            j.add_jitdump_piece(&piece(7, &d[100..], 100));
        });
        let at = |a, t| j.lookup(7, a, t);
        assert_eq!(at(0x1010, 99), None, "before any load");
        assert_eq!(at(0x1010, 100), Some("first"));
        assert_eq!(at(0x1010, 199), Some("first"));
        assert_eq!(at(0x1010, 200), Some("second"));
        assert_eq!(at(0x1030, 250), Some("second"));
        assert_eq!(at(0x1030, 300), Some("third"));
        assert_eq!(at(0x1010, 1000), Some("second"));
        assert_eq!(at(0x1050, 1000), Some("third"));
        let f = |a| j.frame(j.id_at(7, a, 400).unwrap(), a).unwrap();
        assert_eq!((f(0x4007).file, f(0x4007).line), (None, None));
        assert_eq!(
            (
                f(0x4009).file.as_deref(),
                f(0x4009).line,
                f(0x4009).module.as_str()
            ),
            (Some("/src/gen.c"), Some(41), JIT_MODULE)
        );
        assert_eq!(j.stats.dumps, 1);
        assert_eq!((j.stats.code, j.stats.damaged), (4, 0));
    }

    /// What rec's bound cut is counted in bytes, and the record it cut in two as damaged;
    /// the loads before the cut still name their code.
    #[test]
    fn a_dump_cut_by_recs_bound_counts_what_is_missing() {
        let d = dump(&[(1, 0x1000, 0x10, "a"), (2, 0x2000, 0x10, "b")], &[]);
        let cut = d.len() - 5;
        let mut p = piece(7, &d[..cut], 0);
        (p.truncated, p.file_size) = (true, d.len() as u64 + 1000);
        let j = table(|j| j.add_jitdump_piece(&p));
        assert_eq!(j.lookup(7, 0x1000, 5), Some("a"));
        assert_eq!(j.lookup(7, 0x2000, 5), None);
        assert_eq!((j.stats.bytes_cut, j.stats.damaged), (1005, 1));
    }

    #[test]
    fn a_missing_piece_ends_the_dump_there() {
        let d = dump(&[(1, 0x1000, 0x10, "a"), (2, 0x2000, 0x10, "b")], &[]);
        let half = d.len() / 2 + 20;
        let j = table(|j| {
            j.add_jitdump_piece(&piece(7, &d[..half], 0));
            j.add_jitdump_piece(&piece(7, &d[half + 1..], half as u64 + 1));
        });
        assert_eq!(j.lookup(7, 0x1000, 5), Some("a"));
        assert_eq!(j.lookup(7, 0x2000, 5), None);
        assert!(j.stats.damaged >= 1);
    }
}
