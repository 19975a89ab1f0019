//! Frame pairs (format version 4 on): each time the writer closes a frame it writes the
//! records a reader needs to know who ran and what was mapped (the *records frame*), then the
//! bulky ones only the pass over the stacks reads (the *bulk frame*): samples with their call
//! chains, registers and stack copies, heap events and trace-tree nodes.
//!
//! Why: `hostside` reads a recording twice, first its metadata (address spaces, the threads a
//! filter names, the switch times waits are measured from), then the stacks. With one frame
//! holding both, each pass decompressed everything; on a stack-copy recording the metadata
//! pass alone was a quarter of a report's time, spent inflating stack copies it then threw
//! away. With pairs, each pass inflates only its own frames: every frame is decoded once.
//!
//! Layout:
//! - The records frame is an ordinary zstd frame. In place of each sample it holds a *stub*,
//!   the same record with its chains, registers and stack copy left empty: time, thread, CPU,
//!   period and data address, what the metadata pass reads. In place of each run of other
//!   bulk records it holds one [`tag::BULK_RUN`] record: how many, and how many of them are
//!   heap-event records (the reader's [`crate::Summary::heap_records`]).
//! - The bulk frame comes first, as a zstd *skippable* frame ([`BULK_MAGIC`], a 32-bit size)
//!   wrapping an ordinary zstd frame of the bulk records, in order: of a sample, only what its
//!   stub left out (a record of the sample's tag holding the chains, registers and stack
//!   copy); other bulk records whole. A reader can step over it without inflating anything,
//!   and any zstd tool still reads the file. A pair without bulk records is its records frame
//!   alone.
//! - A pair is written with one `write` and then synced. A reader takes a bulk frame only with
//!   the whole records frame after it, so a file cut anywhere still reads as whole pairs.
//!
//! Nothing is written twice, so a file is as small as one frame of both would be. The stream
//! as written is the records frame with each stub completed by its bulk record and each run
//! replaced by the records it stands for ([`merge`]): the pass over the bulk needs the stubs
//! too, and the metadata pass keeps them for it ([`Stubs`]), so neither frame is inflated
//! twice.

use std::collections::VecDeque;

use crate::codec::{varint, Dec, DecodeError, Enc, MAX_VARINT};
use crate::record::{encode_with, tag, EventSample, Record, Sample};

/// Magic number of the skippable frame wrapping a bulk frame (zstd reserves
/// `0x184D2A50..=0x184D2A5F` for frames decoders skip).
pub const BULK_MAGIC: u32 = 0x184D_2A5B;

/// Bytes of a skippable frame's header: its magic number and its size, both little-endian.
pub(crate) const SKIPPABLE_HEADER: usize = 8;

/// The first format version that writes frame pairs.
pub const PAIRS_VERSION: u32 = 4;

/// Whether records with `tag` go to the bulk frame.
pub(crate) fn is_bulk(tag: u8) -> bool {
    matches!(
        tag,
        tag::SAMPLE
            | tag::EVENT_SAMPLE
            | tag::ALLOC
            | tag::FREE
            | tag::STACK_NODE
            | tag::STACK_NODES
            | tag::HEAP_BATCH
            | tag::HEAP_EVENTS
    )
}

/// Whether records with `tag` leave a stub of their own in the records frame (samples);
/// other bulk records are counted in runs.
pub(crate) fn has_stub(tag: u8) -> bool {
    matches!(tag, tag::SAMPLE | tag::EVENT_SAMPLE)
}

/// What the records frame keeps of a sample record: everything but its chains, registers
/// and stack copy. Allocates nothing. `None` for any other record.
pub(crate) fn stub(record: &Record) -> Option<Record> {
    let bare = |s: &Sample| Sample {
        time: s.time,
        pid: s.pid,
        tid: s.tid,
        cpu: s.cpu,
        period: s.period,
        addr: s.addr,
        ..Default::default()
    };
    match record {
        Record::Sample(s) => Some(Record::Sample(bare(s))),
        Record::EventSample(e) => Some(Record::EventSample(EventSample {
            event: e.event,
            sample: bare(&e.sample),
        })),
        _ => None,
    }
}

/// Appends what the bulk frame holds of `record`, a sample (its chains, registers and stack
/// copy, the stack copy last), to `out`; `None` for any other record.
pub(crate) fn encode_bulk(record: &Record, out: &mut Vec<u8>) -> Option<()> {
    let (tag, s) = match record {
        Record::Sample(s) => (tag::SAMPLE, s),
        Record::EventSample(e) => (tag::EVENT_SAMPLE, &e.sample),
        _ => return None,
    };
    encode_with(out, |e| {
        s.encode_stacks(e);
        tag
    });
    Some(())
}

/// Appends the whole sample record of tag `tag` made of its stub's payload and its bulk
/// record's payload to `out`.
fn complete(tag: u8, stub: &[u8], bulk: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let events = usize::from(tag == tag::EVENT_SAMPLE);
    let (start, end) = Sample::stacks_span(stub, events)?;
    encode_with(out, |e| {
        e.raw(&stub[..start]);
        e.raw(bulk);
        e.raw(&stub[end..]);
        tag
    });
    Ok(())
}

/// A run of bulk records without stubs, being counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    /// Bulk records in the run.
    pub records: u64,
    /// Of them, heap-event records.
    pub heap: u64,
}

impl Run {
    /// Appends the run's [`tag::BULK_RUN`] record to `out` and starts a new run; nothing when
    /// the run is empty.
    pub(crate) fn close(&mut self, out: &mut Vec<u8>) {
        if self.records == 0 {
            return;
        }
        // Encoded in place: a run closes whenever heap events meet another record.
        let (mut records, mut heap) = ([0u8; MAX_VARINT], [0u8; MAX_VARINT]);
        let (r, h) = (
            varint(self.records, &mut records),
            varint(self.heap, &mut heap),
        );
        out.push(tag::BULK_RUN);
        Enc::new(out).u64((r + h) as u64);
        out.extend_from_slice(&records[..r]);
        out.extend_from_slice(&heap[..h]);
        *self = Run::default();
    }

    /// Reads a run record's payload.
    pub(crate) fn decode(payload: &[u8]) -> Result<Run, DecodeError> {
        let mut d = Dec::new(payload);
        Ok(Run {
            records: d.u64()?,
            heap: d.u64()?,
        })
    }
}

/// Appends the skippable frame header of a bulk frame of `len` compressed bytes.
pub(crate) fn skippable_header(len: usize, out: &mut Vec<u8>) -> std::io::Result<()> {
    let len =
        u32::try_from(len).map_err(|_| std::io::Error::other("bulk frame larger than 4 GiB"))?;
    out.extend_from_slice(&BULK_MAGIC.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    Ok(())
}

/// The total size (header included) of the bulk frame `data` starts with, or `None` when it
/// does not start with one. The size may run past the end of `data` (a torn write).
pub(crate) fn bulk_frame_len(data: &[u8]) -> Option<usize> {
    let magic = u32::from_le_bytes(data.get(..4)?.try_into().ok()?);
    if magic != BULK_MAGIC {
        return None;
    }
    let len = u32::from_le_bytes(data.get(4..8)?.try_into().ok()?);
    Some(SKIPPABLE_HEADER + len as usize)
}

/// A bulk frame cut short: the file ends inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TornBulk;

/// The total size of the bulk frame `data` (what follows the last pair) starts with, `None`
/// when it starts with anything else (a records frame, or the end of the file).
pub(crate) fn bulk_after(data: &[u8]) -> Result<Option<usize>, TornBulk> {
    let n = data.len().min(4);
    if n == 0 || data[..n] != BULK_MAGIC.to_le_bytes()[..n] {
        return Ok(None);
    }
    match bulk_frame_len(data) {
        Some(len) if len <= data.len() => Ok(Some(len)),
        _ => Err(TornBulk),
    }
}

/// The record at `*pos` of `data` (moving `*pos` past it): its tag, its bytes whole (tag,
/// length, payload) and its payload.
type Whole<'a> = (u8, &'a [u8], &'a [u8]);

fn next_record<'a>(data: &'a [u8], pos: &mut usize) -> Result<Option<Whole<'a>>, DecodeError> {
    let rest = &data[*pos..];
    let Some(&tag) = rest.first() else {
        return Ok(None);
    };
    let mut d = Dec::new(&rest[1..]);
    let payload = d.bytes()?;
    let used = 1 + (rest.len() - 1 - d.remaining());
    *pos += used;
    Ok(Some((tag, &rest[..used], payload)))
}

/// Rebuilds the stream of one pair: the records frame `records` with each stub completed by
/// its bulk record and each run replaced by the bulk records it stands for, appended to
/// `out`. An error when the two disagree (a stub whose bulk record is another kind, a run
/// longer than what is left, bulk records left over): the pair was not written by one
/// writer. `records` may be the whole records frame or only its stubs and runs ([`Stubs`]).
pub(crate) fn merge(records: &[u8], bulk: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    out.reserve(records.len() + bulk.len());
    let (mut at, mut bulk_at) = (0, 0);
    let mismatch = |at| DecodeError::BadLength(at);
    while let Some((t, whole, payload)) = next_record(records, &mut at)? {
        if has_stub(t) {
            match next_record(bulk, &mut bulk_at)? {
                Some((b, _, stacks)) if b == t => complete(t, payload, stacks, out)?,
                _ => return Err(mismatch(bulk_at)),
            }
        } else if t == tag::BULK_RUN {
            for _ in 0..Run::decode(payload)?.records {
                match next_record(bulk, &mut bulk_at)? {
                    Some((b, bytes, _)) if is_bulk(b) && !has_stub(b) => {
                        out.extend_from_slice(bytes)
                    }
                    _ => return Err(mismatch(bulk_at)),
                }
            }
        } else {
            out.extend_from_slice(whole);
        }
    }
    if next_record(bulk, &mut bulk_at)?.is_some() {
        return Err(mismatch(bulk_at));
    }
    Ok(())
}

/// The next stub of `records` from `*pos` on (moving `*pos` past it): its tag and payload.
pub(crate) fn next_stub<'a>(
    records: &'a [u8],
    pos: &mut usize,
) -> Result<Option<(u8, &'a [u8])>, DecodeError> {
    while let Some((t, _, payload)) = next_record(records, pos)? {
        if has_stub(t) {
            return Ok(Some((t, payload)));
        }
    }
    Ok(None)
}

/// The stubs and runs of a recording's records frames, kept by a pass over its metadata for
/// a pass over its bulk ([`crate::Reader::keep_stubs`], [`crate::Reader::use_stubs`]), which
/// then inflates only the bulk frames. Costs the stubs' bytes, tens per sample.
#[derive(Debug, Default)]
pub struct Stubs {
    /// Per pair with a bulk frame: its records frame's offset in the file, and its stubs and
    /// runs as encoded there.
    frames: VecDeque<(usize, Vec<u8>)>,
}

impl Stubs {
    /// Keeps the stubs and runs of `records`, the records frame at `offset`.
    pub(crate) fn keep(&mut self, offset: usize, records: &[u8]) {
        let mut kept = Vec::new();
        let mut at = 0;
        while let Ok(Some((t, whole, _))) = next_record(records, &mut at) {
            if has_stub(t) || t == tag::BULK_RUN {
                kept.extend_from_slice(whole);
            }
        }
        self.frames.push_back((offset, kept));
    }

    /// The stubs kept of the records frame at `offset`, if they were.
    pub(crate) fn take(&mut self, offset: usize) -> Option<Vec<u8>> {
        while self.frames.front().is_some_and(|(at, _)| *at < offset) {
            self.frames.pop_front();
        }
        match self.frames.front() {
            Some((at, _)) if *at == offset => self.frames.pop_front().map(|(_, s)| s),
            _ => None,
        }
    }

    /// Bytes kept.
    pub fn bytes(&self) -> usize {
        self.frames.iter().map(|(_, s)| s.len()).sum()
    }
}
