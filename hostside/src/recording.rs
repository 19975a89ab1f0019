//! Opening a recording file: map it, check the header, and stream its records.
//!
//! The file is memory-mapped rather than read, so a long recording costs address space, not
//! heap; records are decoded one frame at a time by the format crate's tolerant reader, so a
//! pass over the file holds at most one decompressed frame.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use crossprof_format::{Alloc, DecodeOptions, Free, Header, Reader, Record, Summary};

/// A record as [`Recording::for_each_item_in_background`] hands it over: heap events, millions
/// of them, inline; anything else boxed. A [`Record`] is as large as its largest variant (over
/// 200 bytes), and copying those from thread to thread cost more than decoding them.
#[derive(Debug)]
pub enum Item {
    /// An allocation.
    Alloc(Alloc),
    /// A free.
    Free(Free),
    /// Any other record.
    Other(Box<Record>),
}

/// Items per chunk handed from the decoding thread to the analysis
/// ([`Recording::for_each_item_in_background`]).
pub const CHUNK: usize = 2048;
/// Chunks decoded ahead of the analysis at most.
pub const IN_FLIGHT: usize = 4;

/// One pass over a recording's records: called with a consumer, it feeds every record to it.
/// Analyses take a pass rather than the file, so tests and wrappers can add to the stream.
pub type Pass<'a> = &'a mut dyn FnMut(&mut dyn FnMut(Record));

/// An opened recording: its bytes and where they came from.
pub struct Recording {
    path: PathBuf,
    data: Data,
    header: Header,
}

/// The bytes of a recording: mapped from a file, or owned (tests, stdin).
enum Data {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Data {
    fn bytes(&self) -> &[u8] {
        match self {
            Data::Mapped(m) => m,
            Data::Owned(v) => v,
        }
    }
}

impl Recording {
    /// Maps `path` and validates that it starts with a crossprof header.
    pub fn open(path: &Path) -> Result<Recording> {
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let len = file
            .metadata()
            .with_context(|| format!("cannot stat {}", path.display()))?
            .len();
        // SAFETY: the mapping is read-only; a recording is not modified while hostside reads it
        // (rec only appends, and analysis happens after the copy from the board).
        let data = if len == 0 {
            Data::Owned(Vec::new())
        } else {
            Data::Mapped(
                unsafe { memmap2::Mmap::map(&file) }
                    .with_context(|| format!("cannot map {}", path.display()))?,
            )
        };
        Self::new(path, data)
    }

    /// Reads a recording held in memory; `name` is used in messages.
    pub fn from_bytes(name: &Path, bytes: Vec<u8>) -> Result<Recording> {
        Self::new(name, Data::Owned(bytes))
    }

    fn new(path: &Path, data: Data) -> Result<Recording> {
        let header = Reader::new(data.bytes())
            .map(|r| r.header().clone())
            .with_context(|| format!("{}", path.display()))?;
        Ok(Recording {
            path: path.to_path_buf(),
            data,
            header,
        })
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The header record.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Streams every record after the header to `f`, and returns what the reader saw (frames,
    /// discarded bytes, completeness). Each call is an independent pass over the file.
    pub fn for_each(&self, f: impl FnMut(Record)) -> Summary {
        self.for_each_with(DecodeOptions::default(), f)
    }

    /// Like [`Recording::for_each`], without the samples' stack copies and the heap events
    /// (counted in [`Summary::heap_records`]): for passes that only need who ran and what was
    /// mapped.
    pub fn for_each_metadata(&self, f: impl FnMut(Record)) -> Summary {
        self.for_each_with(
            DecodeOptions {
                sample_stacks: false,
                heap_events: false,
            },
            f,
        )
    }

    /// Streams every record to `f` as an [`Item`], decoded on another thread while `f` runs on
    /// this one: for passes whose own work per record is about what decoding costs (the heap
    /// analysis). Items arrive in file order, in chunks of [`CHUNK`]; at most [`IN_FLIGHT`]
    /// chunks are decoded ahead, so memory stays bounded whatever the file's size.
    pub fn for_each_item_in_background(&self, mut f: impl FnMut(Item)) -> Summary {
        let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<Vec<Item>>(IN_FLIGHT);
        let (empty_tx, empty_rx) = std::sync::mpsc::channel::<Vec<Item>>();
        std::thread::scope(|scope| {
            let decoder = scope.spawn(move || {
                let Ok(mut reader) = Reader::new(self.data.bytes()) else {
                    return Summary::default();
                };
                loop {
                    let mut chunk = empty_rx
                        .try_recv()
                        .unwrap_or_else(|_| Vec::with_capacity(CHUNK));
                    while chunk.len() < CHUNK {
                        match reader.next_record() {
                            Some(Record::Alloc(a)) => chunk.push(Item::Alloc(a)),
                            Some(Record::Free(f)) => chunk.push(Item::Free(f)),
                            Some(r) => chunk.push(Item::Other(Box::new(r))),
                            None => break,
                        }
                    }
                    let last = chunk.len() < CHUNK;
                    // The consumer hung up (it panicked): stop decoding.
                    if full_tx.send(chunk).is_err() || last {
                        return reader.summary().clone();
                    }
                }
            });
            for mut chunk in full_rx.iter() {
                for item in chunk.drain(..) {
                    f(item);
                }
                // The decoder may be done already; a chunk it does not take back is dropped.
                let _ = empty_tx.send(chunk);
            }
            decoder.join().unwrap_or_default()
        })
    }

    fn for_each_with(&self, opts: DecodeOptions, mut f: impl FnMut(Record)) -> Summary {
        let Ok(mut reader) = Reader::new(self.data.bytes()) else {
            // open() already validated the header; an unreadable file here means it changed.
            return Summary::default();
        };
        reader.set_decode_options(opts);
        while let Some(r) = reader.next_record() {
            f(r);
        }
        reader.summary().clone()
    }
}
