//! Records about tasks and their address spaces: names ([`Comm`]), starts and ends ([`Task`]),
//! mappings ([`Mmap`]) and resident memory over time ([`Rss`]).

use crate::codec::{Dec, DecodeError, Enc};

/// One thread or process name, from a COMM event or the /proc snapshot. `exec` marks the name
/// change that an `execve` causes: the address space was replaced at that moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comm {
    /// Time on the header's clock, nanoseconds.
    pub time: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The new name (at most 16 bytes on Linux).
    pub comm: String,
    /// Whether this came from an exec.
    pub exec: bool,
}

impl Comm {
    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        e.u64(self.time);
        e.u64(self.pid.into());
        e.u64(self.tid.into());
        e.str(&self.comm);
        e.bool(self.exec);
    }

    pub(super) fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Comm {
            time: d.u64()?,
            pid: d.u32()?,
            tid: d.u32()?,
            comm: d.string()?,
            exec: d.bool()?,
        })
    }
}

/// A new process or thread (FORK), or one that ended (EXIT); `pid == tid` for a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// Time on the header's clock, nanoseconds.
    pub time: u64,
    /// Process id of the task.
    pub pid: u32,
    /// Thread id of the task.
    pub tid: u32,
    /// Process id of the parent.
    pub ppid: u32,
    /// Thread id of the parent.
    pub ptid: u32,
}

impl Task {
    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        e.u64(self.time);
        e.u64(self.pid.into());
        e.u64(self.tid.into());
        e.u64(self.ppid.into());
        e.u64(self.ptid.into());
    }

    pub(super) fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Task {
            time: d.u64()?,
            pid: d.u32()?,
            tid: d.u32()?,
            ppid: d.u32()?,
            ptid: d.u32()?,
        })
    }
}

/// A file (or anonymous region) mapped into a process, with enough identity to find the same
/// file on the host: build-id first, else inode/size/mtime and a content fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mmap {
    /// Time on the header's clock, nanoseconds (0 for the start-up snapshot).
    pub time: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id that mapped it.
    pub tid: u32,
    /// First address of the mapping.
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
    /// File offset the mapping starts at.
    pub pgoff: u64,
    /// Path as the board saw it (`[vdso]`, `//anon` and similar for non-files).
    pub path: String,
    /// GNU build-id bytes, empty when the file has none.
    pub build_id: Vec<u8>,
    /// Protection bits (PROT_READ=1, PROT_WRITE=2, PROT_EXEC=4).
    pub prot: u32,
    /// Inode number of the file, 0 when unknown.
    pub inode: u64,
    /// File size in bytes, 0 when unknown.
    pub file_size: u64,
    /// File modification time, seconds since the epoch, 0 when unknown.
    pub mtime: u64,
    /// For ELF files without a build-id: a hash of the file's first bytes and size, so the host
    /// can still tell a matching copy from a rebuilt one. 0 when unused.
    pub fingerprint: u64,
}

impl Mmap {
    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        e.u64(self.time);
        e.u64(self.pid.into());
        e.u64(self.tid.into());
        e.u64(self.start);
        e.u64(self.len);
        e.u64(self.pgoff);
        e.str(&self.path);
        e.bytes(&self.build_id);
        e.u64(self.prot.into());
        e.u64(self.inode);
        e.u64(self.file_size);
        e.u64(self.mtime);
        e.u64(self.fingerprint);
    }

    pub(super) fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Mmap {
            time: d.u64()?,
            pid: d.u32()?,
            tid: d.u32()?,
            start: d.u64()?,
            len: d.u64()?,
            pgoff: d.u64()?,
            path: d.string()?,
            build_id: d.bytes()?.to_vec(),
            prot: d.u32()?,
            inode: d.u64()?,
            file_size: d.u64()?,
            mtime: d.u64()?,
            fingerprint: d.u64()?,
        })
    }
}

/// Resident set size of a process at a moment, from /proc/PID/statm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rss {
    /// Time on the header's clock, nanoseconds.
    pub time: u64,
    /// Process id.
    pub pid: u32,
    /// Resident bytes.
    pub bytes: u64,
}

impl Rss {
    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        e.u64(self.time);
        e.u64(self.pid.into());
        e.u64(self.bytes);
    }

    pub(super) fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(Rss {
            time: d.u64()?,
            pid: d.u32()?,
            bytes: d.u64()?,
        })
    }
}
