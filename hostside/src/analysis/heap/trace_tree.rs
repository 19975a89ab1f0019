//! The allocation stacks of a heap recording, interned into one canonical trace tree.
//!
//! The board writes each distinct stack once, as a chain of [`StackNode`]s (`id → parent, ip`)
//! per process, and an allocation names the innermost node. The ids are the board's: they are
//! per process, a forked child may keep using its parent's, an exec'd image starts a new tree
//! that reuses them, and two ids may describe the same chain. This module turns every
//! `(address space, stack id)` into a [`TraceId`] of a host-side tree in which each distinct
//! chain of addresses in an address space exists exactly once, so that "same stack" means "same
//! id" for the counting rules (heaptrack compares stacks by id).
//!
//! Input is hostile: an unknown id ends the chain there, a cycle or an absurdly deep chain is cut
//! at [`MAX_DEPTH`] frames, and each case is counted in [`TreeAnomalies`] instead of panicking.
//! Memory grows with the number of distinct nodes, never with the number of allocations.

use crossprof_format::StackNode;
use crossprof_heap_wire::cut_short;
use rustc_hash::FxHashMap as HashMap;

use crate::processes::{Processes, SpaceKey};

/// Id of a canonical stack (its innermost node); [`EMPTY_TRACE`] is the empty stack.
pub type TraceId = u32;

/// The empty stack: an allocation whose stack id was 0 or unknown.
pub const EMPTY_TRACE: TraceId = 0;

/// Longest chain followed; deeper chains (or cycles) are cut here and counted.
pub const MAX_DEPTH: usize = 1024;

/// Board ids below this are remembered in an array for the last address space.
const MAX_RECENT_ID: u64 = 1 << 20;

/// How many parent processes a forked child's stack ids are looked up in.
const MAX_FORK_DEPTH: usize = 16;

/// One node of the canonical tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceNode {
    /// The next node outward, [`EMPTY_TRACE`] at the root.
    pub parent: TraceId,
    /// The return address as recorded (look it up at `ip - 1`).
    pub ip: u64,
    /// The address space `ip` belongs to.
    pub space: SpaceKey,
    /// Why the board's unwinder stopped at this node, the outermost of a chain it cut short:
    /// the `crossprof_heap_wire::cut_short` marker the interposer recorded past it; `None`
    /// everywhere else. Part of the node: a cut chain is not a complete one.
    pub cut: Option<u64>,
}

/// Turns the chain the board recorded for a stack into the stack it stands for: for ARMv7's
/// sparse stacks (registers and stack words, `crossprof_heap_wire::sparse`), an unwind on
/// the host. Asked once per distinct board chain of an address space.
pub trait Expand {
    /// The return addresses (innermost first) of board chain `chain` (innermost first) of
    /// `space`, whose `cut` marker (if any) was removed, and the marker of why the stack is
    /// incomplete, if it is.
    fn expand(
        &mut self,
        space: SpaceKey,
        chain: &[u64],
        cut: Option<u64>,
    ) -> (Vec<u64>, Option<u64>);
}

/// Damage seen in the board's trace tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TreeAnomalies {
    /// Chains that referenced a node id that was never defined (cut there).
    pub unknown_ids: u64,
    /// Chains cut at [`MAX_DEPTH`] frames (a cycle, or a runaway recursion).
    pub truncated: u64,
    /// Node ids defined again with a different parent or address (a new image after exec).
    pub redefined: u64,
}

/// The canonical tree plus the board's raw nodes it is built from.
#[derive(Default)]
pub struct TraceTree {
    /// Board nodes: `(pid, id) → (parent, ip)`.
    raw: HashMap<(u32, u64), (u64, u64)>,
    /// Canonicalized board ids per process: `pid → ((generation, id) → trace)`.
    cache: HashMap<u32, HashMap<(u32, u64), TraceId>>,
    /// The same for the last address space asked about, indexed by board id (ids are small
    /// dense integers; 0 = not yet canonicalized): one array read per event instead of two
    /// hash lookups.
    recent: Option<(SpaceKey, Vec<TraceId>)>,
    /// Canonical nodes; `TraceId` n is `nodes[n - 1]`.
    nodes: Vec<TraceNode>,
    index: HashMap<TraceNode, TraceId>,
    /// What went wrong.
    pub anomalies: TreeAnomalies,
}

impl TraceTree {
    /// Records one board node. A redefinition (same id, different content) replaces the old
    /// node and forgets what was canonicalized for that process, since its ids now mean
    /// something else.
    pub fn add_node(&mut self, n: &StackNode) {
        if n.id == 0 {
            return;
        }
        let value = (n.parent, n.ip);
        if let Some(old) = self.raw.insert((n.pid, n.id), value) {
            if old != value {
                self.anomalies.redefined += 1;
                self.cache.remove(&n.pid);
                if self.recent.as_ref().is_some_and(|(s, _)| s.0 == n.pid) {
                    self.recent = None;
                }
            }
        }
    }

    /// The canonical trace of board stack `id` as used by an event in `space`. Cost: a hash
    /// lookup once the id has been seen; the first time, one step per frame.
    pub fn trace(&mut self, space: SpaceKey, id: u64, processes: &Processes) -> TraceId {
        self.trace_with(space, id, processes, None)
    }

    /// [`TraceTree::trace`] of a recording whose chains `expand` turns into stacks (each
    /// distinct chain once).
    pub fn trace_with(
        &mut self,
        space: SpaceKey,
        id: u64,
        processes: &Processes,
        expand: Option<&mut dyn Expand>,
    ) -> TraceId {
        if id == 0 {
            return EMPTY_TRACE;
        }
        if let Some((s, v)) = &self.recent {
            if *s == space {
                if let Some(&t) = v.get(id as usize).filter(|&&t| t != EMPTY_TRACE) {
                    return t;
                }
            }
        }
        let t = self.trace_slow(space, id, processes, expand);
        if t != EMPTY_TRACE && id < MAX_RECENT_ID {
            if self.recent.as_ref().is_none_or(|(s, _)| *s != space) {
                self.recent = Some((space, Vec::new()));
            }
            if let Some((_, v)) = &mut self.recent {
                if v.len() <= id as usize {
                    v.resize(id as usize + 1, EMPTY_TRACE);
                }
                v[id as usize] = t;
            }
        }
        t
    }

    fn trace_slow(
        &mut self,
        space: SpaceKey,
        id: u64,
        processes: &Processes,
        expand: Option<&mut dyn Expand>,
    ) -> TraceId {
        let (pid, generation) = space;
        if let Some(&t) = self.cache.get(&pid).and_then(|c| c.get(&(generation, id))) {
            return t;
        }
        let mut ips = Vec::new();
        let mut cur = id;
        let mut base = EMPTY_TRACE;
        while cur != 0 {
            // A chain to expand is taken whole: its outer part alone means nothing.
            let cached = expand
                .is_none()
                .then(|| self.cache.get(&pid).and_then(|c| c.get(&(generation, cur))))
                .flatten();
            if let Some(&t) = cached {
                base = t;
                break;
            }
            if ips.len() >= MAX_DEPTH {
                self.anomalies.truncated += 1;
                break;
            }
            match self.lookup(pid, cur, processes) {
                Some((parent, ip)) => {
                    ips.push(ip);
                    cur = parent;
                }
                None => {
                    self.anomalies.unknown_ids += 1;
                    break;
                }
            }
        }
        // The interposer's marker of a stack cut short, past its outermost frame.
        let mut cut = None;
        if cur == 0 && base == EMPTY_TRACE {
            if let Some(&marker) = ips.last().filter(|&&ip| cut_short::name(ip).is_some()) {
                ips.pop();
                cut = Some(marker);
            }
        }
        if let Some(expand) = expand {
            (ips, cut) = expand.expand(space, &ips, cut);
        }
        let mut t = base;
        for &ip in ips.iter().rev() {
            t = self.intern(TraceNode {
                parent: t,
                ip,
                space,
                cut: cut.take(),
            });
        }
        self.cache
            .entry(pid)
            .or_default()
            .insert((generation, id), t);
        t
    }

    /// A board node of `pid`, or of the process it was forked from (which shares its ids
    /// until it execs).
    fn lookup(&self, mut pid: u32, id: u64, processes: &Processes) -> Option<(u64, u64)> {
        for _ in 0..MAX_FORK_DEPTH {
            if let Some(&v) = self.raw.get(&(pid, id)) {
                return Some(v);
            }
            pid = processes.parent_of(pid)?;
        }
        None
    }

    fn intern(&mut self, node: TraceNode) -> TraceId {
        if let Some(&t) = self.index.get(&node) {
            return t;
        }
        self.nodes.push(node);
        let t = self.nodes.len() as TraceId;
        self.index.insert(node, t);
        t
    }

    /// The node behind a trace id (`None` for [`EMPTY_TRACE`] or an id not from this tree).
    pub fn node(&self, t: TraceId) -> Option<&TraceNode> {
        (t as usize).checked_sub(1).and_then(|i| self.nodes.get(i))
    }

    /// Every canonical node, in id order (id = index + 1).
    pub fn nodes(&self) -> &[TraceNode] {
        &self.nodes
    }

    /// Why the board's unwinder cut the stack of trace `t` short, if it did (its marker, see
    /// [`TraceNode::cut`]), and how many frames the stack has.
    pub fn cut_short(&self, t: TraceId) -> (Option<u64>, usize) {
        let mut depth = 0;
        let mut cut = None;
        for (_, n) in self.chain(t) {
            depth += 1;
            cut = n.cut;
        }
        (cut, depth)
    }

    /// The chain of a trace, innermost first. Finite: parents always have smaller ids.
    pub fn chain(&self, t: TraceId) -> impl Iterator<Item = (TraceId, &TraceNode)> + '_ {
        let mut cur = t;
        std::iter::from_fn(move || {
            let n = self.node(cur)?;
            let id = cur;
            cur = n.parent;
            Some((id, n))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(pid: u32, id: u64, parent: u64, ip: u64) -> StackNode {
        StackNode {
            pid,
            id,
            parent,
            ip,
        }
    }

    fn ips(tree: &TraceTree, t: TraceId) -> Vec<u64> {
        tree.chain(t).map(|(_, n)| n.ip).collect()
    }

    #[test]
    fn same_chain_under_different_ids_is_one_trace() {
        let p = Processes::default();
        let mut tree = TraceTree::default();
        for n in [
            node(1, 1, 0, 0x100),
            node(1, 2, 1, 0x200),
            node(1, 7, 0, 0x100),
            node(1, 8, 7, 0x200),
        ] {
            tree.add_node(&n);
        }
        let a = tree.trace((1, 0), 2, &p);
        let b = tree.trace((1, 0), 8, &p);
        assert_eq!(a, b);
        assert_eq!(ips(&tree, a), vec![0x200, 0x100]);
        assert_eq!(tree.trace((1, 0), 1, &p), tree.node(a).unwrap().parent);
    }

    #[test]
    fn the_interposer_s_marker_names_why_a_stack_is_cut_and_is_no_frame() {
        let p = Processes::default();
        let mut tree = TraceTree::default();
        // A stack cut short (marker at its root) and the same frames complete.
        for n in [
            node(1, 1, 0, cut_short::BAD_FRAME),
            node(1, 2, 1, 0x100),
            node(1, 3, 2, 0x200),
            node(1, 4, 0, 0x100),
            node(1, 5, 4, 0x200),
        ] {
            tree.add_node(&n);
        }
        let cut = tree.trace((1, 0), 3, &p);
        let whole = tree.trace((1, 0), 5, &p);
        assert_eq!(ips(&tree, cut), vec![0x200, 0x100]);
        assert_eq!(tree.cut_short(cut), (Some(cut_short::BAD_FRAME), 2));
        assert_eq!(tree.cut_short(whole), (None, 2));
        assert_ne!(cut, whole);
        // A marker that is not at the root is an address like any other.
        tree.add_node(&node(1, 6, 4, cut_short::TOO_DEEP));
        let t = tree.trace((1, 0), 6, &p);
        assert_eq!(tree.cut_short(t), (None, 2));
    }

    #[test]
    fn processes_do_not_share_traces() {
        let p = Processes::default();
        let mut tree = TraceTree::default();
        tree.add_node(&node(1, 1, 0, 0x100));
        tree.add_node(&node(2, 1, 0, 0x100));
        assert_ne!(tree.trace((1, 0), 1, &p), tree.trace((2, 0), 1, &p));
    }

    #[test]
    fn unknown_ids_and_cycles_are_cut_and_counted() {
        let p = Processes::default();
        let mut tree = TraceTree::default();
        assert_eq!(tree.trace((1, 0), 42, &p), EMPTY_TRACE);
        assert_eq!(tree.anomalies.unknown_ids, 1);
        // 5 → 6 → 5 → ...
        tree.add_node(&node(1, 5, 6, 0x500));
        tree.add_node(&node(1, 6, 5, 0x600));
        let t = tree.trace((1, 0), 5, &p);
        assert_eq!(ips(&tree, t).len(), MAX_DEPTH);
        assert_eq!(tree.anomalies.truncated, 1);
        // A parent that is missing ends the chain there.
        tree.add_node(&node(1, 9, 77, 0x900));
        let t = tree.trace((1, 0), 9, &p);
        assert_eq!(ips(&tree, t), vec![0x900]);
        // Id 0 and self-loops.
        tree.add_node(&node(1, 0, 0, 0x1));
        tree.add_node(&node(1, 10, 10, 0xa));
        let t = tree.trace((1, 0), 10, &p);
        assert_eq!(ips(&tree, t).len(), MAX_DEPTH);
    }

    #[test]
    fn redefinition_after_exec_takes_effect() {
        let p = Processes::default();
        let mut tree = TraceTree::default();
        tree.add_node(&node(1, 1, 0, 0x100));
        let a = tree.trace((1, 0), 1, &p);
        tree.add_node(&node(1, 1, 0, 0x999));
        let b = tree.trace((1, 1), 1, &p);
        assert_ne!(a, b);
        assert_eq!(ips(&tree, b), vec![0x999]);
        assert_eq!(tree.anomalies.redefined, 1);
        // Defining the same content again is not a redefinition.
        tree.add_node(&node(1, 1, 0, 0x999));
        assert_eq!(tree.anomalies.redefined, 1);
    }

    /// Turns every chain into two frames made of its entry count and its first entry, and
    /// reports it cut short when the board cut it.
    struct Double(usize);

    impl Expand for Double {
        fn expand(
            &mut self,
            _: SpaceKey,
            chain: &[u64],
            cut: Option<u64>,
        ) -> (Vec<u64>, Option<u64>) {
            self.0 += 1;
            (vec![chain[0], chain.len() as u64], cut)
        }
    }

    #[test]
    fn an_expanded_chain_is_taken_whole_once_and_keeps_its_cut() {
        let p = Processes::default();
        let mut tree = TraceTree::default();
        for n in [
            node(1, 1, 0, cut_short::TOO_DEEP),
            node(1, 2, 1, 0x30),
            node(1, 3, 2, 0x20),
            node(1, 4, 3, 0x10),
            node(1, 5, 2, 0x11),
        ] {
            tree.add_node(&n);
        }
        let mut x = Double(0);
        let outer = tree.trace_with((1, 0), 3, &p, Some(&mut x));
        let a = tree.trace_with((1, 0), 4, &p, Some(&mut x));
        let b = tree.trace_with((1, 0), 5, &p, Some(&mut x));
        // Asked again: the tree remembers, the expander is not asked.
        assert_eq!(tree.trace_with((1, 0), 4, &p, Some(&mut x)), a);
        assert_eq!(x.0, 3);
        // Each chain whole, its marker taken off before and given back after.
        assert_eq!(ips(&tree, outer), [0x20, 2]);
        assert_eq!(ips(&tree, a), [0x10, 3]);
        assert_eq!(ips(&tree, b), [0x11, 2]);
        assert_eq!(tree.cut_short(a), (Some(cut_short::TOO_DEEP), 2));
    }
}
