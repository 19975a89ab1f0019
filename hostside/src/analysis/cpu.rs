//! CPU profile: samples grouped by (thread, stack), symbolized, and summed per function.
//!
//! Samples are interned by their raw stack while the file streams past, so memory grows with
//! the number of *distinct* stacks, not with the recording's length. Every distinct address is
//! then symbolized once (see [`crate::resolve`]).

use std::collections::{HashMap, HashSet};

use crate::frames::{FrameId, FrameTable};

use super::function_table::functions;
pub use super::function_table::FunctionRow;
use crate::processes::{Placed, Processes, SpaceKey};
use crate::resolve::{unmapped_frame, Resolver};
use crate::unwinding::{StackUnwinder, UnwindStats};

/// One distinct symbolized stack and how often it was sampled.
pub struct Stack {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The address space the addresses belong to (the process and its exec generation).
    pub space: SpaceKey,
    /// Frames, innermost first (kernel frames first, then user frames).
    pub frames: Vec<FrameId>,
    /// The raw addresses behind `frames`, innermost first: exports that carry addresses
    /// (pprof locations, `perf script` lines) need them, and an inlined call expands one
    /// address into several frames.
    pub addresses: Vec<StackAddress>,
    /// Samples with this stack.
    pub count: u64,
    /// Sum of the samples' periods (nanoseconds for `cpu-clock`, events otherwise).
    pub period: u64,
}

impl Stack {
    /// The user frames, innermost first: the stack without the kernel's part, which comes
    /// first (where a system call or a wait was made from, in the program).
    pub fn user_frames(&self) -> &[FrameId] {
        let kernel: usize = self
            .addresses
            .iter()
            .filter(|a| a.kernel)
            .map(|a| a.frames as usize)
            .sum();
        self.frames.get(kernel..).unwrap_or(&[])
    }

    /// Function names of every frame, innermost first (JSON stacks).
    pub fn names(&self, table: &FrameTable) -> Vec<String> {
        self.frames
            .iter()
            .map(|&f| table.get(f).function.clone())
            .collect()
    }
}

/// One address of a sampled chain and the frames symbolization made of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackAddress {
    /// The address as recorded: the sampled instruction or a return address.
    pub addr: u64,
    /// The address looked up: a return address minus one, so it falls in the call.
    pub lookup: u64,
    /// How many consecutive entries of [`Stack::frames`] it became (inlined calls add one
    /// each).
    pub frames: u32,
    /// Whether it came from the kernel's part of the chain.
    pub kernel: bool,
}

/// When one sample was taken, and which of [`CpuProfile::stacks`] it had: the timeline that
/// time-ordered exports (Firefox Profiler, `perf script`) and time filters need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleAt {
    /// Board time, ns.
    pub time: u64,
    /// The sample's period.
    pub period: u64,
    /// Index into [`CpuProfile::stacks`].
    pub stack: u32,
    /// CPU it ran on.
    pub cpu: u32,
}

/// Per-thread sample counts.
pub struct ThreadRow {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Thread name (last COMM seen).
    pub comm: String,
    /// Samples.
    pub samples: u64,
}

/// The whole CPU analysis.
pub struct CpuProfile {
    /// Frames referenced by ids below.
    pub table: FrameTable,
    /// Distinct stacks.
    pub stacks: Vec<Stack>,
    /// Every sample in time order (24 bytes each).
    pub timeline: Vec<SampleAt>,
    /// Functions sorted by self samples, then total, then name.
    pub functions: Vec<FunctionRow>,
    /// Threads sorted by samples.
    pub threads: Vec<ThreadRow>,
    /// Samples in the recording.
    pub samples: u64,
    /// Frames (counted per sample) that no symbol covered.
    pub unsymbolized_frames: u64,
    /// User frames (counted per sample) outside every mapped file that no JIT map names:
    /// code generated at run time without a perf map, or a damaged stack.
    pub unmapped_frames: u64,
    /// First and last sample times.
    pub time_range: Option<(u64, u64)>,
    /// How stack-copy samples unwound (all zero for frame-pointer recordings).
    pub unwind: UnwindStats,
    /// Why modules' unwind sections could not be read, each naming the file.
    pub unwind_errors: Vec<String>,
}

#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct RawStack {
    space: SpaceKey,
    tid: u32,
    kernel: Vec<u64>,
    user: Vec<u64>,
    /// For each user address, the JIT symbol live there at the sample's time ([`NO_JIT`] for
    /// none); empty when no address is JIT code. Part of the key: the same address can be
    /// different functions at different times.
    jit: Vec<u32>,
}

/// No JIT symbol covers the address.
const NO_JIT: u32 = u32::MAX;

/// The address to look up for the i-th frame of a chain: return addresses point after the call,
/// so their caller's line is found one byte earlier.
fn lookup_addr(i: usize, addr: u64) -> u64 {
    if i == 0 {
        addr
    } else {
        addr.saturating_sub(1)
    }
}

/// The JIT symbol of each address of a user chain at `time` (see [`RawStack::jit`]).
/// A frame-pointer chain the kernel walked, ended at its first return address of zero. No code
/// runs at address 0 (the kernel keeps the first page unmapped): a zero return address means
/// the walk read a zeroed stack slot through a frame pointer that code without frame pointers
/// left behind, and a frame pointer that points at itself there repeats it up to the kernel's
/// depth limit (seen: 122 zeros under a C library function). The sampled address itself,
/// the chain's first entry, is kept even when it is zero: a jump to a null pointer is real.
fn fp_chain(mut chain: Vec<u64>) -> Vec<u64> {
    if let Some(end) = chain.iter().skip(1).position(|&a| a == 0) {
        chain.truncate(end + 1);
    }
    chain
}

fn jit_ids(processes: &Processes, pid: u32, user: &[u64], time: u64) -> Vec<u32> {
    if processes.jit.is_empty() {
        return Vec::new();
    }
    let ids: Vec<u32> = user
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let la = lookup_addr(i, a);
            processes.jit.id_at(pid, la, time).unwrap_or(NO_JIT)
        })
        .collect();
    if ids.iter().all(|&id| id == NO_JIT) {
        Vec::new()
    } else {
        ids
    }
}

/// One sample's stack, unwound once: what every profile that takes the sample counts. The
/// CPU, off-CPU, wakers' and an event's profiles share one unwinding of a sample they all take
/// (see [`Accumulator::push`]).
#[derive(Clone)]
pub struct Unwound {
    stack: RawStack,
    time: u64,
    cpu: u32,
    /// What unwinding this sample added to the unwinder's statistics.
    stats: UnwindStats,
}

impl Unwound {
    /// Unwinds `s`'s stack copy (or takes its frame-pointer chain) in its address space.
    pub fn of(
        s: crossprof_format::Sample,
        processes: &Processes,
        unwinder: &mut StackUnwinder<'_>,
    ) -> Unwound {
        let before = unwinder.stats;
        let copied = s.regs_mask != 0 || !s.stack.is_empty();
        let pc = if copied {
            unwinder.pc(&s)
        } else {
            s.user_chain.first().copied()
        };
        let space = processes.sample_space(s.pid, s.time, pc);
        // A stack copy is unwound here, once per sample; from then on it is a chain like any
        // frame-pointer one.
        let user = if copied {
            unwinder.user_chain(space, &s)
        } else {
            fp_chain(s.user_chain)
        };
        let jit = jit_ids(processes, space.0, &user, s.time);
        Unwound {
            stack: RawStack {
                space,
                tid: s.tid,
                kernel: s.kernel_chain,
                user,
                jit,
            },
            time: s.time,
            cpu: s.cpu,
            stats: unwinder.stats.since(&before),
        }
    }
}

/// A profile being built from samples as they stream past: samples are counted by distinct
/// unwound stack ([`Unwound`]); [`Accumulator::finish`] then resolves every distinct address
/// once. Each profile of a pass over the file has its own.
pub struct Accumulator {
    weighted: bool,
    /// Each distinct raw stack's index in `raw_counts` (count, period sum); the timeline
    /// refers to those indices until the stacks are sorted.
    raw: HashMap<RawStack, u32>,
    raw_counts: Vec<(u64, u64)>,
    timeline: Vec<SampleAt>,
    samples: u64,
    last_time: HashMap<u32, u64>,
    time_range: Option<(u64, u64)>,
    /// The unwinding statistics of the samples taken.
    stats: UnwindStats,
}

impl Accumulator {
    /// Empty; when `weighted` each sample counts its period instead of 1: the off-CPU
    /// profile is made of samples whose period is the time waited (see
    /// [`crate::analysis::off_cpu_profile`]), and its counts are nanoseconds.
    pub fn new(weighted: bool) -> Accumulator {
        Accumulator {
            weighted,
            raw: HashMap::new(),
            raw_counts: Vec::new(),
            timeline: Vec::new(),
            samples: 0,
            last_time: HashMap::new(),
            time_range: None,
            stats: UnwindStats::default(),
        }
    }

    /// Counts one unwound sample, with `period` (the sample's, or the weight this profile
    /// gives it).
    pub fn push(&mut self, u: Unwound, period: u64) {
        self.samples += 1;
        self.stats.add(&u.stats);
        self.time_range = Some(match self.time_range {
            None => (u.time, u.time),
            Some((a, b)) => (a.min(u.time), b.max(u.time)),
        });
        self.last_time.insert(u.stack.tid, u.time);
        let weight = if self.weighted { period } else { 1 };
        let next = self.raw_counts.len() as u32;
        let idx = *self.raw.entry(u.stack).or_insert(next);
        if idx == next {
            self.raw_counts.push((0, 0));
        }
        let c = &mut self.raw_counts[idx as usize];
        c.0 = c.0.saturating_add(weight);
        c.1 = c.1.saturating_add(period);
        self.timeline.push(SampleAt {
            time: u.time,
            period,
            stack: idx,
            cpu: u.cpu,
        });
    }

    /// The profile: every distinct address resolved once into frames, stacks and functions
    /// sorted so that every run gives the same ids. The unwinder's module-wide counts (unwind
    /// sections that failed, CFI entries skipped) and errors go with it.
    pub fn finish(
        self,
        processes: &Processes,
        resolver: &Resolver,
        unwinder: &StackUnwinder<'_>,
    ) -> CpuProfile {
        finish(self, processes, resolver, unwinder)
    }
}

fn finish(
    acc: Accumulator,
    processes: &Processes,
    resolver: &Resolver,
    unwinder: &StackUnwinder<'_>,
) -> CpuProfile {
    let Accumulator {
        raw,
        raw_counts,
        mut timeline,
        samples,
        last_time,
        time_range,
        stats,
        ..
    } = acc;
    // Sorted, so that frame ids (and every tie below) are the same on every run.
    let mut raw: Vec<(RawStack, u32)> = raw.into_iter().collect();
    raw.sort_unstable();

    // Every distinct placed address, resolved once.
    let mut unique: HashSet<Placed> = HashSet::new();
    for (st, _) in &raw {
        for (i, &a) in st.user.iter().enumerate() {
            if let Some(p) = processes.place(st.space, lookup_addr(i, a)) {
                unique.insert(p);
            }
        }
    }
    let mut table = FrameTable::default();
    let mut unique: Vec<Placed> = unique.into_iter().collect();
    unique.sort_unstable();
    let resolved = resolver.resolve(unique, &mut table);

    let mut stacks = Vec::with_capacity(raw.len());
    let mut unsymbolized_frames = 0u64;
    let mut unmapped_frames = 0u64;
    let mut kernel_cache: HashMap<u64, FrameId> = HashMap::new();
    // Raw index of each stack, carried through the sort below.
    let mut origin: Vec<u32> = Vec::with_capacity(raw.len());
    for (st, idx) in raw {
        let (count, period) = raw_counts[idx as usize];
        let mut frames = Vec::with_capacity(st.kernel.len() + st.user.len());
        let mut addresses = Vec::with_capacity(st.kernel.len() + st.user.len());
        for (i, &a) in st.kernel.iter().enumerate() {
            let la = lookup_addr(i, a);
            let id = *kernel_cache
                .entry(la)
                .or_insert_with(|| table.intern(resolver.kernel_frame(la)));
            frames.push(id);
            addresses.push(StackAddress {
                addr: a,
                lookup: la,
                frames: 1,
                kernel: true,
            });
        }
        for (i, &a) in st.user.iter().enumerate() {
            let la = lookup_addr(i, a);
            let before = frames.len();
            match processes.place(st.space, la).and_then(|p| resolved.get(&p)) {
                Some(ids) => frames.extend_from_slice(ids),
                // Anonymous executable memory: JIT code, named by its process's perf map or
                // jitdump as it was at the sample's time.
                None => {
                    let jit = st.jit.get(i).filter(|&&id| id != NO_JIT);
                    let frame = jit.and_then(|&id| processes.jit.frame(id, la));
                    let frame = frame.unwrap_or_else(|| {
                        unmapped_frames += count;
                        unmapped_frame(a)
                    });
                    frames.push(table.intern(frame));
                }
            }
            addresses.push(StackAddress {
                addr: a,
                lookup: la,
                frames: (frames.len() - before) as u32,
                kernel: false,
            });
        }
        unsymbolized_frames +=
            count * frames.iter().filter(|&&f| !table.get(f).symbolized).count() as u64;
        stacks.push(Stack {
            pid: st.space.0,
            tid: st.tid,
            space: st.space,
            frames,
            addresses,
            count,
            period,
        });
        origin.push(idx);
    }
    // Deterministic order: by count, then by frames.
    let mut order: Vec<usize> = (0..stacks.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&stacks[a], &stacks[b]);
        b.count
            .cmp(&a.count)
            .then_with(|| a.frames.cmp(&b.frames))
            .then(a.tid.cmp(&b.tid))
    });
    let mut final_index = vec![0u32; raw_counts.len()];
    for (new, &old) in order.iter().enumerate() {
        final_index[origin[old] as usize] = new as u32;
    }
    let mut slots: Vec<Option<Stack>> = stacks.into_iter().map(Some).collect();
    let stacks: Vec<Stack> = order.iter().filter_map(|&i| slots[i].take()).collect();
    for s in &mut timeline {
        s.stack = final_index[s.stack as usize];
    }
    timeline.sort_by_key(|s| (s.time, s.stack));

    let functions = functions(&stacks, &table);

    let mut per_thread: HashMap<(u32, u32), u64> = HashMap::new();
    for s in &stacks {
        *per_thread.entry((s.pid, s.tid)).or_default() += s.count;
    }
    let mut threads: Vec<ThreadRow> = per_thread
        .into_iter()
        .map(|((pid, tid), samples)| ThreadRow {
            pid,
            tid,
            comm: processes
                .name(tid, last_time.get(&tid).copied().unwrap_or(u64::MAX))
                .to_string(),
            samples,
        })
        .collect();
    threads.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then(a.pid.cmp(&b.pid))
            .then(a.tid.cmp(&b.tid))
    });

    CpuProfile {
        table,
        stacks,
        timeline,
        functions,
        threads,
        samples,
        unsymbolized_frames,
        unmapped_frames,
        time_range,
        unwind: UnwindStats {
            sections_failed: unwinder.stats.sections_failed,
            cfi_entries_skipped: unwinder.stats.cfi_entries_skipped,
            ..stats
        },
        unwind_errors: unwinder.section_errors().to_vec(),
    }
}

impl CpuProfile {
    /// The most common caller chains (outward from `function`, up to `depth` frames) of a function.
    pub fn callers(
        &self,
        function: &str,
        module: &str,
        depth: usize,
        limit: usize,
    ) -> Vec<(Vec<FrameId>, u64)> {
        let mut chains: HashMap<Vec<FrameId>, u64> = HashMap::new();
        for s in &self.stacks {
            let pos = s.frames.iter().position(|&id| {
                let f = self.table.get(id);
                f.function == function && f.module == module
            });
            if let Some(pos) = pos {
                let chain = s.frames[pos..]
                    .iter()
                    .take(depth)
                    .copied()
                    .collect::<Vec<_>>();
                *chains.entry(chain).or_default() += s.count;
            }
        }
        let mut v: Vec<_> = chains.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v.truncate(limit);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::fp_chain;

    #[test]
    fn a_frame_pointer_chain_ends_at_its_first_zero_return_address() {
        let mut looped = vec![0x40_1000, 0x7f00_1234];
        looped.extend([0; 122]);
        assert_eq!(fp_chain(looped), [0x40_1000, 0x7f00_1234]);
        assert_eq!(fp_chain(vec![0x40_1000, 0, 0x40_2000]), [0x40_1000]);
        // A sample taken at address 0 (a call through a null pointer) keeps that frame.
        assert_eq!(fp_chain(vec![0, 0x40_1000]), [0, 0x40_1000]);
        assert_eq!(fp_chain(Vec::new()), Vec::<u64>::new());
    }
}
