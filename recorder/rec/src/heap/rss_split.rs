//! Resident memory split by the kind of mapping that holds it, for `rec --heap`'s RSS ticks:
//! heap, thread stacks, other anonymous memory and file-backed mappings, summed from the `Rss`
//! line of each mapping in `/proc/PID/smaps` ([`RssSplit`] records).
//!
//! The kinds, from what `smaps` shows of a mapping:
//! - heap: `[heap]` (the allocator's `brk` area), and glibc's arenas of other threads: a
//!   readable-writable anonymous mapping that starts at a multiple of the arena size (64 MiB
//!   on 64-bit targets, 32 MiB on 32-bit ones) and is followed at once by the rest of that
//!   reservation, mapped `PROT_NONE`;
//! - stacks: `[stack]` (`[stack:TID]` on old kernels), and each readable-writable anonymous
//!   mapping that sits right above an inaccessible anonymous mapping of at most 1 MiB: a
//!   thread stack above its guard, as glibc and musl lay them out;
//! - anonymous: every other private anonymous mapping (named ones, `[anon:NAME]`, too): the
//!   program's own `mmap`s, and the large blocks glibc's malloc maps one by one;
//! - file: everything with a path (code, data, mapped files, shared memory) and the kernel's
//!   (`[vdso]`, `[vvar]`).
//!
//! Totals at every tick come from `statm` (`Rss` records: the counters `/proc/PID/status`
//! shows as `VmRSS`, and the cheapest read there is). The split walks every mapping, which
//! costs more the more mappings a process has (a few hundred microseconds for a small
//! program, tens of milliseconds for thousands of mappings on a slow board), so it is taken
//! at an RSS tick only when the time since the last one is at least [`COST_FACTOR`] times
//! what the last one took: at most a quarter of a percent of one core, whatever the process.
//! (The kernel walks the page tables of every mapping to fill smaps, so the read costs more
//! the more memory is resident: with 50 here, the split was half of rec's own CPU time under
//! `--heap-sample` on a Lua run, 1.5% of the program's.)

use std::io::{BufRead, BufReader};
use std::time::Instant;

use crossprof_format::RssSplit;

/// The split's reads take at most one part in this many of the time between them.
pub const COST_FACTOR: u32 = 400;

/// Largest guard under a thread stack: glibc's default is a page, musl's 4 KiB to 8 KiB, and
/// `pthread_attr_setguardsize` rarely asks for more than 64 KiB.
const MAX_GUARD: u64 = 1 << 20;

/// glibc's arena reservation (`HEAP_MAX_SIZE`): twice the largest mmap threshold.
const ARENA_BYTES: u64 = if cfg!(target_pointer_width = "64") {
    64 << 20
} else {
    32 << 20
};

/// One mapping as the split needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Area {
    /// Start address.
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// Readable or writable (not a guard or reservation).
    pub accessible: bool,
    /// What its path says.
    pub named: Named,
    /// Resident bytes.
    pub rss: u64,
}

/// What a mapping's path says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// `[heap]`.
    Heap,
    /// `[stack]` or `[stack:TID]`.
    Stack,
    /// No path, or `[anon:NAME]`, and private.
    Anonymous,
    /// A file, shared memory or the kernel's pages.
    Other,
}

/// When to take the next split, and the buffers to read with (reused).
pub struct Sampler {
    next: Instant,
    areas: Vec<Area>,
    line: String,
}

impl Default for Sampler {
    fn default() -> Self {
        Sampler {
            next: Instant::now(),
            areas: Vec::new(),
            line: String::new(),
        }
    }
}

impl Sampler {
    /// Whether this tick takes the split.
    pub fn due(&self) -> bool {
        Instant::now() >= self.next
    }

    /// Reads the split of every pid in `pids` at `time`, and sets when the next is due.
    pub fn take(&mut self, pids: &[u32], time: u64) -> Vec<RssSplit> {
        let started = Instant::now();
        let mut out = Vec::new();
        for &pid in pids {
            if read_smaps(pid, &mut self.areas, &mut self.line).is_ok() {
                let mut s = split(&self.areas);
                (s.time, s.pid) = (time, pid);
                out.push(s);
            }
        }
        let cost = started.elapsed();
        self.next = Instant::now() + cost.saturating_mul(COST_FACTOR);
        out
    }
}

/// Reads `/proc/PID/smaps` into `areas`, a line at a time (its text can be megabytes).
fn read_smaps(pid: u32, areas: &mut Vec<Area>, line: &mut String) -> std::io::Result<()> {
    areas.clear();
    let f = std::fs::File::open(format!("/proc/{pid}/smaps"))?;
    let mut r = BufReader::with_capacity(64 << 10, f);
    loop {
        line.clear();
        if r.read_line(line)? == 0 {
            return Ok(());
        }
        parse_line(line, areas);
    }
}

/// Takes one line of `smaps`: a mapping's header starts a new [`Area`], its `Rss:` line
/// fills it in; other lines are ignored.
pub fn parse_line(line: &str, areas: &mut Vec<Area>) {
    if let Some(rest) = line.strip_prefix("Rss:") {
        let kb = rest.trim().trim_end_matches("kB").trim();
        if let (Some(a), Ok(kb)) = (areas.last_mut(), kb.parse::<u64>()) {
            a.rss = kb.saturating_mul(1024);
        }
        return;
    }
    let mut fields = line.split_ascii_whitespace();
    let Some((start, end)) = fields.next().and_then(|r| r.split_once('-')) else {
        return;
    };
    let (Ok(start), Ok(end)) = (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
    else {
        return;
    };
    let perms = fields.next().unwrap_or("").as_bytes();
    // Offset, device and inode, then the path (which may hold spaces; only its start counts).
    let path = fields.nth(3).unwrap_or("");
    let private = perms.get(3) == Some(&b'p');
    let named = if path == "[heap]" {
        Named::Heap
    } else if path.starts_with("[stack") {
        Named::Stack
    } else if private && (path.is_empty() || path.starts_with("[anon")) {
        Named::Anonymous
    } else {
        Named::Other
    };
    areas.push(Area {
        start,
        end,
        accessible: perms.first() == Some(&b'r') || perms.get(1) == Some(&b'w'),
        named,
        rss: 0,
    });
}

/// Sums the areas (in address order, as `smaps` lists them) by kind; see the module.
pub fn split(areas: &[Area]) -> RssSplit {
    let mut s = RssSplit::default();
    for (i, a) in areas.iter().enumerate() {
        s.rss = s.rss.saturating_add(a.rss);
        let slot = match a.named {
            Named::Heap => &mut s.heap,
            Named::Stack => &mut s.stacks,
            Named::Other => &mut s.file,
            Named::Anonymous => {
                let inaccessible_anon = |b: &Area| b.named == Named::Anonymous && !b.accessible;
                let next = areas.get(i + 1);
                let prev = i.checked_sub(1).and_then(|j| areas.get(j));
                let arena = a.accessible
                    && a.start % ARENA_BYTES == 0
                    && a.end - a.start < ARENA_BYTES
                    && next.is_some_and(|n| {
                        n.start == a.end && inaccessible_anon(n) && n.end >= a.start + ARENA_BYTES
                    });
                let stack = a.accessible
                    && prev.is_some_and(|p| {
                        p.end == a.start && inaccessible_anon(p) && p.end - p.start <= MAX_GUARD
                    });
                if arena {
                    &mut s.heap
                } else if stack {
                    &mut s.stacks
                } else {
                    &mut s.anonymous
                }
            }
        };
        *slot = slot.saturating_add(a.rss);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Vec<Area> {
        let mut areas = Vec::new();
        for line in text.lines() {
            parse_line(line, &mut areas);
        }
        areas
    }

    #[test]
    fn kinds_from_a_real_layout() {
        // Cut from a glibc program with one extra thread, one arena and a 64 MiB mmap.
        let text = "\
55d0e0a00000-55d0e0a01000 r-xp 00001000 08:01 123  /usr/bin/app
Rss:                   4 kB
55d0e1000000-55d0e1021000 rw-p 00000000 00:00 0    [heap]
Rss:                 132 kB
7f1c00000000-7f1c00021000 rw-p 00000000 00:00 0
Rss:                  12 kB
7f1c00021000-7f1c04000000 ---p 00000000 00:00 0
Rss:                   0 kB
7f1c08000000-7f1c0c000000 rw-p 00000000 00:00 0
Rss:               65536 kB
7f1c0c7ff000-7f1c0c800000 ---p 00000000 00:00 0
Rss:                   0 kB
7f1c0c800000-7f1c0d000000 rw-p 00000000 00:00 0
Rss:                  16 kB
7f1c0d000000-7f1c0d001000 rw-s 00000000 00:01 99   /memfd:ring (deleted)
Rss:                   4 kB
7ffd4a000000-7ffd4a021000 rw-p 00000000 00:00 0    [stack]
Rss:                  20 kB
7ffd4a100000-7ffd4a102000 r--p 00000000 00:00 0    [vvar]
Rss:                   0 kB
";
        let areas = parse(text);
        assert_eq!(areas.len(), 10);
        let s = split(&areas);
        assert_eq!(s.heap, (132 + 12) << 10);
        assert_eq!(s.stacks, (16 + 20) << 10);
        assert_eq!(s.anonymous, 65536 << 10);
        assert_eq!(s.file, (4 + 4) << 10);
        assert_eq!(s.rss, s.heap + s.stacks + s.anonymous + s.file);
    }

    #[test]
    fn hostile_lines_are_ignored() {
        let areas = parse("Rss: 5 kB\nzz-yy rw-p\n1000-2000\nRss: x kB\n-\n");
        assert_eq!(areas.len(), 1);
        assert_eq!(areas[0].rss, 0);
        assert_eq!(areas[0].named, Named::Other);
    }
}
