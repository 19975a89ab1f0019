//! Records about memory beyond malloc: the program's own anonymous mappings ([`AnonMap`], from
//! the interposer's `mmap`/`munmap`/`mremap` hooks) and resident memory split by the kind of
//! mapping that holds it ([`RssSplit`], from `/proc/PID/smaps`). Both are rare (a mapping
//! call, a periodic tick) and lie in the records frames; readers older than them skip them
//! by tag.

use crate::codec::{Dec, DecodeError, Enc};

/// What an [`AnonMap`] record says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapOp {
    /// `mmap` of private anonymous memory: `addr`, `len` and `stack` are the new mapping.
    Map,
    /// `munmap` of `addr..addr+len`, whatever it held (only a recorded mapping's part counts).
    Unmap,
    /// `mremap` of `old_addr..old_addr+old_len` to `addr..addr+len`, called from `stack`.
    Remap,
    /// An operation of a newer writer.
    Unknown(u8),
}

impl MapOp {
    fn code(self) -> u8 {
        match self {
            MapOp::Map => 1,
            MapOp::Unmap => 2,
            MapOp::Remap => 3,
            MapOp::Unknown(c) => c,
        }
    }

    fn from_code(c: u8) -> MapOp {
        match c {
            1 => MapOp::Map,
            2 => MapOp::Unmap,
            3 => MapOp::Remap,
            c => MapOp::Unknown(c),
        }
    }
}

/// One `mmap`, `munmap` or `mremap` of the program's (see [`MapOp`]). Addresses are the
/// process's own: a mapping is matched with its unmap by address range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnonMap {
    /// Time on the header's clock, nanoseconds.
    pub time: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// What happened.
    pub op: MapOp,
    /// Start of the range mapped or unmapped (of a remap: the new range).
    pub addr: u64,
    /// Length asked for, bytes.
    pub len: u64,
    /// A remap's old range start (0 otherwise).
    pub old_addr: u64,
    /// A remap's old length (0 otherwise).
    pub old_len: u64,
    /// Trace-tree id of the calling stack ([`crate::StackNode`]); 0 for an unmap.
    pub stack: u64,
}

impl AnonMap {
    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        e.u64(self.time);
        e.u64(self.pid.into());
        e.u64(self.tid.into());
        e.u64(self.op.code().into());
        e.u64(self.addr);
        e.u64(self.len);
        e.u64(self.old_addr);
        e.u64(self.old_len);
        e.u64(self.stack);
    }

    pub(super) fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(AnonMap {
            time: d.u64()?,
            pid: d.u32()?,
            tid: d.u32()?,
            op: MapOp::from_code(d.u64()?.min(255) as u8),
            addr: d.u64()?,
            len: d.u64()?,
            old_addr: d.u64()?,
            old_len: d.u64()?,
            stack: d.u64()?,
        })
    }
}

/// A process's resident memory at a moment, summed from the `Rss` of each mapping in
/// `/proc/PID/smaps` by the kind of mapping (how `rec` tells them apart is in its
/// `heap::rss_split`). The kinds add up to `rss`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RssSplit {
    /// Time on the header's clock, nanoseconds.
    pub time: u64,
    /// Process id.
    pub pid: u32,
    /// Resident bytes in all.
    pub rss: u64,
    /// In the allocator's memory: `[heap]` and glibc's arenas of other threads.
    pub heap: u64,
    /// In stacks: the main thread's `[stack]` and the mappings that hold threads' stacks.
    pub stacks: u64,
    /// In other anonymous private memory (the program's own `mmap`s, the allocator's large
    /// blocks that have a mapping of their own).
    pub anonymous: u64,
    /// In mappings of files (code, data, mapped files, shared memory) and the kernel's
    /// (`[vdso]`).
    pub file: u64,
}

impl RssSplit {
    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        e.u64(self.time);
        e.u64(self.pid.into());
        e.u64(self.rss);
        e.u64(self.heap);
        e.u64(self.stacks);
        e.u64(self.anonymous);
        e.u64(self.file);
    }

    pub(super) fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(RssSplit {
            time: d.u64()?,
            pid: d.u32()?,
            rss: d.u64()?,
            heap: d.u64()?,
            stacks: d.u64()?,
            anonymous: d.u64()?,
            file: d.u64()?,
        })
    }
}
