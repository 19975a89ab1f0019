//! Records about the heap: allocations ([`Alloc`]), frees ([`Free`]) and the interned trace
//! tree of allocating stacks ([`StackNode`]).

use crate::codec::{Dec, DecodeError, Enc};

/// One heap allocation (malloc family). `stack` is an id into the [`StackNode`] trace tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alloc {
    /// Time on the header's clock, nanoseconds.
    pub time: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The block: from format version 3 on a handle, unique among the process's live blocks
    /// and the same in the [`Free`] that releases it (files store no heap addresses, see
    /// `heap_stream`); in older files the address returned to the application.
    pub addr: u64,
    /// Requested size in bytes.
    pub size: u64,
    /// Trace-tree id of the allocating stack.
    pub stack: u64,
}

impl Alloc {
    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        e.u64(self.time);
        e.u64(self.pid.into());
        e.u64(self.tid.into());
        e.u64(self.addr);
        e.u64(self.size);
        e.u64(self.stack);
    }

    pub(super) fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Alloc {
            time: d.u64()?,
            pid: d.u32()?,
            tid: d.u32()?,
            addr: d.u64()?,
            size: d.u64()?,
            stack: d.u64()?,
        })
    }
}

/// One heap free of an address previously returned by an allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Free {
    /// Time on the header's clock, nanoseconds.
    pub time: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The freed block, as in [`Alloc::addr`]; a handle that is never live when the address
    /// freed was not live.
    pub addr: u64,
}

impl Free {
    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        e.u64(self.time);
        e.u64(self.pid.into());
        e.u64(self.tid.into());
        e.u64(self.addr);
    }

    pub(super) fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Free {
            time: d.u64()?,
            pid: d.u32()?,
            tid: d.u32()?,
            addr: d.u64()?,
        })
    }
}

/// A node of the interned trace tree (heaptrack style): a stack is the chain of nodes from an
/// id up to the root (id 0). Each distinct stack is written once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackNode {
    /// Process id whose address space `ip` belongs to.
    pub pid: u32,
    /// This node's id (never 0).
    pub id: u64,
    /// Parent node id, 0 for a root frame.
    pub parent: u64,
    /// Instruction pointer (a return address except for the innermost frame).
    pub ip: u64,
}

impl StackNode {
    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        e.u64(self.pid.into());
        e.u64(self.id);
        e.u64(self.parent);
        e.u64(self.ip);
    }

    pub(super) fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(StackNode {
            pid: d.u32()?,
            id: d.u64()?,
            parent: d.u64()?,
            ip: d.u64()?,
        })
    }
}
