//! Names for JIT-compiled code from the perf maps (`/tmp/perf-PID.map`) `rec` carried in the
//! recording: addresses in anonymous executable memory, which no module covers, are looked up
//! in their process's map, as perf does.
//!
//! A map is untrusted text: lines that do not parse are skipped, sizes that overflow are
//! clipped, and where a JIT reused an address range the entry written last wins.

use std::collections::HashMap;

use crate::frames::Frame;

/// The module name shown for JIT frames.
pub const JIT_MODULE: &str = "[jit]";

/// Every process's JIT symbols, sorted for lookup.
#[derive(Debug, Default)]
pub struct JitSymbols {
    by_pid: HashMap<u32, Vec<JitSym>>,
}

#[derive(Debug, Clone)]
struct JitSym {
    start: u64,
    end: u64,
    name: String,
}

impl JitSymbols {
    /// Adds the perf map text of process `pid`. Costs a sort of that process's entries.
    pub fn add_perf_map(&mut self, pid: u32, data: &[u8]) {
        let text = String::from_utf8_lossy(data);
        let syms = self.by_pid.entry(pid).or_default();
        for line in text.lines() {
            let mut parts = line.trim_start().splitn(3, char::is_whitespace);
            let (Some(start), Some(size), Some(name)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
            let (Some(start), Some(size)) = (hex(start), hex(size)) else {
                continue;
            };
            let name = name.trim();
            if size == 0 || name.is_empty() {
                continue;
            }
            syms.push(JitSym {
                start,
                end: start.saturating_add(size),
                name: name.to_string(),
            });
        }
        // Stable: among entries with the same start, file order is kept, so the last written
        // comes last and wins below.
        syms.sort_by_key(|s| s.start);
    }

    /// The name of the JIT code at `addr` in process `pid`, if its map has one.
    pub fn lookup(&self, pid: u32, addr: u64) -> Option<&str> {
        let syms = self.by_pid.get(&pid)?;
        let n = syms.partition_point(|s| s.start <= addr);
        // The nearest entries starting at or below `addr`; a few back covers ranges that
        // later, shorter entries at the same start split.
        syms[..n]
            .iter()
            .rev()
            .take(8)
            .find(|s| addr < s.end)
            .map(|s| s.name.as_str())
    }

    /// Processes that have a map.
    pub fn len(&self) -> usize {
        self.by_pid.len()
    }

    /// No process has a map.
    pub fn is_empty(&self) -> bool {
        self.by_pid.is_empty()
    }

    /// A frame for JIT code at `addr` in `pid`, when the map names it.
    pub fn frame(&self, pid: u32, addr: u64) -> Option<Frame> {
        self.lookup(pid, addr).map(|name| Frame {
            function: name.to_string(),
            file: None,
            line: None,
            module: JIT_MODULE.into(),
            symbolized: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_map_lines() {
        let mut j = JitSymbols::default();
        j.add_perf_map(
            7,
            b"1000 10 jit_a\n0x1010 0x20 LazyCompile:*hot /s.js:3\ngarbage\nzz 10 x\n\
              2000 0 empty\nfffffffffffffff0 ff edge\n1000 8 jit_a_v2\n",
        );
        assert_eq!(j.lookup(7, 0x1000), Some("jit_a_v2"));
        assert_eq!(j.lookup(7, 0x1009), Some("jit_a"));
        assert_eq!(j.lookup(7, 0x1010), Some("LazyCompile:*hot /s.js:3"));
        assert_eq!(j.lookup(7, 0x102f), Some("LazyCompile:*hot /s.js:3"));
        assert_eq!(j.lookup(7, 0x1030), None);
        assert_eq!(j.lookup(7, 0x2000), None);
        assert_eq!(j.lookup(7, u64::MAX - 1), Some("edge"));
        assert_eq!(j.lookup(8, 0x1000), None);
    }
}
