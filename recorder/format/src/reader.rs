//! The tolerant reader: decodes whole frames from any prefix of a recording and stops, without
//! panicking, at the first frame that is torn, fails its checksum or holds a malformed record.
//!
//! Memory is bounded by one decompressed frame at a time ([`crate::writer::MAX_FRAME_CONTENT`]);
//! records are produced as a stream.

use crate::codec::{Dec, DecodeError};
use crate::heap_stream::HeapDecoder;
use crate::record::{DecodeOptions, Header, Item, Record};
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
    heap: HeapDecoder,
    summary: Summary,
    stopped: bool,
    header: Header,
}

impl<'a> Reader<'a> {
    /// Checks that the data starts with a header frame and returns a reader positioned after
    /// the header record.
    pub fn new(data: &'a [u8]) -> Result<Self, OpenError> {
        let mut r = Reader {
            data,
            pos: 0,
            frame: Vec::new(),
            frame_pos: 0,
            dctx: None,
            opts: DecodeOptions::default(),
            pending: std::collections::VecDeque::new(),
            heap_events: None,
            heap: HeapDecoder::default(),
            summary: Summary::default(),
            stopped: false,
            header: Header::default(),
        };
        match r.next_record() {
            Some(Record::Header(h)) => {
                if h.format_version > crate::FORMAT_VERSION || h.format_version == 0 {
                    return Err(OpenError::UnsupportedVersion(h.format_version));
                }
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
            if !self.next_frame() {
                return None;
            }
        }
    }

    /// The next record of the current frame; `None` when it was a heap record, whose records
    /// are now in `pending` (version 2) or behind `heap_events`.
    fn decode_in_frame(&mut self) -> Result<Option<Record>, DecodeError> {
        let rest = &self.frame[self.frame_pos..];
        let tag = rest[0];
        let mut d = Dec::new(&rest[1..]);
        let payload = d.bytes()?;
        let used = 1 + (rest.len() - 1 - d.remaining());
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
        self.frame.clear();
        self.frame_pos = 0;
    }

    fn next_frame(&mut self) -> bool {
        self.frame.clear();
        self.frame_pos = 0;
        if self.stopped || self.pos >= self.data.len() {
            return false;
        }
        let rest = &self.data[self.pos..];
        let size = match zstd::zstd_safe::find_frame_compressed_size(rest) {
            Ok(n) if n <= rest.len() => n,
            Ok(_) => {
                self.stop(Damage::Torn);
                return false;
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
                return false;
            }
        };
        let frame = &rest[..size];
        let capacity = match zstd::zstd_safe::get_frame_content_size(frame) {
            Ok(Some(n)) if n <= MAX_FRAME_CONTENT => n as usize,
            Ok(Some(n)) => {
                self.stop(Damage::CorruptFrame(format!("frame claims {n} bytes")));
                return false;
            }
            _ => {
                self.stop(Damage::CorruptFrame("frame has no content size".into()));
                return false;
            }
        };
        if self.dctx.is_none() {
            self.dctx = zstd::bulk::Decompressor::new().ok();
        }
        let Some(dctx) = self.dctx.as_mut() else {
            self.stop(Damage::CorruptFrame("cannot create a zstd context".into()));
            return false;
        };
        let mut out = std::mem::take(&mut self.frame);
        out.clear();
        out.reserve(capacity);
        match dctx.decompress_to_buffer(frame, &mut out) {
            Ok(_) => {
                self.frame = out;
                self.pos += size;
                self.summary.frames += 1;
                self.summary.bytes_read = self.pos as u64;
                true
            }
            Err(e) => {
                self.stop(Damage::CorruptFrame(e.to_string()));
                false
            }
        }
    }
}
