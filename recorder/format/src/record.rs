//! Every kind of record a recording holds, and how each is laid out.
//!
//! On disk a record is `tag: u8, len: varint, payload[len]`. The length prefix lets a reader skip
//! tags it does not know and ignore trailing fields a newer writer appended, so the format can
//! grow without breaking old readers. Fields are only ever appended to a record, never reordered.

use crate::codec::{Dec, DecodeError, Enc};

/// The recording's first record: what machine and what run produced it. Without it, addresses
/// and stack bytes cannot be interpreted, so a reader refuses a file that does not start with it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Header {
    /// [`crate::FORMAT_VERSION`] of the writer.
    pub format_version: u32,
    /// Target architecture, in the names of [`crate::Arch`] (`x86_64`, `aarch64`, `arm`, ...).
    pub arch: String,
    /// Whether multi-byte values in raw memory (stack copies, the vDSO) are big-endian.
    pub big_endian: bool,
    /// Pointer size on the target in bytes (4 or 8).
    pub pointer_size: u8,
    /// Page size on the target in bytes.
    pub page_size: u32,
    /// `uname -r` of the board.
    pub kernel_release: String,
    /// `uname -n` of the board.
    pub hostname: String,
    /// The profiled command line, or `["-p", "PID"]` when attaching.
    pub command: Vec<String>,
    /// The clock sample times are taken from (`monotonic` for perf's default clock).
    pub clock: String,
    /// Wall-clock start time, nanoseconds since the Unix epoch.
    pub start_unix_ns: u64,
    /// The same instant on `clock`, so sample times can be turned into wall time.
    pub start_clock_ns: u64,
    /// Requested sampling frequency in Hz (0 when CPU sampling is off).
    pub sample_freq: u32,
    /// Call-graph mode, e.g. `fp` or `dwarf=8192`.
    pub call_graph: String,
    /// Version of the `rec` that wrote the file.
    pub rec_version: String,
    /// The perf event that drove sampling, e.g. `cpu-clock`.
    pub event: String,
}

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

/// One CPU sample: where a thread was when the sampling timer fired.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sample {
    /// Time on the header's clock, nanoseconds.
    pub time: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// CPU the sample was taken on.
    pub cpu: u32,
    /// The sampling period this sample stands for (nanoseconds for cpu-clock).
    pub period: u64,
    /// Kernel frames, innermost first (the first one is the interrupted kernel address).
    pub kernel_chain: Vec<u64>,
    /// User frames, innermost first. The first is the interrupted instruction pointer, the rest
    /// are return addresses (look them up at address-1). Empty in stack-copy mode, where the
    /// host unwinds from `regs` and `stack` instead.
    pub user_chain: Vec<u64>,
    /// Which user registers `regs` holds, as perf's `sample_regs_user` mask for the header's
    /// architecture (bit N = perf register N of that arch). 0 when none were captured.
    pub regs_mask: u64,
    /// The captured user registers, one per set bit of `regs_mask`, lowest bit first.
    pub regs: Vec<u64>,
    /// A copy of the user stack from the sampled stack pointer upward: only the bytes the
    /// kernel reported as in use (`dyn_size`), never the padding. Empty unless
    /// `--call-graph dwarf`.
    pub stack: Vec<u8>,
}

/// A thread leaving or entering a CPU, for off-CPU analysis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switch {
    /// Time on the header's clock, nanoseconds.
    pub time: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// CPU.
    pub cpu: u32,
    /// True when the thread was switched out.
    pub out: bool,
    /// True when it was switched out while still runnable (preempted, not waiting).
    pub preempt: bool,
}

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

/// Events the kernel or the recorder had to drop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    /// Time on the header's clock, nanoseconds.
    pub time: u64,
    /// How many records were lost.
    pub count: u64,
    /// What was lost: `samples` (kernel ring buffer overflow) or `heap` (interposer queue full).
    pub kind: String,
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

/// A copy of a memory image the host cannot find on disk: the vDSO (`name == "[vdso]"`), or
/// `/proc/kallsyms` (`name == "kallsyms"`, text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    /// What the bytes are.
    pub name: String,
    /// Load address of the image on the board (0 when not an image).
    pub addr: u64,
    /// The bytes.
    pub data: Vec<u8>,
}

/// The last record of a recording that ended normally. A file without it is incomplete (the
/// recorder was killed or the board lost power) but everything before the cut is still valid.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct End {
    /// Time on the header's clock, nanoseconds.
    pub time: u64,
    /// The application's exit status as `rec` returns it (128+N for signal N), -1 if unknown.
    pub exit_status: i64,
    /// Samples written.
    pub samples: u64,
    /// Samples the kernel reported as lost.
    pub lost_samples: u64,
}

/// What a reader decodes. A pass that only needs a recording's metadata (who ran, what was
/// mapped) skips copying the samples' stack bytes, most of a stack-copy recording, and the
/// heap events, most of a heap recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Decode samples' registers and stack copies (else they come back empty).
    pub sample_stacks: bool,
    /// Expand heap event records into `Alloc`/`Free` records (else they are skipped, and only
    /// counted in the reader's [`crate::Summary::heap_records`]).
    pub heap_events: bool,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            sample_stacks: true,
            heap_events: true,
        }
    }
}

/// Any record. Unknown tags from newer writers decode to [`Record::Unknown`] and are skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// See [`Header`].
    Header(Header),
    /// See [`Comm`].
    Comm(Comm),
    /// A task started; see [`Task`].
    Fork(Task),
    /// A task ended; see [`Task`].
    Exit(Task),
    /// See [`Mmap`].
    Mmap(Mmap),
    /// See [`Sample`].
    Sample(Sample),
    /// See [`Switch`].
    Switch(Switch),
    /// See [`Alloc`].
    Alloc(Alloc),
    /// See [`Free`].
    Free(Free),
    /// See [`StackNode`].
    StackNode(StackNode),
    /// See [`Lost`].
    Lost(Lost),
    /// See [`Rss`].
    Rss(Rss),
    /// See [`Blob`].
    Blob(Blob),
    /// See [`End`].
    End(End),
    /// A record with a tag this reader does not know.
    Unknown(u8),
}

pub(crate) mod tag {
    pub const HEADER: u8 = 1;
    pub const COMM: u8 = 2;
    pub const FORK: u8 = 3;
    pub const EXIT: u8 = 4;
    pub const MMAP: u8 = 5;
    pub const SAMPLE: u8 = 6;
    pub const SWITCH: u8 = 7;
    pub const ALLOC: u8 = 8;
    pub const FREE: u8 = 9;
    pub const STACK_NODE: u8 = 10;
    pub const LOST: u8 = 11;
    pub const RSS: u8 = 12;
    pub const BLOB: u8 = 13;
    pub const END: u8 = 14;
    /// A run of one process's Alloc/Free events in format version 2, see `heap_batch`;
    /// expanded by the reader.
    pub const HEAP_BATCH: u8 = 15;
    /// A run of one process's heap events from format version 3 on, see `heap_stream`;
    /// expanded by the reader.
    pub const HEAP_EVENTS: u8 = 16;
}

impl Record {
    /// Appends this record (tag, length, payload) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_with(out, &mut Vec::new());
    }

    /// Appends this record like [`Record::encode`], building the payload in `scratch` (which
    /// is cleared first): a writer that keeps `scratch` allocates nothing per record.
    pub fn encode_with(&self, out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
        scratch.clear();
        let t = self.encode_payload(&mut Enc::new(scratch));
        out.push(t);
        Enc::new(out).bytes(scratch);
    }

    fn encode_payload(&self, e: &mut Enc<'_>) -> u8 {
        match self {
            Record::Header(h) => {
                e.u64(h.format_version.into());
                e.str(&h.arch);
                e.bool(h.big_endian);
                e.u64(h.pointer_size.into());
                e.u64(h.page_size.into());
                e.str(&h.kernel_release);
                e.str(&h.hostname);
                e.strs(&h.command);
                e.str(&h.clock);
                e.u64(h.start_unix_ns);
                e.u64(h.start_clock_ns);
                e.u64(h.sample_freq.into());
                e.str(&h.call_graph);
                e.str(&h.rec_version);
                e.str(&h.event);
                tag::HEADER
            }
            Record::Comm(c) => {
                e.u64(c.time);
                e.u64(c.pid.into());
                e.u64(c.tid.into());
                e.str(&c.comm);
                e.bool(c.exec);
                tag::COMM
            }
            Record::Fork(t) | Record::Exit(t) => {
                e.u64(t.time);
                e.u64(t.pid.into());
                e.u64(t.tid.into());
                e.u64(t.ppid.into());
                e.u64(t.ptid.into());
                if matches!(self, Record::Fork(_)) {
                    tag::FORK
                } else {
                    tag::EXIT
                }
            }
            Record::Mmap(m) => {
                e.u64(m.time);
                e.u64(m.pid.into());
                e.u64(m.tid.into());
                e.u64(m.start);
                e.u64(m.len);
                e.u64(m.pgoff);
                e.str(&m.path);
                e.bytes(&m.build_id);
                e.u64(m.prot.into());
                e.u64(m.inode);
                e.u64(m.file_size);
                e.u64(m.mtime);
                e.u64(m.fingerprint);
                tag::MMAP
            }
            Record::Sample(s) => {
                e.u64(s.time);
                e.u64(s.pid.into());
                e.u64(s.tid.into());
                e.u64(s.cpu.into());
                e.u64(s.period);
                e.u64s(&s.kernel_chain);
                e.u64s(&s.user_chain);
                e.u64(s.regs_mask);
                e.u64s(&s.regs);
                e.bytes(&s.stack);
                tag::SAMPLE
            }
            Record::Switch(s) => {
                e.u64(s.time);
                e.u64(s.pid.into());
                e.u64(s.tid.into());
                e.u64(s.cpu.into());
                e.bool(s.out);
                e.bool(s.preempt);
                tag::SWITCH
            }
            Record::Alloc(a) => {
                e.u64(a.time);
                e.u64(a.pid.into());
                e.u64(a.tid.into());
                e.u64(a.addr);
                e.u64(a.size);
                e.u64(a.stack);
                tag::ALLOC
            }
            Record::Free(f) => {
                e.u64(f.time);
                e.u64(f.pid.into());
                e.u64(f.tid.into());
                e.u64(f.addr);
                tag::FREE
            }
            Record::StackNode(n) => {
                e.u64(n.pid.into());
                e.u64(n.id);
                e.u64(n.parent);
                e.u64(n.ip);
                tag::STACK_NODE
            }
            Record::Lost(l) => {
                e.u64(l.time);
                e.u64(l.count);
                e.str(&l.kind);
                tag::LOST
            }
            Record::Rss(r) => {
                e.u64(r.time);
                e.u64(r.pid.into());
                e.u64(r.bytes);
                tag::RSS
            }
            Record::Blob(b) => {
                e.str(&b.name);
                e.u64(b.addr);
                e.bytes(&b.data);
                tag::BLOB
            }
            Record::End(x) => {
                e.u64(x.time);
                e.i64(x.exit_status);
                e.u64(x.samples);
                e.u64(x.lost_samples);
                tag::END
            }
            Record::Unknown(t) => *t,
        }
    }

    /// Decodes one payload of the given tag.
    pub fn decode(tag: u8, payload: &[u8]) -> Result<Record, DecodeError> {
        Self::decode_with(tag, payload, DecodeOptions::default())
    }

    /// Decodes one payload, leaving out what `opts` says the caller does not need.
    pub fn decode_with(
        tag: u8,
        payload: &[u8],
        opts: DecodeOptions,
    ) -> Result<Record, DecodeError> {
        let d = &mut Dec::new(payload);
        Ok(match tag {
            tag::HEADER => Record::Header(Header {
                format_version: d.u32()?,
                arch: d.string()?,
                big_endian: d.bool()?,
                pointer_size: d.u64()? as u8,
                page_size: d.u32()?,
                kernel_release: d.string()?,
                hostname: d.string()?,
                command: d.strs()?,
                clock: d.string()?,
                start_unix_ns: d.u64()?,
                start_clock_ns: d.u64()?,
                sample_freq: d.u32()?,
                call_graph: d.string()?,
                rec_version: d.string()?,
                event: d.string()?,
            }),
            tag::COMM => Record::Comm(Comm {
                time: d.u64()?,
                pid: d.u32()?,
                tid: d.u32()?,
                comm: d.string()?,
                exec: d.bool()?,
            }),
            tag::FORK | tag::EXIT => {
                let t = Task {
                    time: d.u64()?,
                    pid: d.u32()?,
                    tid: d.u32()?,
                    ppid: d.u32()?,
                    ptid: d.u32()?,
                };
                if tag == tag::FORK {
                    Record::Fork(t)
                } else {
                    Record::Exit(t)
                }
            }
            tag::MMAP => Record::Mmap(Mmap {
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
            }),
            tag::SAMPLE => {
                let mut s = Sample {
                    time: d.u64()?,
                    pid: d.u32()?,
                    tid: d.u32()?,
                    cpu: d.u32()?,
                    period: d.u64()?,
                    kernel_chain: d.u64s()?,
                    user_chain: d.u64s()?,
                    ..Default::default()
                };
                // Stack-copy fields were appended to the record; older files end before them.
                if d.remaining() > 0 && opts.sample_stacks {
                    s.regs_mask = d.u64()?;
                    s.regs = d.u64s()?;
                    s.stack = d.bytes()?.to_vec();
                }
                Record::Sample(s)
            }
            tag::SWITCH => Record::Switch(Switch {
                time: d.u64()?,
                pid: d.u32()?,
                tid: d.u32()?,
                cpu: d.u32()?,
                out: d.bool()?,
                preempt: d.bool()?,
            }),
            tag::ALLOC => Record::Alloc(Alloc {
                time: d.u64()?,
                pid: d.u32()?,
                tid: d.u32()?,
                addr: d.u64()?,
                size: d.u64()?,
                stack: d.u64()?,
            }),
            tag::FREE => Record::Free(Free {
                time: d.u64()?,
                pid: d.u32()?,
                tid: d.u32()?,
                addr: d.u64()?,
            }),
            tag::STACK_NODE => Record::StackNode(StackNode {
                pid: d.u32()?,
                id: d.u64()?,
                parent: d.u64()?,
                ip: d.u64()?,
            }),
            tag::LOST => Record::Lost(Lost {
                time: d.u64()?,
                count: d.u64()?,
                kind: d.string()?,
            }),
            tag::RSS => Record::Rss(Rss {
                time: d.u64()?,
                pid: d.u32()?,
                bytes: d.u64()?,
            }),
            tag::BLOB => Record::Blob(Blob {
                name: d.string()?,
                addr: d.u64()?,
                data: d.bytes()?.to_vec(),
            }),
            tag::END => Record::End(End {
                time: d.u64()?,
                exit_status: d.i64()?,
                samples: d.u64()?,
                lost_samples: d.u64()?,
            }),
            other => Record::Unknown(other),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn one_of_each() -> Vec<Record> {
        vec![
            Record::Header(Header {
                format_version: 1,
                arch: "arm".into(),
                pointer_size: 4,
                command: vec!["./app".into(), "x".into()],
                ..Default::default()
            }),
            Record::Comm(Comm {
                time: 1,
                pid: 2,
                tid: 3,
                comm: "app".into(),
                exec: true,
            }),
            Record::Fork(Task {
                time: 1,
                pid: 2,
                tid: 3,
                ppid: 4,
                ptid: 5,
            }),
            Record::Exit(Task {
                time: 1,
                pid: 2,
                tid: 3,
                ppid: 4,
                ptid: 5,
            }),
            Record::Mmap(Mmap {
                start: 0x1000,
                len: 0x2000,
                path: "/bin/app".into(),
                build_id: vec![1, 2, 3],
                ..Default::default()
            }),
            Record::Sample(Sample {
                time: 9,
                user_chain: vec![u64::MAX, 0, 0x4000],
                kernel_chain: vec![0xffff_ffff_8000_0000],
                ..Default::default()
            }),
            Record::Sample(Sample {
                time: 10,
                regs_mask: 0b1_1000_0001,
                regs: vec![0x7fff_0000, 0x4010, 1],
                stack: vec![1, 2, 3, 0xff],
                ..Default::default()
            }),
            Record::Switch(Switch {
                time: 1,
                pid: 2,
                tid: 3,
                cpu: 0,
                out: true,
                preempt: false,
            }),
            Record::Alloc(Alloc {
                time: 1,
                pid: 2,
                tid: 3,
                addr: 0x55,
                size: 16,
                stack: 7,
            }),
            Record::Free(Free {
                time: 1,
                pid: 2,
                tid: 3,
                addr: 0x55,
            }),
            Record::StackNode(StackNode {
                pid: 2,
                id: 7,
                parent: 0,
                ip: 0x400,
            }),
            Record::Lost(Lost {
                time: 1,
                count: 5,
                kind: "samples".into(),
            }),
            Record::Rss(Rss {
                time: 1,
                pid: 2,
                bytes: 4096,
            }),
            Record::Blob(Blob {
                name: "[vdso]".into(),
                addr: 0x7fff,
                data: vec![0x7f, b'E'],
            }),
            Record::End(End {
                time: 5,
                exit_status: -1,
                samples: 1,
                lost_samples: 0,
            }),
        ]
    }

    #[test]
    fn every_record_round_trips() {
        for r in one_of_each() {
            let mut buf = Vec::new();
            r.encode(&mut buf);
            let mut d = Dec::new(&buf[1..]);
            let payload = d.bytes().unwrap();
            assert_eq!(Record::decode(buf[0], payload).unwrap(), r);
        }
    }

    #[test]
    fn samples_written_before_stack_copies_existed_still_decode() {
        // A version-1 sample as the first writers laid it out: no regs/stack fields.
        let mut payload = Vec::new();
        let mut e = Enc::new(&mut payload);
        for v in [5u64, 1, 2, 0, 1000] {
            e.u64(v);
        }
        e.u64s(&[]);
        e.u64s(&[0x4000, 0x5000]);
        let Record::Sample(s) = Record::decode(tag::SAMPLE, &payload).unwrap() else {
            panic!("not a sample")
        };
        assert_eq!(s.user_chain, vec![0x4000, 0x5000]);
        assert!(s.regs.is_empty() && s.stack.is_empty() && s.regs_mask == 0);
    }

    #[test]
    fn encoding_with_scratch_is_identical() {
        let mut scratch = vec![9u8; 3];
        for r in one_of_each() {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            r.encode(&mut a);
            r.encode_with(&mut b, &mut scratch);
            assert_eq!(a, b);
        }
    }

    #[test]
    fn unknown_tags_are_skippable() {
        assert_eq!(
            Record::decode(200, &[1, 2, 3]).unwrap(),
            Record::Unknown(200)
        );
    }
}
