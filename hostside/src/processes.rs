//! Who ran and what was mapped where, over time: the address spaces that raw sample addresses
//! are interpreted in.
//!
//! Built in a first pass over the recording, before any sample is looked at, so that a sample
//! can be placed in the right address space even when the kernel wrote it (from another CPU's
//! ring) before the exec or mmap that explains it. An address space is identified by the process
//! and its *generation*: the number of execs the process had done when the sample was taken.
//! A forked child that has not exec'd yet shares its parent's mappings.

use std::collections::HashMap;

use crossprof_format::{Blob, Record};

use crate::jit::JitSymbols;

use crate::recording::Pass;

/// A module (mapped file or in-memory image) as the board identified it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModuleKey {
    /// Path on the board (`[vdso]` for the vDSO).
    pub path: String,
    /// GNU build-id, empty when none was recorded.
    pub build_id: Vec<u8>,
}

/// Index of a module in [`Processes::modules`].
pub type ModuleIdx = usize;

/// One executable mapping.
#[derive(Debug, Clone)]
struct Mapping {
    start: u64,
    end: u64,
    pgoff: u64,
    module: ModuleIdx,
}

/// An executable mapping as seen from outside this module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappingView {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// File offset mapped at `start`.
    pub pgoff: u64,
    /// The module mapped.
    pub module: ModuleIdx,
}

/// Where an address falls: the module, and the offset in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Placed {
    /// The module.
    pub module: ModuleIdx,
    /// Offset of the address in the module's file (for the vDSO: in its image).
    pub file_offset: u64,
}

/// An address-space generation of one process.
pub type SpaceKey = (u32, u32);

/// Task names over time: each task's COMM changes and who created it, so that a name can be
/// asked for at any time (see [`ProcessNames::at`]). Plain data, cloned into the
/// [`crate::output::context::ReportContext`] so that outputs need not hold [`Processes`].
#[derive(Debug, Clone, Default)]
pub struct ProcessNames {
    /// Each task's names with the time each was set, in time order.
    names: HashMap<u32, Vec<(u64, String)>>,
    /// Who created each task (thread or process) and when: a new task carries its creator's
    /// name until it execs or names itself, and the kernel writes no COMM record for that.
    creator: HashMap<u32, (u32, u64)>,
}

impl ProcessNames {
    /// The name of task `tid` when the recording ended, `?` when the recording never named it.
    pub fn get(&self, tid: u32) -> &str {
        self.at(tid, u64::MAX)
    }

    /// The name of thread `tid` at `time`: the latest COMM before it; before the first one,
    /// the name it inherited from the thread that created it (as the kernel does: an unnamed
    /// thread shows its process's command, like perf); else the first known name, else `?`.
    pub fn at(&self, tid: u32, time: u64) -> &str {
        let (mut tid, mut time) = (tid, time);
        // Bounded: a creator chain in a hostile recording may loop.
        for _ in 0..64 {
            let own = self.names.get(&tid).filter(|v| !v.is_empty());
            if let Some(v) = own {
                let i = v.partition_point(|(t, _)| *t <= time);
                if i > 0 {
                    return &v[i - 1].1;
                }
            }
            match self.creator.get(&tid) {
                Some(&(creator, created)) => (tid, time) = (creator, created),
                None => return own.map_or("?", |v| v[0].1.as_str()),
            }
        }
        "?"
    }
}

/// The executable mappings of some address spaces with the modules they map: what an export
/// needs to place a stack's addresses in their files (pprof's mappings), without
/// [`Processes`]. Built by [`Processes::mappings_of`] for the spaces a profile uses.
#[derive(Debug, Clone, Default)]
pub struct Mappings {
    /// Every module of the recording, indexed by [`MappingView::module`].
    pub modules: Vec<ModuleKey>,
    spaces: HashMap<SpaceKey, Vec<MappingView>>,
}

impl Mappings {
    /// The executable mappings of `space` (empty when it was not asked for or has none).
    pub fn of(&self, space: SpaceKey) -> &[MappingView] {
        self.spaces.get(&space).map_or(&[], |v| v.as_slice())
    }

    /// The module of `m`, `None` for an index this table does not hold.
    pub fn module(&self, m: &MappingView) -> Option<&ModuleKey> {
        self.modules.get(m.module)
    }
}

/// Everything about tasks and mappings in a recording.
#[derive(Default)]
pub struct Processes {
    /// Every distinct module, in order of first appearance.
    pub modules: Vec<ModuleKey>,
    module_index: HashMap<ModuleKey, ModuleIdx>,
    spaces: HashMap<SpaceKey, Vec<Mapping>>,
    /// Anonymous executable mappings (JIT code), per address space.
    anonymous_code: HashMap<SpaceKey, Vec<(u64, u64)>>,
    execs: HashMap<u32, Vec<u64>>,
    parent: HashMap<u32, (u32, u64)>,
    names: ProcessNames,
    /// The vDSO image copied from the board, if any.
    pub vdso: Option<Blob>,
    /// /proc/kallsyms text from the board, if any.
    pub kallsyms: Option<Vec<u8>>,
    /// /proc/modules text from the board, if any: the loaded modules' address ranges.
    pub kernel_modules: Option<Vec<u8>>,
    /// Mmap records seen.
    pub mmap_records: u64,
    /// Names of JIT-compiled code, from the perf maps and jitdumps `rec` carried.
    pub jit: JitSymbols,
}

impl Processes {
    /// Builds the model from one pass over the records (samples are ignored).
    pub fn build(records: Pass<'_>) -> Processes {
        let mut p = Processes::default();
        let mut mmaps = Vec::new();
        records(&mut |r| match r {
            Record::Comm(c) => {
                if c.exec {
                    p.execs.entry(c.pid).or_default().push(c.time);
                }
                p.names
                    .names
                    .entry(c.tid)
                    .or_default()
                    .push((c.time, c.comm));
            }
            Record::Fork(t) => {
                // A new process (not a thread): it runs its parent's image until it execs.
                if t.pid != t.ppid {
                    p.parent.entry(t.pid).or_insert((t.ppid, t.time));
                }
                if t.tid != t.ptid {
                    p.names.creator.entry(t.tid).or_insert((t.ptid, t.time));
                }
            }
            Record::Mmap(m) => mmaps.push(m),
            Record::Blob(b) if b.name == "[vdso]" => p.vdso = Some(b),
            Record::Blob(b) if b.name == "kallsyms" => p.kallsyms = Some(b.data),
            Record::Blob(b) if b.name == "modules" => p.kernel_modules = Some(b.data),
            Record::JitMap(j) if j.kind == "perf-map" => p.jit.add_perf_map(j.pid, &j.data),
            Record::JitMap(j) if j.kind == "jitdump" => p.jit.add_jitdump_piece(&j),
            _ => {}
        });
        p.jit.finish();
        for v in p.execs.values_mut() {
            v.sort_unstable();
        }
        for v in p.names.names.values_mut() {
            v.sort_by_key(|(t, _)| *t);
        }
        p.mmap_records = mmaps.len() as u64;
        for m in mmaps {
            // Data-only mappings never hold code; anonymous memory has no file to symbolize
            // (JIT code is named by crate::jit).
            let exec = m.prot & 4 != 0 || m.prot == 0;
            let named = !m.path.is_empty()
                && (!m.path.starts_with('[') || m.path == "[vdso]")
                && !m.path.starts_with("//anon");
            if exec && !named && m.len > 0 && (m.path.is_empty() || m.path.starts_with("//anon")) {
                let space = (m.pid, p.generation(m.pid, m.time));
                let code = p.anonymous_code.entry(space).or_default();
                code.push((m.start, m.start.saturating_add(m.len)));
            }
            // A jitdump's marker mapping is no module (hostside::jit reads the dump itself).
            if !exec || !named || m.len == 0 || crossprof_format::is_jitdump(&m.path) {
                continue;
            }
            let key = ModuleKey {
                path: m.path,
                build_id: m.build_id,
            };
            let module = match p.module_index.get(&key) {
                Some(&i) => i,
                None => {
                    p.modules.push(key.clone());
                    p.module_index.insert(key, p.modules.len() - 1);
                    p.modules.len() - 1
                }
            };
            let space = (m.pid, p.generation(m.pid, m.time));
            p.spaces.entry(space).or_default().push(Mapping {
                start: m.start,
                end: m.start.saturating_add(m.len),
                pgoff: m.pgoff,
                module,
            });
        }
        p
    }

    /// The times `pid` exec'd, in order: its generation at `t` is the number of them `<= t`.
    pub fn exec_times(&self, pid: u32) -> &[u64] {
        self.execs.get(&pid).map_or(&[], |v| v.as_slice())
    }

    /// The exec generation of `pid` at `time`.
    pub fn generation(&self, pid: u32, time: u64) -> u32 {
        match self.execs.get(&pid) {
            Some(times) => times.partition_point(|&t| t <= time) as u32,
            None => 0,
        }
    }

    /// The address space a sample of `pid` at `time` with user instruction pointer `pc` was
    /// taken in: the exec generation at that time, except for a sample taken inside `execve`
    /// after the new image replaced the old one (the kernel has announced the exec) but
    /// while the user registers still are the old image's. Its user frames belong to the
    /// previous generation, where its instruction pointer is mapped.
    pub fn sample_space(&self, pid: u32, time: u64, pc: Option<u64>) -> SpaceKey {
        let space = (pid, self.generation(pid, time));
        match pc {
            Some(pc) if space.1 > 0 && self.place(space, pc).is_none() => {
                let before = (pid, space.1 - 1);
                if self.place(before, pc).is_some() {
                    before
                } else {
                    space
                }
            }
            _ => space,
        }
    }

    /// Finds the mapping that holds `addr` in the address space `space`, following a
    /// not-yet-exec'd child to its parent's mappings.
    pub fn place(&self, space: SpaceKey, addr: u64) -> Option<Placed> {
        let (mut pid, mut gen) = space;
        for _ in 0..64 {
            if let Some(maps) = self.spaces.get(&(pid, gen)) {
                // The latest mapping wins where a region was mapped again.
                if let Some(m) = maps.iter().rev().find(|m| m.start <= addr && addr < m.end) {
                    return Some(Placed {
                        module: m.module,
                        file_offset: addr - m.start + m.pgoff,
                    });
                }
            }
            if gen != 0 {
                return None;
            }
            // Before its first exec, a process runs its parent's image.
            let (parent, fork_time) = *self.parent.get(&pid)?;
            pid = parent;
            gen = self.generation(parent, fork_time);
        }
        None
    }

    /// The process `pid` was forked from, when the recording saw the fork.
    pub fn parent_of(&self, pid: u32) -> Option<u32> {
        self.parent.get(&pid).map(|&(ppid, _)| ppid)
    }

    /// The executable mappings of an address space, following a not-yet-exec'd child to its
    /// parent's image like [`Processes::place`]. Stack-copy unwinding builds its module list
    /// from these.
    pub fn mappings(&self, space: SpaceKey) -> Vec<MappingView> {
        let (mut pid, mut gen) = space;
        for _ in 0..64 {
            if let Some(maps) = self.spaces.get(&(pid, gen)) {
                return maps
                    .iter()
                    .map(|m| MappingView {
                        start: m.start,
                        end: m.end,
                        pgoff: m.pgoff,
                        module: m.module,
                    })
                    .collect();
            }
            if gen != 0 {
                return Vec::new();
            }
            let Some(&(parent, fork_time)) = self.parent.get(&pid) else {
                return Vec::new();
            };
            pid = parent;
            gen = self.generation(parent, fork_time);
        }
        Vec::new()
    }

    /// The anonymous executable mappings (code a JIT generated) of address space `space`.
    pub fn anonymous_code(&self, space: SpaceKey) -> &[(u64, u64)] {
        self.anonymous_code
            .get(&space)
            .map_or(&[], |v| v.as_slice())
    }

    /// The executable mappings of each of `spaces`, for outputs that place addresses in their
    /// files without holding the whole model (see [`Processes::mappings`]).
    pub fn mappings_of(&self, spaces: impl IntoIterator<Item = SpaceKey>) -> Mappings {
        let mut m = Mappings {
            modules: self.modules.clone(),
            spaces: HashMap::new(),
        };
        for space in spaces {
            m.spaces
                .entry(space)
                .or_insert_with(|| self.mappings(space));
        }
        m
    }

    /// Task names over time, for outputs that label stacks by task without holding the whole
    /// model.
    pub fn final_names(&self) -> ProcessNames {
        self.names.clone()
    }

    /// The name of thread `tid` at `time` (see [`ProcessNames::at`]).
    pub fn name(&self, tid: u32, time: u64) -> &str {
        self.names.at(tid, time)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossprof_format::{Comm, Task};

    fn build(records: Vec<Record>) -> Processes {
        Processes::build(&mut |f: &mut dyn FnMut(Record)| {
            for r in records.clone() {
                f(r)
            }
        })
    }

    fn comm(time: u64, pid: u32, tid: u32, name: &str) -> Record {
        Record::Comm(Comm {
            time,
            pid,
            tid,
            comm: name.into(),
            exec: pid == tid,
        })
    }

    fn fork(time: u64, pid: u32, tid: u32, ppid: u32, ptid: u32) -> Record {
        Record::Fork(Task {
            time,
            pid,
            tid,
            ppid,
            ptid,
        })
    }

    #[test]
    fn an_unnamed_thread_shows_its_creators_name_until_it_names_itself() {
        let p = build(vec![
            comm(10, 100, 100, "app"),
            fork(20, 100, 101, 100, 100),
            // A thread created by that thread, before and after the first renames itself.
            fork(30, 100, 102, 100, 101),
            comm(40, 100, 101, "worker"),
            fork(50, 100, 103, 100, 101),
        ]);
        assert_eq!(p.name(101, 25), "app");
        assert_eq!(p.name(101, 45), "worker");
        assert_eq!(p.name(102, 60), "app");
        assert_eq!(p.name(103, 60), "worker");
        assert_eq!(p.name(100, 60), "app");
        assert_eq!(p.name(999, 60), "?");
    }

    fn mmap(time: u64, pid: u32, start: u64, path: &str) -> Record {
        Record::Mmap(crossprof_format::Mmap {
            time,
            pid,
            tid: pid,
            start,
            len: 0x1000,
            pgoff: 0,
            path: path.into(),
            build_id: Vec::new(),
            prot: 5,
            inode: 0,
            file_size: 0,
            mtime: 0,
            fingerprint: 0,
        })
    }

    /// A sample inside execve after the exec was announced still has the old image's user
    /// registers (seen on the real-world suite: a static launcher exec'ing ninja).
    #[test]
    fn a_sample_inside_execve_belongs_to_the_image_its_pc_is_in() {
        let p = build(vec![
            comm(10, 7, 7, "launcher"),
            mmap(11, 7, 0x40_1000, "/launcher"),
            comm(20, 7, 7, "app"),
            mmap(21, 7, 0x5555_0000, "/app"),
        ]);
        assert_eq!(p.sample_space(7, 25, Some(0x40_1010)), (7, 1));
        assert_eq!(p.sample_space(7, 25, Some(0x5555_0010)), (7, 2));
        // Unmapped in both: the generation of its time.
        assert_eq!(p.sample_space(7, 25, Some(0x10)), (7, 2));
        assert_eq!(p.sample_space(7, 25, None), (7, 2));
        assert_eq!(p.sample_space(7, 15, Some(0x40_1010)), (7, 1));
    }

    #[test]
    fn a_creator_loop_in_a_hostile_recording_ends() {
        let p = build(vec![fork(1, 5, 6, 5, 7), fork(1, 5, 7, 5, 6)]);
        assert_eq!(p.name(6, 2), "?");
    }
}
