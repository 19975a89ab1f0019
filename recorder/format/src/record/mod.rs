//! Every kind of record a recording holds, and how each is laid out.
//!
//! On disk a record is `tag: u8, len: varint, payload[len]`. The length prefix lets a reader skip
//! tags it does not know and ignore trailing fields a newer writer appended, so the format can
//! grow without breaking old readers. Fields are only ever appended to a record, never reordered.
//!
//! Each record family keeps its types with their encoding and decoding side by side:
//! [`run`] (header, end, losses, images), [`task`] (names, tasks, mappings, RSS), [`sample`]
//! (CPU samples, context switches), [`heap`] (allocations, frees, trace-tree nodes) and
//! [`memory`] (the program's anonymous mappings, RSS by kind of mapping).

mod event_sample;
mod heap;
mod jit;
mod memory;
mod run;
mod sample;
mod task;
mod thread_state;

pub use event_sample::EventSample;
pub use heap::{Alloc, Free, StackNode};
pub use jit::{is_jitdump, JitMap};
pub use memory::{AnonMap, MapOp, RssSplit};
pub use run::{Blob, End, Header, Lost, HEAP_STACKS_ARM_SPARSE};
pub use sample::{Sample, Switch};
pub use task::{Comm, Mmap, Rss, Task};
pub use thread_state::ThreadState;

use std::cmp::Ordering;

use crate::codec::{self, Dec, DecodeError, Enc, MAX_VARINT};

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
    /// Which records to read (see [`Part`]).
    pub part: Part,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            sample_stacks: true,
            heap_events: true,
            part: Part::All,
        }
    }
}

/// Which of a recording's records a pass reads. In a file of frame pairs (format version 4
/// on, see `pairs`) the metadata and the bulk records lie in frames of their own, and a pass
/// over one part inflates only that part's frames; in an older file every frame is inflated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Part {
    /// Every record, in the order written.
    #[default]
    All,
    /// The records frames: in a file of pairs, samples come as stubs (no chains, registers
    /// or stack copy) and heap events are only counted; an older file's records all come,
    /// decoded as the other options say.
    Metadata,
    /// Only the bulk records, in the order written, whatever the file's version: samples
    /// whole, heap events (when [`DecodeOptions::heap_events`]) and trace-tree nodes.
    Bulk,
}

/// A record as a pass over millions of heap events takes it ([`crate::Reader::next_item`]):
/// allocations and frees inline, anything else boxed. A [`Record`] is as large as its largest
/// variant (the header, near 300 bytes), and moving one through the reader's layers for each
/// heap event cost as much as decoding the event.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// An allocation.
    Alloc(Alloc),
    /// A free.
    Free(Free),
    /// The start of a process's carried live set, at the start of a `rec --max-size`
    /// segment: the blocks the reader holds as live for `pid` are replaced by the
    /// [`Item::Carried`] blocks that follow (see `heap_stream`).
    CarryStart {
        /// The process.
        pid: u32,
        /// When the segment started.
        time: u64,
    },
    /// A block live when the segment started, allocated in an earlier segment: live, but no
    /// allocation of this segment. Its time is the segment's start.
    Carried(Alloc),
    /// Any other record.
    Other(Box<Record>),
}

impl Item {
    /// The record this item stands for. A carried block reads as an allocation at the
    /// segment's start, and a carry start as a record of unknown kind (to be skipped): a
    /// pass over records sees each segment's live set as allocated when it began.
    pub fn into_record(self) -> Record {
        match self {
            Item::Alloc(a) | Item::Carried(a) => Record::Alloc(a),
            Item::Free(f) => Record::Free(f),
            Item::CarryStart { .. } => Record::Unknown(tag::HEAP_EVENTS),
            Item::Other(r) => *r,
        }
    }

    /// `r` as an item: heap events inline, anything else boxed.
    pub fn from_record(r: Record) -> Item {
        match r {
            Record::Alloc(a) => Item::Alloc(a),
            Record::Free(f) => Item::Free(f),
            r => Item::Other(Box::new(r)),
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
    /// See [`EventSample`].
    EventSample(EventSample),
    /// See [`JitMap`].
    JitMap(JitMap),
    /// See [`ThreadState`].
    ThreadState(ThreadState),
    /// See [`AnonMap`].
    AnonMap(AnonMap),
    /// See [`RssSplit`].
    RssSplit(RssSplit),
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
    pub const EVENT_SAMPLE: u8 = 17;
    pub const JIT_MAP: u8 = 18;
    /// In a records frame: a run of bulk records that lie in the bulk frame (see `pairs`);
    /// never handed out.
    pub const BULK_RUN: u8 = 19;
    pub const THREAD_STATE: u8 = 20;
    pub const ANON_MAP: u8 = 21;
    pub const RSS_SPLIT: u8 = 22;
    /// A run of one process's trace-tree nodes from format version 5 on, see `stack_nodes`;
    /// expanded by the reader.
    pub const STACK_NODES: u8 = 23;
}

/// Bytes left for the payload's length before the payload is encoded: a length of 128 to
/// 16383 bytes, that of most samples (a stack copy, or a call chain of 20 user addresses and
/// more), takes two. A payload of another length is moved once, within `out`.
const LENGTH_SLOT: usize = 2;

impl Record {
    /// Appends this record (tag, length, payload) to `out`. The payload is encoded in place,
    /// after room for its length, so its bytes (a sample's stack copy) are written once;
    /// allocates only when `out` grows.
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_with(out, |e| self.encode_payload(e));
    }

    fn encode_payload(&self, e: &mut Enc<'_>) -> u8 {
        match self {
            Record::Header(h) => {
                h.encode(e);
                tag::HEADER
            }
            Record::Comm(c) => {
                c.encode(e);
                tag::COMM
            }
            Record::Fork(t) => {
                t.encode(e);
                tag::FORK
            }
            Record::Exit(t) => {
                t.encode(e);
                tag::EXIT
            }
            Record::Mmap(m) => {
                m.encode(e);
                tag::MMAP
            }
            Record::Sample(s) => {
                s.encode(e);
                tag::SAMPLE
            }
            Record::Switch(s) => {
                s.encode(e);
                tag::SWITCH
            }
            Record::Alloc(a) => {
                a.encode(e);
                tag::ALLOC
            }
            Record::Free(f) => {
                f.encode(e);
                tag::FREE
            }
            Record::StackNode(n) => {
                n.encode(e);
                tag::STACK_NODE
            }
            Record::Lost(l) => {
                l.encode(e);
                tag::LOST
            }
            Record::Rss(r) => {
                r.encode(e);
                tag::RSS
            }
            Record::Blob(b) => {
                b.encode(e);
                tag::BLOB
            }
            Record::End(x) => {
                x.encode(e);
                tag::END
            }
            Record::EventSample(s) => {
                s.encode(e);
                tag::EVENT_SAMPLE
            }
            Record::JitMap(j) => {
                j.encode(e);
                tag::JIT_MAP
            }
            Record::ThreadState(t) => {
                t.encode(e);
                tag::THREAD_STATE
            }
            Record::AnonMap(m) => {
                m.encode(e);
                tag::ANON_MAP
            }
            Record::RssSplit(r) => {
                r.encode(e);
                tag::RSS_SPLIT
            }
            Record::Unknown(t) => *t,
        }
    }

    /// Decodes one payload of the given tag.
    pub fn decode(tag: u8, payload: &[u8]) -> Result<Record, DecodeError> {
        Self::decode_with(tag, payload, DecodeOptions::default())
    }

    /// Decodes the sample of tag `tag` (a [`Record::Sample`] or [`Record::EventSample`]) whose
    /// stub's payload is `stub` and whose bulk record's payload is `bulk` (see `pairs`);
    /// `None` for another tag.
    pub(crate) fn decode_split(
        tag: u8,
        stub: &[u8],
        bulk: &[u8],
        opts: DecodeOptions,
    ) -> Option<Result<Record, DecodeError>> {
        let (d, b) = (&mut Dec::new(stub), Some(&mut Dec::new(bulk)));
        Some(match tag {
            tag::SAMPLE => Sample::decode_split(d, b, opts.sample_stacks).map(Record::Sample),
            tag::EVENT_SAMPLE => {
                EventSample::decode_split(d, b, opts.sample_stacks).map(Record::EventSample)
            }
            _ => return None,
        })
    }

    /// Decodes one payload, leaving out what `opts` says the caller does not need.
    pub fn decode_with(
        tag: u8,
        payload: &[u8],
        opts: DecodeOptions,
    ) -> Result<Record, DecodeError> {
        let d = &mut Dec::new(payload);
        Ok(match tag {
            tag::HEADER => Record::Header(Header::decode(d)?),
            tag::COMM => Record::Comm(Comm::decode(d)?),
            tag::FORK => Record::Fork(Task::decode(d)?),
            tag::EXIT => Record::Exit(Task::decode(d)?),
            tag::MMAP => Record::Mmap(Mmap::decode(d)?),
            tag::SAMPLE => Record::Sample(Sample::decode(d, opts.sample_stacks)?),
            tag::SWITCH => Record::Switch(Switch::decode(d)?),
            tag::ALLOC => Record::Alloc(Alloc::decode(d)?),
            tag::FREE => Record::Free(Free::decode(d)?),
            tag::STACK_NODE => Record::StackNode(StackNode::decode(d)?),
            tag::LOST => Record::Lost(Lost::decode(d)?),
            tag::RSS => Record::Rss(Rss::decode(d)?),
            tag::BLOB => Record::Blob(Blob::decode(d)?),
            tag::END => Record::End(End::decode(d)?),
            tag::EVENT_SAMPLE => Record::EventSample(EventSample::decode(d, opts.sample_stacks)?),
            tag::JIT_MAP => Record::JitMap(JitMap::decode(d)?),
            tag::THREAD_STATE => Record::ThreadState(ThreadState::decode(d)?),
            tag::ANON_MAP => Record::AnonMap(AnonMap::decode(d)?),
            tag::RSS_SPLIT => Record::RssSplit(RssSplit::decode(d)?),
            other => Record::Unknown(other),
        })
    }
}

/// Appends a record (tag, length, payload) to `out` whose payload `payload` encodes, returning
/// its tag. The payload is encoded in place, after room for its length, so its bytes (a
/// sample's stack copy) are written once; allocates only when `out` grows.
pub(crate) fn encode_with(out: &mut Vec<u8>, payload: impl FnOnce(&mut Enc<'_>) -> u8) {
    let start = out.len();
    // The tag and the length slot, filled in below.
    for _ in 0..=LENGTH_SLOT {
        out.push(0);
    }
    out[start] = payload(&mut Enc::new(out));
    let payload = start + 1 + LENGTH_SLOT;
    let len = out.len() - payload;
    let mut varint = [0u8; MAX_VARINT];
    let n = codec::varint(len as u64, &mut varint);
    match n.cmp(&LENGTH_SLOT) {
        Ordering::Equal => {}
        Ordering::Less => {
            out.copy_within(payload.., start + 1 + n);
            out.truncate(out.len() - (LENGTH_SLOT - n));
        }
        Ordering::Greater => {
            out.resize(out.len() + (n - LENGTH_SLOT), 0);
            out.copy_within(payload..payload + len, start + 1 + n);
        }
    }
    out[start + 1..start + 1 + n].copy_from_slice(&varint[..n]);
}

#[cfg(test)]
mod tests;
