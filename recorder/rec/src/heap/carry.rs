//! What a `--max-size` segment must carry for the heap events after it to read alone: the
//! trace-tree nodes each process's interposer sent in earlier segments (it sends a node once,
//! so later allocations refer to nodes defined long ago). The live blocks themselves are
//! carried by the frame writer, which tracks them anyway (see `FrameWriter::carry_heap`).
//!
//! Memory: 24 bytes per node kept, at most [`MAX_NODES`] nodes in all (24 MiB); a process's
//! nodes are dropped when its image is gone (exec or exit). The interposer's own trie is
//! bounded ([`MAX_NODES`] is a quarter of its largest table); nodes past the bound are not
//! carried, and counted as lost (`Lost` kind [`LOST_KIND`]): allocations of the next segments
//! that refer to them show an unknown stack.

use std::collections::HashMap;

use crossprof_format::StackNode;

/// The most trace-tree nodes kept to carry, all processes together.
pub const MAX_NODES: usize = 1 << 20;

/// `Lost` kind of nodes not kept to carry (a running total, written into each new segment).
pub const LOST_KIND: &str = crossprof_format::Lost::HEAP_NODE_NOT_CARRIED;

/// `Lost` kind of live blocks not carried into a new segment because rec had stopped
/// tracking them (`--heap-max-live`): an upper bound, a running total like [`LOST_KIND`].
pub const UNTRACKED_KIND: &str = crossprof_format::Lost::HEAP_BLOCK_NOT_CARRIED;

/// The nodes to write again at the start of each segment.
#[derive(Default)]
pub struct Carry {
    nodes: HashMap<u32, Vec<(u64, u64, u64)>>,
    len: usize,
    /// Nodes not kept (past [`MAX_NODES`]), since the recording began.
    pub dropped: u64,
}

impl Carry {
    /// Keeps node `n` to carry into the next segments.
    pub fn note(&mut self, n: &StackNode) {
        if self.len >= MAX_NODES {
            self.dropped += 1;
            return;
        }
        self.len += 1;
        self.nodes
            .entry(n.pid)
            .or_default()
            .push((n.id, n.parent, n.ip));
    }

    /// The image of `pid` is gone: its nodes are never referred to again.
    pub fn forget(&mut self, pid: u32) {
        if let Some(v) = self.nodes.remove(&pid) {
            self.len -= v.len();
        }
    }

    /// Every node kept, in the order they came (parents before children), per process.
    pub fn nodes(&self) -> impl Iterator<Item = StackNode> + '_ {
        self.nodes.iter().flat_map(|(&pid, v)| {
            v.iter().map(move |&(id, parent, ip)| StackNode {
                pid,
                id,
                parent,
                ip,
            })
        })
    }
}
