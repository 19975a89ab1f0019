//! Stack usage per thread (`report --stack-usage`): how deep each thread's stack went, in
//! bytes, and the call chain at that moment, from every sample that carries the thread's
//! registers (CPU samples and off-CPU switch-outs of stack-copy recordings, snapshots).
//!
//! A stack grows down from the top of its mapping, so a sample's usage is the end of the
//! mapping that holds its stack pointer minus the stack pointer. `rec` records the mappings a
//! stack can live in when it copies stacks (see rec's `data_maps`): anonymous writable memory,
//! where the C library puts each thread's stack, and the main thread's `[stack]`, with the
//! process's `RLIMIT_STACK` (the `Max stack size` line of `/proc/PID/limits`, in a blob),
//! since `[stack]` grows on demand up to it. A thread's stack size is its mapping's length
//! (the guard page below it is a mapping of its own, which `rec` leaves out), the main
//! thread's is the limit.
//!
//! The stack pointer is looked up as the samples stream past (a few comparisons each); only a
//! sample deeper than its thread's deepest so far has its unwound stack kept, and the kept
//! stacks are symbolized once at the end. A sample whose stack pointer falls in no recorded
//! mapping (a recording made without them, a stack the program allocated on its heap) is
//! counted, not guessed at.
//!
//! The deepest point of a thread is where it touches stack pages for the first time, and a
//! sample taken there while the page is not yet in (during the page fault, or between the
//! instruction that lowers the stack pointer and the first store below it) carries its
//! registers but no stack copy: the kernel copies the stack without faulting pages in, and the
//! copy stops at once. Its depth is real, so it counts for `max_bytes`; its chain is only the
//! sampled instruction, which says nothing of how the thread got there. The chain shown is then
//! the one of the deepest sample that has a stack copy, with the depth it was seen at
//! (`stack_bytes`).

use std::collections::HashMap;

use crossprof_format::{Arch, PerfRegs, Record, Sample};

use crate::analysis::cpu::{Accumulator, Unwound};
use crate::processes::Processes;
use crate::resolve::Resolver;
use crate::unwinding::StackUnwinder;

/// A thread whose deepest stack came within this share of its size is warned about.
pub const NEAR_LIMIT: f64 = 0.9;

/// A mapping a stack can live in.
#[derive(Debug, Clone, Copy)]
struct StackMap {
    time: u64,
    start: u64,
    end: u64,
    /// The main thread's `[stack]`, which grows down to the process's limit.
    main: bool,
}

/// The mappings stacks can live in and the stack limits, per process, as the metadata pass
/// saw them ([`StackMaps::observe`]).
#[derive(Debug, Default)]
pub struct StackMaps {
    by_pid: HashMap<u32, Vec<StackMap>>,
    /// `RLIMIT_STACK` (soft) per process; `None` when unlimited.
    limits: HashMap<u32, Option<u64>>,
}

impl StackMaps {
    /// Keeps `r` when it is a mapping a stack can live in, or a process's stack limit.
    pub fn observe(&mut self, r: &Record) {
        match r {
            Record::Mmap(m) if m.prot & 4 == 0 && m.prot & 2 != 0 && may_hold_stack(&m.path) => {
                self.by_pid.entry(m.pid).or_default().push(StackMap {
                    time: m.time,
                    start: m.start,
                    end: m.start.saturating_add(m.len),
                    main: m.path == "[stack]",
                });
            }
            Record::Blob(b) => {
                if let Some((pid, limit)) = parse_limits_blob(&b.name, &b.data) {
                    self.limits.insert(pid, limit);
                }
            }
            _ => {}
        }
    }

    /// Puts each process's mappings in time order; call once the pass is over.
    pub fn finish(&mut self) {
        for v in self.by_pid.values_mut() {
            v.sort_by_key(|m| m.time);
        }
    }

    /// Whether the recording holds no mapping a stack can live in (made before `rec`
    /// recorded them, or without stack copies).
    pub fn is_empty(&self) -> bool {
        self.by_pid.is_empty()
    }

    /// Where the stack pointer `sp` of a sample of `pid` at `time` lies: the top of its
    /// mapping and the stack's size (`None`: unlimited or unknown), looking only at mappings
    /// made since the process's last exec before `time`.
    fn locate(&self, pid: u32, time: u64, sp: u64, exec: u64) -> Option<(u64, Option<u64>)> {
        let maps = self.by_pid.get(&pid)?;
        let live = &maps[..maps.partition_point(|m| m.time <= time)];
        let live = live.iter().rev().take_while(|m| m.time >= exec);
        // The latest mapping made there wins where a region was mapped again.
        if let Some(m) = live.clone().find(|m| m.start <= sp && sp < m.end) {
            let size = match m.main {
                true => self.limits.get(&pid).copied().flatten(),
                false => Some(m.end - m.start),
            };
            return Some((m.end, size));
        }
        // The main thread's stack grew below its mapping as recorded, within its limit.
        let limit = self.limits.get(&pid).copied().flatten();
        live.filter(|m| m.main)
            .find(|m| sp < m.end && limit.is_none_or(|l| m.end - sp <= l))
            .map(|m| (m.end, limit))
    }
}

/// Whether a mapping named `path` can be a stack: anonymous memory (`//anon` from the
/// kernel, no name from /proc, `[anon:NAME]`) or the main thread's `[stack]`.
fn may_hold_stack(path: &str) -> bool {
    path.is_empty() || path.starts_with("//anon") || path == "[stack]" || path.starts_with("[anon:")
}

/// The process and its soft stack limit (`None`: unlimited) from a blob named
/// `/proc/PID/limits` holding that file's `Max stack size` line.
fn parse_limits_blob(name: &str, data: &[u8]) -> Option<(u32, Option<u64>)> {
    let pid = name
        .strip_prefix("/proc/")?
        .strip_suffix("/limits")?
        .parse()
        .ok()?;
    let text = std::str::from_utf8(data).ok()?;
    let line = text.lines().find(|l| l.starts_with("Max stack size"))?;
    let soft = line
        .strip_prefix("Max stack size")?
        .split_whitespace()
        .next()?;
    match soft {
        "unlimited" => Some((pid, None)),
        n => Some((pid, Some(n.parse().ok()?))),
    }
}

/// A sample deeper than its thread's deepest so far ([`StackUsageBuilder::measure`]), to be
/// kept with its unwound stack ([`StackUsageBuilder::keep`]).
#[derive(Debug, Clone, Copy)]
pub struct Deeper {
    pid: u32,
    tid: u32,
    bytes: u64,
    stack_size: Option<u64>,
    time: u64,
    /// Whether the sample carries a stack copy, so that its chain goes beyond the sampled
    /// instruction (see the module's doc).
    copied: bool,
}

/// A sample deeper than its thread's others, with its stack.
struct Deepest {
    at: Deeper,
    unwound: Unwound,
}

/// One thread's deepest samples so far.
struct ThreadDeepest {
    /// The deepest of all: its depth is the thread's `max_bytes`.
    any: Deepest,
    /// The deepest with a stack copy, whose chain is shown; `None` while no sample of the
    /// thread had one.
    copied: Option<Deepest>,
}

impl ThreadDeepest {
    /// Whether a sample `bytes` deep, with a stack copy or not, is worth keeping.
    fn wants(&self, bytes: u64, copied: bool) -> bool {
        bytes > self.any.at.bytes
            || (copied && self.copied.as_ref().is_none_or(|c| bytes > c.at.bytes))
    }

    /// The sample whose chain is shown: the deepest with a stack copy, else the deepest.
    fn shown(&self) -> &Deepest {
        self.copied.as_ref().unwrap_or(&self.any)
    }
}

/// Stack usage being measured while the samples stream past.
pub struct StackUsageBuilder {
    maps: StackMaps,
    sp: u32,
    deepest: HashMap<(u32, u32), ThreadDeepest>,
    measured: u64,
    unplaced: u64,
    recorded: bool,
}

impl StackUsageBuilder {
    /// For a recording of `arch` whose stack mappings are `maps`.
    pub fn new(maps: StackMaps, arch: Arch) -> StackUsageBuilder {
        StackUsageBuilder {
            recorded: !maps.is_empty(),
            maps,
            sp: PerfRegs::of(arch).sp,
            deepest: HashMap::new(),
            measured: 0,
            unplaced: 0,
        }
    }

    /// Measures `s` when it carries a stack pointer; `Some` when it is deeper than its
    /// thread's deepest so far (or than its deepest with a stack copy, when it has one),
    /// which [`StackUsageBuilder::keep`] then takes with its stack.
    pub fn measure(&mut self, s: &Sample, processes: &Processes) -> Option<Deeper> {
        let sp = PerfRegs::get(s.regs_mask, &s.regs, self.sp)?;
        let execs = processes.exec_times(s.pid);
        let exec = execs[..execs.partition_point(|&t| t <= s.time)]
            .last()
            .copied()
            .unwrap_or(0);
        self.measured += 1;
        let Some((top, stack_size)) = self.maps.locate(s.pid, s.time, sp, exec) else {
            self.unplaced += 1;
            return None;
        };
        let bytes = top - sp;
        let copied = !s.stack.is_empty();
        let so_far = self.deepest.get(&(s.pid, s.tid));
        (so_far.is_none_or(|d| d.wants(bytes, copied))).then_some(Deeper {
            pid: s.pid,
            tid: s.tid,
            bytes,
            stack_size,
            time: s.time,
            copied,
        })
    }

    /// Keeps `at`, which [`StackUsageBuilder::measure`] found deeper, with its stack.
    pub fn keep(&mut self, at: Deeper, unwound: Unwound) {
        let key = (at.pid, at.tid);
        let Some(d) = self.deepest.get_mut(&key) else {
            let copied = at.copied.then(|| Deepest {
                at,
                unwound: unwound.clone(),
            });
            let any = Deepest { at, unwound };
            self.deepest.insert(key, ThreadDeepest { any, copied });
            return;
        };
        if at.copied && d.copied.as_ref().is_none_or(|c| at.bytes > c.at.bytes) {
            let unwound = unwound.clone();
            d.copied = Some(Deepest { at, unwound });
        }
        if at.bytes > d.any.at.bytes {
            d.any = Deepest { at, unwound };
        }
    }

    /// Each thread's deepest stack, symbolized, the threads nearest their limit first.
    pub fn finish(
        self,
        processes: &Processes,
        resolver: &Resolver,
        unwinder: &StackUnwinder<'_>,
    ) -> StackUsage {
        let mut acc = Accumulator::new(false);
        let mut threads = Vec::new();
        for d in self.deepest.into_values() {
            let stack_bytes = d.shown().at.bytes;
            let shown = d.copied.map_or(d.any.unwound, |c| c.unwound);
            acc.push(shown, 1);
            threads.push((d.any.at, stack_bytes));
        }
        let profile = acc.finish(processes, resolver, unwinder);
        let mut stacks: HashMap<u32, Vec<String>> = HashMap::new();
        for s in &profile.stacks {
            let names = s.user_frames().iter().map(|&f| profile.table.get(f));
            stacks.insert(s.tid, names.map(|f| f.function.clone()).collect());
        }
        let mut threads: Vec<ThreadStack> = threads
            .into_iter()
            .map(|(d, stack_bytes)| ThreadStack {
                pid: d.pid,
                tid: d.tid,
                comm: processes.name(d.tid, d.time).to_string(),
                max_bytes: d.bytes,
                stack_size: d.stack_size,
                time: d.time,
                stack_bytes,
                stack: stacks.get(&d.tid).cloned().unwrap_or_default(),
            })
            .collect();
        threads.sort_by(|a, b| {
            b.near_limit()
                .cmp(&a.near_limit())
                .then(b.max_bytes.cmp(&a.max_bytes))
                .then(a.pid.cmp(&b.pid))
                .then(a.tid.cmp(&b.tid))
        });
        StackUsage {
            threads,
            measured: self.measured,
            unplaced: self.unplaced,
            recorded: self.recorded,
        }
    }
}

/// One thread's deepest stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadStack {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Thread name at that moment.
    pub comm: String,
    /// Bytes from the top of the stack's mapping to the stack pointer.
    pub max_bytes: u64,
    /// The stack's size: its mapping's length, for the main thread `RLIMIT_STACK`; `None`
    /// when unlimited.
    pub stack_size: Option<u64>,
    /// When it was that deep (board time, ns).
    pub time: u64,
    /// How deep the stack was when [`ThreadStack::stack`] was seen: `max_bytes`, unless the
    /// deepest sample had no stack copy (a page fault in progress at its stack pointer, see
    /// the module's doc); then the deepest sample that had one.
    pub stack_bytes: u64,
    /// The user call chain at `stack_bytes`, function names innermost first.
    pub stack: Vec<String>,
}

impl ThreadStack {
    /// Whether the thread came within 10% of its stack size ([`NEAR_LIMIT`]).
    pub fn near_limit(&self) -> bool {
        self.stack_size
            .is_some_and(|size| self.max_bytes as f64 >= NEAR_LIMIT * size as f64)
    }
}

/// Every thread's deepest stack.
#[derive(Debug, Clone, Default)]
pub struct StackUsage {
    /// One row per thread, those near their limit first, then the deepest.
    pub threads: Vec<ThreadStack>,
    /// Samples with a stack pointer.
    pub measured: u64,
    /// Of those, samples whose stack pointer fell in no recorded stack mapping.
    pub unplaced: u64,
    /// Whether the recording holds stack mappings at all (recordings made with stack copies
    /// since `rec` records them); without them there is nothing to measure.
    pub recorded: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossprof_format::{Blob, Mmap};

    fn map(time: u64, start: u64, len: u64, path: &str) -> Record {
        Record::Mmap(Mmap {
            time,
            pid: 7,
            tid: 7,
            start,
            len,
            path: path.into(),
            prot: 3,
            ..Default::default()
        })
    }

    fn limits(text: &str) -> Record {
        Record::Blob(Blob {
            name: "/proc/7/limits".into(),
            addr: 0,
            data: text.into(),
        })
    }

    #[test]
    fn the_stack_limit_is_read_from_its_line() {
        let line = "Max stack size            8388608              unlimited            bytes\n";
        assert_eq!(
            parse_limits_blob("/proc/7/limits", line.as_bytes()),
            Some((7, Some(8 << 20)))
        );
        let line = "Max stack size            unlimited            unlimited            bytes\n";
        assert_eq!(
            parse_limits_blob("/proc/7/limits", line.as_bytes()),
            Some((7, None))
        );
        assert_eq!(parse_limits_blob("[vdso]", line.as_bytes()), None);
    }

    #[test]
    fn a_stack_pointer_is_measured_from_the_top_of_its_mapping() {
        let mut m = StackMaps::default();
        for r in [
            map(1, 0x7000_0000, 0x2_1000, "[stack]"),
            limits("Max stack size  1048576  unlimited  bytes\n"),
            map(2, 0x1000_0000, 0x4_0000, "//anon"),
            map(3, 0x2000_0000, 0x1000, "/usr/share/data"),
        ] {
            m.observe(&r);
        }
        m.finish();
        // A thread stack: its size is its mapping's.
        assert_eq!(
            m.locate(7, 5, 0x1003_0000, 0),
            Some((0x1004_0000, Some(0x4_0000)))
        );
        // The main thread's, grown below the mapping as recorded: its size is the limit.
        let top = 0x7002_1000;
        assert_eq!(
            m.locate(7, 5, top - 0x8_0000, 0),
            Some((top, Some(1 << 20)))
        );
        assert_eq!(m.locate(7, 5, top - (2 << 20), 0), None, "beyond the limit");
        // Mapped after the sample, or before the last exec: not yet, or no longer, there.
        assert_eq!(m.locate(7, 1, 0x1003_0000, 0), None);
        assert_eq!(m.locate(7, 5, 0x1003_0000, 3), None);
        assert_eq!(
            m.locate(7, 5, 0x2000_0010, 0),
            None,
            "a file holds no stack"
        );
    }

    #[test]
    fn near_limit_is_within_ten_percent() {
        let t = |max_bytes, stack_size| ThreadStack {
            pid: 1,
            tid: 1,
            comm: String::new(),
            max_bytes,
            stack_size,
            time: 0,
            stack_bytes: max_bytes,
            stack: Vec::new(),
        };
        assert!(t(240 << 10, Some(256 << 10)).near_limit());
        assert!(!t(200 << 10, Some(256 << 10)).near_limit());
        assert!(!t(200 << 10, None).near_limit());
    }
}
