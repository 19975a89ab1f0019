//! The tolerant reader: decodes whole frames from any prefix of a recording and stops, without
//! panicking, at the first frame that is torn, fails its checksum or holds a malformed record.
//!
//! A file of frame pairs (see `pairs`) is read whole ([`Part::All`]: each pair's two frames
//! merged into the stream as written) or in one of its parts, whose frames alone are inflated.
//!
//! Memory is bounded by one decompressed pair at a time (two frames of at most
//! [`crate::writer::MAX_FRAME_CONTENT`]) and the stubs a reader is asked to keep; records are
//! produced as a stream.

use crate::codec::{Dec, DecodeError};
use crate::heap_stream::HeapDecoder;
use crate::pairs::{self, Stubs};
use crate::record::{DecodeOptions, Header, Item, Part, Record};
use crate::stack_nodes::NodeCursor;
use crate::writer::MAX_FRAME_CONTENT;

/// Why reading stopped before the end of the data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// The last frame is incomplete: the file was cut while it was being written.
    Torn,
    /// A frame's header, size or checksum is wrong, or it claims an impossible size.
    CorruptFrame(String),
    /// A frame decompressed fine but a record inside it is malformed.
    BadRecord(DecodeError),
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Torn => write!(f, "torn final frame (recording was cut off)"),
            Damage::CorruptFrame(why) => write!(f, "corrupt frame: {why}"),
            Damage::BadRecord(e) => write!(f, "malformed record: {e}"),
        }
    }
}

/// What the reader saw, for `hostside info` and the report's `recording` section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Frames decoded in full.
    pub frames: u64,
    /// Frames stepped over without decoding: those of the other part of a file of frame pairs
    /// (see [`crate::Part`]), and those before a [`Reader::resume`]. With [`Summary::frames`],
    /// the frames of the file read.
    pub frames_skipped: u64,
    /// Bytes of the input that belong to decoded frames.
    pub bytes_read: u64,
    /// Bytes at the end that were discarded (torn or corrupt).
    pub bytes_discarded: u64,
    /// Why reading stopped early, if it did.
    pub damage: Option<Damage>,
    /// Whether the [`Record::End`] record was seen: the recording ended normally.
    pub complete: bool,
    /// Records holding a run of heap events, expanded or (see [`DecodeOptions::heap_events`])
    /// skipped.
    pub heap_records: u64,
}

impl Summary {
    /// Frames of the file read, decoded or stepped over: what `hostside info` counts.
    pub fn frames_read(&self) -> u64 {
        self.frames + self.frames_skipped
    }
}

/// Why a file cannot be read at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenError {
    /// The data does not start with a zstd frame holding a crossprof header.
    NotARecording(String),
    /// The header is from a format version this reader cannot read.
    UnsupportedVersion(u32),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::NotARecording(why) => write!(f, "not a crossprof recording: {why}"),
            OpenError::UnsupportedVersion(v) => write!(
                f,
                "recording has format version {v}, this hostside reads up to {}; upgrade hostside",
                crate::FORMAT_VERSION
            ),
        }
    }
}

impl std::error::Error for OpenError {}

/// A place in a recording where a reader can start ([`Reader::resume`]): a frame boundary with
/// nothing of the frames before it left to hand out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumePoint {
    /// Byte offset of the next frame.
    pub at: usize,
    /// Frames before it.
    pub frames: u64,
}

/// Where the heap record being expanded stands in the current frame.
#[derive(Clone, Copy)]
struct HeapCursor {
    pos: usize,
    end: usize,
    pid: u32,
}

/// Streams records from the bytes of a recording (usually a memory map).
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    frame: Vec<u8>,
    frame_pos: usize,
    /// One decompression context for all frames (creating one per frame costs more than
    /// decompressing a small frame).
    dctx: Option<zstd::bulk::Decompressor<'static>>,
    opts: DecodeOptions,
    /// Records expanded from a version-2 heap batch, handed out before the next record of
    /// the frame.
    pending: std::collections::VecDeque<Record>,
    /// The heap record being expanded: its codes at `frame[pos..end]`, of process `pid`.
    heap_events: Option<HeapCursor>,
    /// The run of trace-tree nodes being expanded (see `stack_nodes`).
    nodes: Option<NodeCursor>,
    heap: HeapDecoder,
    summary: Summary,
    stopped: bool,
    header: Header,
    /// The file is written in frame pairs (see `pairs`).
    pairs: bool,
    /// A pair's two frames, inflated, before [`pairs::merge`] makes them one.
    records: Vec<u8>,
    bulk: Vec<u8>,
    /// Stubs kept ([`Reader::keep_stubs`]) or to be used ([`Reader::use_stubs`]).
    stubs: Stubs,
    /// When `frame` is a bulk frame read on its own: where its samples' stubs go on in
    /// `records`.
    stub_pos: Option<usize>,
    keeping: bool,
}

impl<'a> Reader<'a> {
    /// Checks that the data starts with a header frame and returns a reader positioned after
    /// the header record.
    pub fn new(data: &'a [u8]) -> Result<Self, OpenError> {
        let mut r = Reader::at(data, 0, Header::default(), Summary::default());
        match r.next_record() {
            Some(Record::Header(h)) => {
                if h.format_version > crate::FORMAT_VERSION || h.format_version == 0 {
                    return Err(OpenError::UnsupportedVersion(h.format_version));
                }
                r.pairs = h.format_version >= pairs::PAIRS_VERSION;
                r.header = h;
                Ok(r)
            }
            Some(_) => Err(OpenError::NotARecording(
                "first record is not a header".into(),
            )),
            None => Err(OpenError::NotARecording(match &r.summary.damage {
                Some(d) => d.to_string(),
                None => "empty file".into(),
            })),
        }
    }

    /// Where a reader of the same data can start instead of this one's next record (see
    /// [`Reader::resume`]): `None` unless every record decoded so far was handed out.
    pub fn resume_point(&self) -> Option<ResumePoint> {
        let idle = self.frame_pos >= self.frame.len()
            && self.pending.is_empty()
            && self.heap_events.is_none()
            && self.nodes.is_none()
            && !self.stopped;
        idle.then_some(ResumePoint {
            at: self.pos,
            frames: self.summary.frames + self.summary.frames_skipped,
        })
    }

    /// A reader of `data` from `point` (what [`Reader::resume_point`] of a reader of the
    /// same data gave after its header), whose header is `header`: a pass over a file already
    /// opened need not decode its header frame again. The frames before count as skipped.
    pub fn resume(data: &'a [u8], header: Header, point: ResumePoint) -> Self {
        let at = point.at.min(data.len());
        let summary = Summary {
            frames_skipped: point.frames,
            bytes_read: at as u64,
            ..Summary::default()
        };
        Reader::at(data, at, header, summary)
    }

    /// A reader of `data` from byte `pos` on, of a file with `header`.
    fn at(data: &'a [u8], pos: usize, header: Header, summary: Summary) -> Self {
        Reader {
            data,
            pos,
            frame: Vec::new(),
            frame_pos: 0,
            dctx: None,
            opts: DecodeOptions::default(),
            pending: std::collections::VecDeque::new(),
            heap_events: None,
            nodes: None,
            heap: HeapDecoder::default(),
            summary,
            stopped: false,
            pairs: header.format_version >= pairs::PAIRS_VERSION,
            header,
            records: Vec::new(),
            bulk: Vec::new(),
            stubs: Stubs::default(),
            keeping: false,
            stub_pos: None,
        }
    }

    /// Keeps the stubs of the records frames this reader inflates from here on, for a reader
    /// of the bulk of the same data ([`Reader::take_stubs`], [`Reader::use_stubs`]).
    pub fn keep_stubs(&mut self) {
        self.keeping = true;
    }

    /// The stubs kept so far.
    pub fn take_stubs(&mut self) -> Stubs {
        std::mem::take(&mut self.stubs)
    }

    /// Completes the samples of the bulk frames with `stubs`, kept by a reader of the same
    /// data's metadata, instead of inflating the records frames again; a records frame whose
    /// stubs are not there is inflated.
    pub fn use_stubs(&mut self, stubs: Stubs) {
        self.stubs = stubs;
    }

    /// Chooses what the following records are decoded with.
    pub fn set_decode_options(&mut self, opts: DecodeOptions) {
        self.opts = opts;
    }

    /// The recording's header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// What has been read so far; final once [`Reader::next_record`] returned `None`.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// The next record, or `None` at the end of the data or the first damage.
    pub fn next_record(&mut self) -> Option<Record> {
        self.next_as(Item::into_record, |r| r)
    }

    /// Like [`Reader::next_record`], as an [`Item`]: for passes over heap events, which then
    /// move tens of bytes per event instead of a whole [`Record`].
    pub fn next_item(&mut self) -> Option<Item> {
        self.next_as(|i| i, Item::from_record)
    }

    /// The next record, as `heap` makes it of a heap event and `other` of any other record.
    fn next_as<T>(&mut self, heap: impl Fn(Item) -> T, other: impl Fn(Record) -> T) -> Option<T> {
        loop {
            if let Some(r) = self.pending.pop_front() {
                return Some(other(r));
            }
            if let Some(mut c) = self.nodes {
                match c.next(&self.frame) {
                    Ok(Some(n)) => {
                        self.nodes = Some(c);
                        return Some(other(Record::StackNode(n)));
                    }
                    Ok(None) => self.nodes = None,
                    Err(e) => {
                        self.stop(Damage::BadRecord(e));
                        return None;
                    }
                }
            }
            if let Some(c) = self.heap_events {
                let mut d = Dec::new(&self.frame[c.pos..c.end]);
                match self.heap.next(c.pid, &mut d) {
                    Ok(Some(event)) => {
                        self.heap_events = Some(HeapCursor {
                            pos: c.end - d.remaining(),
                            ..c
                        });
                        return Some(heap(event));
                    }
                    Ok(None) => self.heap_events = None,
                    Err(e) => {
                        self.stop(Damage::BadRecord(e));
                        return None;
                    }
                }
            }
            if self.frame_pos < self.frame.len() {
                match self.decode_in_frame() {
                    Ok(None) => continue,
                    Ok(Some(r)) => {
                        if matches!(r, Record::End(_)) {
                            self.summary.complete = true;
                        }
                        return Some(other(r));
                    }
                    Err(e) => {
                        // The frame passed its checksum, so this is a writer bug or a forged
                        // file; everything from this frame on is suspect.
                        self.stop(Damage::BadRecord(e));
                        return None;
                    }
                }
            }
            // A bulk frame read on its own must have used up its stubs.
            if let Some(mut at) = self.stub_pos {
                if !matches!(pairs::next_stub(&self.records, &mut at), Ok(None)) {
                    self.stop(Damage::BadRecord(DecodeError::BadLength(at)));
                    return None;
                }
            }
            if !self.next_frame() {
                return None;
            }
        }
    }

    /// The next record of the current frame; `None` when it was a heap record, whose records
    /// are now in `pending` (version 2) or behind `heap_events`, or one the pass skips.
    fn decode_in_frame(&mut self) -> Result<Option<Record>, DecodeError> {
        let rest = &self.frame[self.frame_pos..];
        let tag = rest[0];
        let mut d = Dec::new(&rest[1..]);
        let payload = d.bytes()?;
        let used = 1 + (rest.len() - 1 - d.remaining());
        if tag == crate::record::tag::BULK_RUN {
            // Only a records frame read on its own (the metadata part) holds runs.
            self.summary.heap_records += pairs::Run::decode(payload)?.heap;
            self.frame_pos += used;
            return Ok(None);
        }
        if let (Some(mut at), true) = (self.stub_pos, pairs::has_stub(tag)) {
            let r = match pairs::next_stub(&self.records, &mut at)? {
                Some((t, stub)) if t == tag => Record::decode_split(tag, stub, payload, self.opts),
                _ => None,
            };
            self.stub_pos = Some(at);
            self.frame_pos += used;
            return match r {
                Some(r) => r.map(Some),
                None => Err(DecodeError::BadLength(self.frame_pos)),
            };
        }
        // The bulk of an older file, whose frames hold every record: skip the rest.
        if self.opts.part == Part::Bulk && !pairs::is_bulk(tag) {
            self.frame_pos += used;
            return Ok(None);
        }
        if tag == crate::record::tag::HEAP_EVENTS {
            self.summary.heap_records += 1;
            let mut p = Dec::new(payload);
            let pid = p.u32()?;
            let end = self.frame_pos + used;
            // Skipping is safe: the codes' state carries from record to record, but a pass
            // that skips them skips them all.
            if self.opts.heap_events {
                self.heap_events = Some(HeapCursor {
                    pos: end - p.remaining(),
                    end,
                    pid,
                });
            }
            self.frame_pos = end;
            return Ok(None);
        }
        if tag == crate::record::tag::STACK_NODES {
            let end = self.frame_pos + used;
            self.nodes = Some(NodeCursor::new(&self.frame, end - payload.len(), end)?);
            self.frame_pos = end;
            return Ok(None);
        }
        if tag == crate::record::tag::HEAP_BATCH {
            self.summary.heap_records += 1;
            if self.opts.heap_events {
                crate::heap_batch::expand(payload, &mut self.pending)?;
            }
            self.frame_pos += used;
            return Ok(None);
        }
        let r = Record::decode_with(tag, payload, self.opts)?;
        self.frame_pos += used;
        Ok(Some(r))
    }

    fn stop(&mut self, damage: Damage) {
        self.summary.bytes_discarded = (self.data.len() - self.pos) as u64;
        self.summary.damage = Some(damage);
        self.stopped = true;
        self.pending.clear();
        self.heap_events = None;
        self.nodes = None;
        self.stub_pos = None;
        self.frame.clear();
        self.frame_pos = 0;
    }

    /// Inflates the next frame (or pair) of the part read into `frame`; false at the end of
    /// the data or the first damage.
    fn next_frame(&mut self) -> bool {
        self.frame.clear();
        self.frame_pos = 0;
        self.stub_pos = None;
        loop {
            if self.stopped || self.pos >= self.data.len() {
                return false;
            }
            // A pair's bulk frame comes first: its records frame, after it, completes it.
            let bulk_len = match pairs::bulk_after(&self.data[self.pos..]) {
                Ok(len) => len,
                Err(pairs::TornBulk) => {
                    self.stop(Damage::Torn);
                    return false;
                }
            };
            if bulk_len.is_some() && !self.pairs {
                self.stop(Damage::CorruptFrame("bulk frame in an older format".into()));
                return false;
            }
            let records_at = self.pos + bulk_len.unwrap_or(0);
            let Some(size) = self.frame_size(records_at) else {
                return false;
            };
            let end = records_at + size;
            let bulk = bulk_len.map(|_| (self.pos + pairs::SKIPPABLE_HEADER)..records_at);
            let (before, in_pair) = (self.summary.frames, 1 + u64::from(bulk.is_some()));
            let read = match (self.pairs, self.opts.part, bulk) {
                // The metadata of a pair is its records frame; the bulk is its bulk frame,
                // which needs the records frame's stubs.
                (true, Part::Bulk, None) => None,
                (true, Part::Bulk, Some(bulk)) => Some(self.inflate_bulk(records_at..end, bulk)),
                (true, Part::All, Some(bulk)) => Some(self.inflate_pair(records_at..end, bulk)),
                (_, _, bulk) => {
                    let ok = self.inflate_into_frame(records_at..end);
                    if ok && self.keeping && bulk.is_some() {
                        self.stubs.keep(records_at, &self.frame);
                    }
                    Some(ok)
                }
            };
            if read == Some(false) {
                return false;
            }
            self.summary.frames_skipped += in_pair - (self.summary.frames - before);
            self.pos = end;
            self.summary.bytes_read = self.pos as u64;
            if read.is_some() {
                return true;
            }
        }
    }

    /// Inflates the zstd frame at `range` into `frame`; false (and the reader stopped) when
    /// it fails.
    fn inflate_into_frame(&mut self, range: std::ops::Range<usize>) -> bool {
        let out = std::mem::take(&mut self.frame);
        match self.inflate(range, out) {
            Some(frame) => {
                self.frame = frame;
                true
            }
            None => false,
        }
    }

    /// Inflates a pair's bulk frame into `frame`, and puts its stubs into `records` (those
    /// [`Reader::use_stubs`] gave, else its records frame inflated); false (and the reader
    /// stopped) when a frame fails.
    fn inflate_bulk(
        &mut self,
        records: std::ops::Range<usize>,
        bulk: std::ops::Range<usize>,
    ) -> bool {
        let stubs = match self.stubs.take(records.start) {
            Some(stubs) => stubs,
            None => {
                let spare = std::mem::take(&mut self.records);
                let Some(r) = self.inflate(records, spare) else {
                    return false;
                };
                r
            }
        };
        self.records = stubs;
        self.stub_pos = Some(0);
        self.inflate_into_frame(bulk)
    }

    /// Inflates a pair's records and bulk frames and merges them into `frame`, the stream
    /// as written; false (and the reader stopped) when either fails or they disagree.
    fn inflate_pair(
        &mut self,
        records: std::ops::Range<usize>,
        bulk: std::ops::Range<usize>,
    ) -> bool {
        let spare = std::mem::take(&mut self.records);
        let Some(r) = self.inflate(records, spare) else {
            return false;
        };
        let spare = std::mem::take(&mut self.bulk);
        let Some(b) = self.inflate(bulk, spare) else {
            self.records = r;
            return false;
        };
        let mut merged = std::mem::take(&mut self.frame);
        merged.clear();
        let merging = pairs::merge(&r, &b, &mut merged);
        (self.records, self.bulk, self.frame) = (r, b, merged);
        match merging {
            Ok(()) => true,
            Err(e) => {
                self.stop(Damage::BadRecord(e));
                false
            }
        }
    }

    /// The size of the zstd frame at `at` of the data; `None` (and the reader stopped) when
    /// it is torn or not a frame.
    fn frame_size(&mut self, at: usize) -> Option<usize> {
        let rest = &self.data[at..];
        match zstd::zstd_safe::find_frame_compressed_size(rest) {
            Ok(n) if n <= rest.len() => Some(n),
            Ok(_) => {
                self.stop(Damage::Torn);
                None
            }
            Err(code) => {
                // A short remainder that cannot even hold a frame header, or a frame whose blocks
                // run past the end, is a torn write; anything else is corruption.
                let name = zstd::zstd_safe::get_error_name(code);
                if name.contains("Src size is incorrect")
                    || name.contains("srcSize_wrong")
                    || rest.len() < 18
                {
                    self.stop(Damage::Torn);
                } else {
                    self.stop(Damage::CorruptFrame(name.to_string()));
                }
                None
            }
        }
    }

    /// Inflates the zstd frame at `range` of the data into `out` (cleared first), checking
    /// its claimed size and checksum; `None` (and the reader stopped) when it fails.
    fn inflate(&mut self, range: std::ops::Range<usize>, mut out: Vec<u8>) -> Option<Vec<u8>> {
        let frame = &self.data[range];
        let capacity = match zstd::zstd_safe::get_frame_content_size(frame) {
            Ok(Some(n)) if n <= MAX_FRAME_CONTENT => n as usize,
            Ok(Some(n)) => {
                self.stop(Damage::CorruptFrame(format!("frame claims {n} bytes")));
                return None;
            }
            _ => {
                self.stop(Damage::CorruptFrame("frame has no content size".into()));
                return None;
            }
        };
        if self.dctx.is_none() {
            self.dctx = zstd::bulk::Decompressor::new().ok();
        }
        let Some(dctx) = self.dctx.as_mut() else {
            self.stop(Damage::CorruptFrame("cannot create a zstd context".into()));
            return None;
        };
        out.clear();
        out.reserve(capacity);
        match dctx.decompress_to_buffer(frame, &mut out) {
            Ok(_) => {
                self.summary.frames += 1;
                Some(out)
            }
            Err(e) => {
                self.stop(Damage::CorruptFrame(e.to_string()));
                None
            }
        }
    }
}
