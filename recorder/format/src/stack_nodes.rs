//! Trace-tree nodes stored compactly (format version 5 on): a run of one process's nodes with
//! consecutive ids is one `STACK_NODES` record, each node after the first written as how far
//! back its parent is and its instruction pointer. Readers hand the nodes back one by one as
//! [`StackNode`] records, in the same order, so nothing above this crate sees the difference.
//!
//! Why: the board interns each new stack as a chain of new nodes, numbered in order, each the
//! parent of the next. Written as whole records (pid, id, parent, ip), every node carried two
//! numbers that differ from all others, so a stack that repeats another's frames beyond one
//! that differs (common on ARMv7, whose sparse chains fork at any stale stack word, see
//! `crossprof_heap_wire::sparse`) repeated none of its bytes, and zstd could not find it. With
//! the id implied and the parent as a distance (1 for the node before), a repeated run of
//! frames is a repeated run of bytes. Measured on the ARMv7 board's Lua run
//! (`bench/RESULTS.md`): its 40,515 nodes took 192 KB of the file, now 15 KB.
//!
//! Payload: pid, the first node's id, then per node the zig-zag `id - parent` and the ip.
//! A node's parent is 0 (a root frame) when the distance equals its id.

use crate::codec::{Dec, DecodeError, Enc};
use crate::record::{encode_with, tag, StackNode};

/// Nodes per record at most: keeps a record's length small (a reader decodes them lazily, so
/// this bounds nothing on its side).
const MAX_RUN: u64 = 4096;

/// The nodes not yet written: one process's, with consecutive ids.
#[derive(Default)]
pub(crate) struct NodeRun {
    /// Process, first id and id of the next node the run can take (their difference is the
    /// run's length); `None` when empty.
    open: Option<(u32, u64, u64)>,
    /// The encoded nodes.
    body: Vec<u8>,
}

impl NodeRun {
    /// Adds `n`, first writing the run into `out` (see [`NodeRun::append_record`]) when `n`
    /// cannot continue it. Returns whether a record was written.
    pub(crate) fn add(&mut self, n: &StackNode, out: &mut Vec<u8>) -> bool {
        let continues = matches!(self.open, Some((pid, first, next))
            if pid == n.pid && next == n.id && next.wrapping_sub(first) < MAX_RUN);
        let wrote = !continues && self.append_record(out);
        let (pid, first, _) = self.open.unwrap_or((n.pid, n.id, n.id));
        self.open = Some((pid, first, n.id.wrapping_add(1)));
        let mut e = Enc::new(&mut self.body);
        e.i64(n.id.wrapping_sub(n.parent) as i64);
        e.u64(n.ip);
        wrote
    }

    /// Writes the run into `out` as one record and empties it; false when it was empty.
    pub(crate) fn append_record(&mut self, out: &mut Vec<u8>) -> bool {
        let Some((pid, first, _)) = self.open.take() else {
            return false;
        };
        encode_with(out, |e| {
            e.u64(pid.into());
            e.u64(first);
            e.raw(&self.body);
            tag::STACK_NODES
        });
        self.body.clear();
        true
    }
}

/// Where the `STACK_NODES` record being read stands: its nodes at `frame[pos..end]`.
#[derive(Clone, Copy)]
pub(crate) struct NodeCursor {
    pos: usize,
    end: usize,
    pid: u32,
    next_id: u64,
}

impl NodeCursor {
    /// The cursor over a record whose payload is `frame[start..end]`.
    pub(crate) fn new(frame: &[u8], start: usize, end: usize) -> Result<Self, DecodeError> {
        let mut d = Dec::new(frame.get(start..end).unwrap_or_default());
        let pid = d.u32()?;
        let next_id = d.u64()?;
        Ok(NodeCursor {
            pos: end - d.remaining(),
            end,
            pid,
            next_id,
        })
    }

    /// The next node, `None` after the last; `frame` is the one [`NodeCursor::new`] had.
    pub(crate) fn next(&mut self, frame: &[u8]) -> Result<Option<StackNode>, DecodeError> {
        if self.pos >= self.end {
            return Ok(None);
        }
        let mut d = Dec::new(frame.get(self.pos..self.end).unwrap_or_default());
        let back = d.i64()?;
        let ip = d.u64()?;
        self.pos = self.end - d.remaining();
        let id = self.next_id;
        self.next_id = id.wrapping_add(1);
        Ok(Some(StackNode {
            pid: self.pid,
            id,
            parent: id.wrapping_sub(back as u64),
            ip,
        }))
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

    /// Reads every node of the records in `bytes` back.
    fn read_back(bytes: &[u8]) -> Vec<StackNode> {
        let mut out = Vec::new();
        let mut d = Dec::new(bytes);
        while d.remaining() > 0 {
            let at = bytes.len() - d.remaining();
            assert_eq!(d.u8().unwrap(), tag::STACK_NODES);
            let payload = d.bytes().unwrap();
            let end = bytes.len() - d.remaining();
            let mut c = NodeCursor::new(bytes, end - payload.len(), end).unwrap();
            while let Some(n) = c.next(bytes).unwrap() {
                out.push(n);
            }
            assert!(at < end);
        }
        out
    }

    #[test]
    fn runs_split_where_ids_or_processes_do_not_follow() {
        let nodes = [
            node(7, 1, 0, 0x40_1000),
            node(7, 2, 1, 0x40_2000),
            node(7, 3, 1, u64::MAX),
            node(7, 9, 3, 5),
            node(8, 10, 0, 6),
            node(8, 11, 10, 1 << 63),
        ];
        let (mut run, mut out) = (NodeRun::default(), Vec::new());
        let wrote: Vec<bool> = nodes.iter().map(|n| run.add(n, &mut out)).collect();
        assert_eq!(wrote, [false, false, false, true, true, false]);
        assert!(run.append_record(&mut out));
        assert!(!run.append_record(&mut out));
        assert_eq!(read_back(&out), nodes);
    }

    #[test]
    fn a_run_stops_at_its_limit() {
        let (mut run, mut out) = (NodeRun::default(), Vec::new());
        let nodes: Vec<StackNode> = (1..=MAX_RUN + 1)
            .map(|id| node(1, id, id - 1, id * 4))
            .collect();
        let records = nodes.iter().filter(|n| run.add(n, &mut out)).count();
        assert_eq!(records, 1);
        run.append_record(&mut out);
        assert_eq!(read_back(&out), nodes);
    }

    #[test]
    fn damaged_payloads_are_errors_not_panics() {
        let mut out = Vec::new();
        let mut run = NodeRun::default();
        run.add(&node(1, 1, 0, 0x1234_5678), &mut out);
        run.append_record(&mut out);
        for cut in 0..out.len() {
            let mut c = match NodeCursor::new(&out, 2, cut.max(2)) {
                Ok(c) => c,
                Err(_) => continue,
            };
            while let Ok(Some(_)) = c.next(&out) {}
        }
        assert!(NodeCursor::new(&out, 5, 2).is_err());
    }
}
