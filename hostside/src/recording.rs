//! Opening a recording file: map it, check the header, and stream its records.
//!
//! A recording written with `rec --max-size` is several segment files (see
//! [`crate::segments`]); they are read one after the other as one stream of records, each
//! segment by its own tolerant reader, so a torn segment loses only its own tail.
//!
//! The file is memory-mapped rather than read, so a long recording costs address space, not
//! heap; records are decoded one frame pair at a time by the format crate's tolerant reader, so
//! a pass over the file holds at most one decompressed pair. The metadata pass inflates only
//! the records frames and keeps the samples' stubs (tens of bytes a sample) for the pass over
//! the stacks, which inflates only the bulk frames: every frame is decompressed once.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use crossprof_format::{
    DecodeOptions, Header, Item, Part, Reader, Record, ResumePoint, Stubs, Summary,
};

/// Items per chunk handed from the decoding thread to the analysis
/// ([`Recording::for_each_bulk_in_background`]).
pub const CHUNK: usize = 2048;
/// Chunks decoded ahead of the analysis at most.
pub const IN_FLIGHT: usize = 4;

/// One pass over a recording's records: called with a consumer, it feeds every record to it.
/// Analyses take a pass rather than the file, so tests and wrappers can add to the stream.
pub type Pass<'a> = &'a mut dyn FnMut(&mut dyn FnMut(Record));

/// An opened recording: its bytes and where they came from.
pub struct Recording {
    path: PathBuf,
    /// Its files, oldest first; at least one.
    segments: Vec<Segment>,
    header: Header,
    /// Bytes of segment files that held no readable header (created as rec was killed).
    unreadable_bytes: u64,
}

/// One file of a recording.
struct Segment {
    data: Data,
    header: Header,
    /// Where a pass starts, past the header frame [`Recording::open`] decoded.
    resume: Option<ResumePoint>,
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
    /// Maps `path` (and the `--max-size` segments next to it) and validates that it starts
    /// with a crossprof header. A `perf.data` file is converted into a recording in memory
    /// first (`crossprof_perf_data`).
    pub fn open(path: &Path) -> Result<Recording> {
        if crossprof_perf_data::is_perf_data(path) {
            let converted = crossprof_perf_data::convert(path)?;
            if let Some(w) = &converted.warning {
                eprintln!("hostside: {}: {w}", path.display());
            }
            return Recording::from_bytes(path, converted.recording);
        }
        let files = crate::segments::discover(path);
        if files.is_empty() {
            // Let the error say why (no such file, no permission).
            File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        }
        let mut segments = Vec::new();
        let mut unreadable_bytes = 0;
        let mut first_error = None;
        let mut own_readable = false;
        for file in &files {
            let data = map(file)?;
            match Reader::new(data.bytes()) {
                Ok(r) => {
                    own_readable |= file.as_path() == path;
                    let (header, resume) = (r.header().clone(), r.resume_point());
                    drop(r);
                    segments.push(Segment {
                        data,
                        header,
                        resume,
                    });
                }
                Err(e) => {
                    unreadable_bytes += data.bytes().len() as u64;
                    first_error.get_or_insert((file.clone(), e));
                }
            }
        }
        // Segments of another recording at the same path (files copied together by hand)
        // are left out: `path` itself says which recording this is, else the newest segment.
        let key = if own_readable {
            segments.first()
        } else {
            segments.last()
        };
        if let Some(key) = key.map(|s| s.header.clone()) {
            segments.retain(|s| {
                s.header.start_unix_ns == key.start_unix_ns && s.header.hostname == key.hostname
            });
            segments.sort_by_key(|s| s.header.segment);
        }
        if segments.is_empty() {
            return Err(match first_error {
                Some((file, e)) => anyhow::Error::new(e).context(file.display().to_string()),
                None => anyhow::anyhow!("{}: empty file", path.display()),
            });
        }
        Ok(Self::assemble(path, segments, unreadable_bytes))
    }

    /// Reads a recording held in memory; `name` is used in messages.
    pub fn from_bytes(name: &Path, bytes: Vec<u8>) -> Result<Recording> {
        let data = Data::Owned(bytes);
        let (header, resume) = Reader::new(data.bytes())
            .map(|r| (r.header().clone(), r.resume_point()))
            .with_context(|| format!("{}", name.display()))?;
        let segment = Segment {
            data,
            header,
            resume,
        };
        Ok(Self::assemble(name, vec![segment], 0))
    }

    /// The recording of `segments`. Its header is the oldest segment's, whose start is moved
    /// to that segment's start when older ones were deleted: times and durations then cover
    /// what the files hold.
    fn assemble(path: &Path, segments: Vec<Segment>, unreadable_bytes: u64) -> Recording {
        let mut header = segments[0].header.clone();
        if header.segment > 0 && header.segment_start_ns > header.start_clock_ns {
            let shift = header.segment_start_ns - header.start_clock_ns;
            header.start_clock_ns = header.segment_start_ns;
            header.start_unix_ns = header.start_unix_ns.saturating_add(shift);
        }
        Recording {
            path: path.to_path_buf(),
            segments,
            header,
            unreadable_bytes,
        }
    }

    /// How many segment files the recording was read from (1 unless `rec --max-size`).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// The numbers of the oldest and newest segments present (0 and 0 for one file).
    pub fn segment_range(&self) -> (u32, u32) {
        let n = |s: Option<&Segment>| s.map_or(0, |s| s.header.segment);
        (n(self.segments.first()), n(self.segments.last()))
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

    /// Like [`Recording::for_each`], without the samples' chains and stack copies and
    /// without the heap events (counted in [`Summary::heap_records`]): for passes that only
    /// need who ran, what was mapped and when samples were taken ([`Part::Metadata`]).
    pub fn for_each_metadata(&self, f: impl FnMut(Record)) -> Summary {
        self.for_each_with(METADATA, f)
    }

    /// [`Recording::for_each_metadata`] that also keeps the samples' stubs, with which a pass
    /// over the bulk ([`Recording::for_each_bulk`]) need not inflate the records frames
    /// again: every frame of the file is then inflated once.
    pub fn for_each_metadata_keeping_stubs(
        &self,
        mut f: impl FnMut(Record),
    ) -> (Summary, KeptStubs) {
        let mut reader = self.reader(METADATA);
        reader.keep_stubs = true;
        while let Some(r) = reader.next_record() {
            f(r);
        }
        (reader.summary, KeptStubs(reader.stubs))
    }

    /// Streams the bulk records ([`Part::Bulk`]: samples whole, heap events and trace-tree
    /// nodes) to `f` as [`Item`]s, decoded on this thread; the heap events only when
    /// `heap_events` (else counted in [`Summary::heap_records`] and skipped).
    pub fn for_each_bulk(
        &self,
        stubs: KeptStubs,
        heap_events: bool,
        mut f: impl FnMut(Item),
    ) -> Summary {
        let mut reader = self.reader(DecodeOptions {
            sample_stacks: true,
            heap_events,
            part: Part::Bulk,
        });
        reader.stubs = stubs.0;
        while let Some(item) = reader.next_item() {
            f(item);
        }
        reader.summary
    }

    /// Streams the bulk records to `f` as [`Item`]s (as [`Recording::for_each_bulk`] with the
    /// heap events), decoded on another thread while `f` runs on this one: for passes whose
    /// own work per record is about what decoding costs (the heap analysis). Items arrive in file order, in chunks of [`CHUNK`]; at most [`IN_FLIGHT`]
    /// chunks are decoded ahead, so memory stays bounded whatever the file's size.
    pub fn for_each_bulk_in_background(
        &self,
        stubs: KeptStubs,
        mut f: impl FnMut(Item),
    ) -> Summary {
        let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<Vec<Item>>(IN_FLIGHT);
        let (empty_tx, empty_rx) = std::sync::mpsc::channel::<Vec<Item>>();
        std::thread::scope(|scope| {
            let decoder = scope.spawn(move || {
                let mut reader = self.reader(DecodeOptions {
                    part: Part::Bulk,
                    ..DecodeOptions::default()
                });
                reader.stubs = stubs.0;
                loop {
                    let mut chunk = empty_rx
                        .try_recv()
                        .unwrap_or_else(|_| Vec::with_capacity(CHUNK));
                    while chunk.len() < CHUNK {
                        match reader.next_item() {
                            Some(item) => chunk.push(item),
                            None => break,
                        }
                    }
                    let last = chunk.len() < CHUNK;
                    // The consumer hung up (it panicked): stop decoding.
                    if full_tx.send(chunk).is_err() || last {
                        return reader.summary;
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
        let mut reader = self.reader(opts);
        while let Some(r) = reader.next_record() {
            f(r);
        }
        reader.summary
    }

    fn reader(&self, opts: DecodeOptions) -> Segments<'_> {
        Segments {
            rec: self,
            next: 0,
            reader: None,
            opts,
            summary: Summary {
                bytes_discarded: self.unreadable_bytes,
                ..Summary::default()
            },
            keep_stubs: false,
            stubs: Vec::new(),
        }
    }
}

const METADATA: DecodeOptions = DecodeOptions {
    sample_stacks: false,
    heap_events: false,
    part: Part::Metadata,
};

/// The samples' stubs a metadata pass kept, per segment: see
/// [`Recording::for_each_metadata_keeping_stubs`].
#[derive(Debug, Default)]
pub struct KeptStubs(Vec<Stubs>);

impl KeptStubs {
    /// Bytes kept.
    pub fn bytes(&self) -> usize {
        self.0.iter().map(Stubs::bytes).sum()
    }
}

/// The records of every segment in turn, and what the readers saw, summed.
struct Segments<'a> {
    rec: &'a Recording,
    next: usize,
    reader: Option<Reader<'a>>,
    opts: DecodeOptions,
    summary: Summary,
    /// Keep each segment's stubs into `stubs` (a metadata pass), or else use them (a bulk
    /// pass), by segment index.
    keep_stubs: bool,
    stubs: Vec<Stubs>,
}

impl<'a> Segments<'a> {
    fn next_record(&mut self) -> Option<Record> {
        self.next_as(Reader::next_record)
    }

    fn next_item(&mut self) -> Option<Item> {
        self.next_as(Reader::next_item)
    }

    /// The next of what `next` takes from each segment's reader in turn.
    fn next_as<T>(&mut self, next: impl Fn(&mut Reader<'a>) -> Option<T>) -> Option<T> {
        loop {
            if let Some(r) = self.reader.as_mut() {
                if let Some(record) = next(r) {
                    return Some(record);
                }
                let s = r.summary();
                let t = &mut self.summary;
                t.frames += s.frames;
                t.frames_skipped += s.frames_skipped;
                t.bytes_read += s.bytes_read;
                t.bytes_discarded += s.bytes_discarded;
                t.heap_records += s.heap_records;
                t.complete |= s.complete;
                if s.damage.is_some() {
                    t.damage = s.damage.clone();
                }
                if self.keep_stubs {
                    let kept = r.take_stubs();
                    self.stubs.push(kept);
                }
                self.reader = None;
            }
            let seg = self.rec.segments.get(self.next)?;
            self.next += 1;
            // open() validated every header; one that no longer reads was changed under us.
            let reader = match seg.resume {
                Some(point) => Some(Reader::resume(seg.data.bytes(), seg.header.clone(), point)),
                None => Reader::new(seg.data.bytes()).ok(),
            };
            if let Some(mut r) = reader {
                r.set_decode_options(self.opts);
                if self.keep_stubs {
                    r.keep_stubs();
                } else if let Some(stubs) = self.stubs.get_mut(self.next - 1) {
                    r.use_stubs(std::mem::take(stubs));
                }
                self.reader = Some(r);
            } else if self.keep_stubs {
                self.stubs.push(Stubs::default());
            }
        }
    }
}

/// Maps `path` read-only.
fn map(path: &Path) -> Result<Data> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let len = file
        .metadata()
        .with_context(|| format!("cannot stat {}", path.display()))?
        .len();
    if len == 0 {
        return Ok(Data::Owned(Vec::new()));
    }
    // SAFETY: the mapping is read-only; a recording is not modified while hostside reads it
    // (rec only appends, and analysis happens after the copy from the board).
    let m = unsafe { memmap2::Mmap::map(&file) }
        .with_context(|| format!("cannot map {}", path.display()))?;
    Ok(Data::Mapped(m))
}
