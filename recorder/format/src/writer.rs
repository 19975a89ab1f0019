//! The power-loss-safe writer: records are batched into independent zstd frames, and each frame
//! is written with one `write` and then `fdatasync`ed before the next one starts.
//!
//! Nothing is ever rewritten in place, so whatever reached the disk before a crash, `kill -9` or
//! power loss is a valid prefix of the file: a sequence of whole frames, perhaps followed by one
//! torn frame that the reader detects (by its length and content checksum) and discards.

use std::io;

use crate::heap_stream::{HeapEncoder, HeapEvent, LiveSet};
use crate::pairs::{self, Run};
use crate::record::{End, Header, Record};
use crate::stack_filter::StackFilter;
use crate::stack_nodes::NodeRun;

/// Where frames go. A file syncs with `fdatasync`; tests may use memory.
pub trait Sink {
    /// Writes the whole buffer.
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Makes everything written so far durable.
    fn sync(&mut self) -> io::Result<()>;
    /// Whether this sink compresses frames itself (with a [`FrameCompressor`], typically on
    /// another thread): the writer then hands it each frame pair's records uncompressed
    /// through [`Sink::write_records`] instead of calling [`Sink::write_all`].
    fn takes_records(&self) -> bool {
        false
    }
    /// Takes one frame pair's encoded records and bulk records (a sink that
    /// [`Sink::takes_records`]), `heap` bytes of them heap events and trace-tree nodes (for
    /// [`FrameCompressor::compress_pair`]); leaves both empty, perhaps swapped for spare
    /// buffers. The file must get exactly what [`FrameCompressor::compress_pair`] makes of
    /// them.
    fn write_records(
        &mut self,
        records: &mut Vec<u8>,
        bulk: &mut Vec<u8>,
        heap: usize,
    ) -> io::Result<()> {
        let _ = (records, bulk, heap);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this sink takes compressed frames",
        ))
    }
}

impl Sink for std::fs::File {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        io::Write::write_all(self, buf)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.sync_data()
    }
}

impl Sink for Vec<u8> {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.extend_from_slice(buf);
        Ok(())
    }
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A frame is closed early once this many uncompressed bytes are buffered, which bounds the
/// writer's memory however fast records arrive. Larger frames compress better (stack copies
/// and heap events repeat across many records): 4 MiB instead of 1 MiB took a recording of a
/// SQLite run with CPU sampling and heap events from 1.36 to 1.19 MB (bench/RESULTS.md).
pub const SOFT_FRAME_LIMIT: usize = 4 << 20;

/// zstd level of frames: level 7 is where zstd's search finds the long repeats of CPU
/// samples' stack copies (a SQLite run with CPU sampling: 188 KB at level 7, 223 KB at level
/// 3) and of most programs' heap events (Perl's: 56 KB at level 7, 179 KB at level 3), at
/// little cost where the repeats are long. See [`HEAP_LEVEL`] for where they are not.
pub const ZSTD_LEVEL: i32 = 7;

/// zstd level of frame pairs that are mostly heap events and trace-tree nodes and compressed
/// less than [`REPEATS`] to one last time: a C++ program's heap events repeat little (protoc:
/// 14 to one), and there level 7's search costs three times level 3's for 7% less (44 MB of
/// protoc's heap records: 3.47 MB at level 3 in 53 ms, 3.23 MB at level 7 in 166 ms; a third
/// of rec's work), where on Perl's, which repeat (530 to one), level 7 costs 13 ms against
/// 8 ms and makes a third of the file. Measured by re-compressing recordings frame by frame:
/// `cargo run --release -p crossprof-format --example frame_levels FILE` (bench/RESULTS.md).
pub const HEAP_LEVEL: i32 = 3;

/// Compression ratio from which a heap pair counts as repeating (see [`HEAP_LEVEL`]).
pub const REPEATS: usize = 50;

/// Turns a frame's records into one zstd frame as the file format promises it (content
/// checksum and content size on). Reuse it: it keeps zstd's context between frames.
pub struct FrameCompressor {
    zstd: zstd::bulk::Compressor<'static>,
    level: i32,
    /// Whether the last pair that was mostly heap records compressed at least [`REPEATS`]
    /// to one (true before the first).
    heap_repeats: bool,
}

impl FrameCompressor {
    /// A compressor at [`ZSTD_LEVEL`].
    pub fn new() -> io::Result<Self> {
        let mut zstd = zstd::bulk::Compressor::new(ZSTD_LEVEL)?;
        zstd.include_checksum(true)?;
        zstd.include_contentsize(true)?;
        Ok(FrameCompressor {
            zstd,
            level: ZSTD_LEVEL,
            heap_repeats: true,
        })
    }

    /// Compresses `records` at zstd `level` into `out` (cleared first). Readers need no
    /// level: any level makes a valid frame.
    pub fn compress(&mut self, records: &[u8], level: i32, out: &mut Vec<u8>) -> io::Result<()> {
        if level != self.level {
            self.zstd.set_compression_level(level)?;
            self.level = level;
        }
        out.clear();
        out.reserve(zstd::zstd_safe::compress_bound(records.len()));
        self.zstd.compress_to_buffer(records, out)?;
        Ok(())
    }

    /// Compresses one frame pair (see `pairs`) into `out` (cleared first): unless `bulk` is
    /// empty, the bulk frame in its skippable wrapper, then the records frame. Written with
    /// one `write`, the pair reaches the disk together or is torn as one. `level` is the
    /// writer's; a pair at least half of whose bytes are heap-event and node records
    /// (`heap`) takes [`HEAP_LEVEL`] if lower, unless the last such pair repeated.
    pub fn compress_pair(
        &mut self,
        records: &[u8],
        bulk: &[u8],
        level: i32,
        heap: usize,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> io::Result<()> {
        let len = records.len() + bulk.len();
        let heap_pair = len > 0 && heap * 2 >= len;
        let level = if heap_pair && !self.heap_repeats {
            level.min(HEAP_LEVEL)
        } else {
            level
        };
        out.clear();
        if !bulk.is_empty() {
            self.compress(bulk, level, scratch)?;
            pairs::skippable_header(scratch.len(), out)?;
            out.extend_from_slice(scratch);
        }
        self.compress(records, level, scratch)?;
        out.extend_from_slice(scratch);
        if heap_pair {
            self.heap_repeats = out.len().saturating_mul(REPEATS) <= len;
        }
        Ok(())
    }
}

/// Readers refuse frames that claim more than this, so a corrupt size cannot exhaust memory.
pub const MAX_FRAME_CONTENT: u64 = 64 << 20;

/// Batches records into frame pairs (see `pairs`). Costs buffers of up to
/// [`SOFT_FRAME_LIMIT`] in all (plus the largest single record), their compressed copies and a
/// zstd context; allocation happens only on this (non-signal) path.
pub struct FrameWriter<S: Sink> {
    sink: S,
    /// The records frame being filled.
    buf: Vec<u8>,
    /// The bulk frame being filled.
    bulk: Vec<u8>,
    /// The bulk records without stubs since the last record of `buf`.
    run: Run,
    /// Consecutive heap events of one process, written as one record (see `heap_stream`):
    /// any other record, or a flush, writes it first, so file order is event order.
    heap: HeapEncoder,
    /// Consecutive trace-tree nodes of one process, written as one record (see
    /// `stack_nodes`), as heap events are.
    nodes: NodeRun,
    compressor: FrameCompressor,
    /// Drops the stack-copy words no unwinder follows when a frame closes.
    stacks: Option<StackFilter>,
    /// Bytes of heap-event and node records in `bulk` (they choose the pair's level).
    heap_bytes: usize,
    /// The compressed frame pair, reused.
    out: Vec<u8>,
    /// The compressed bulk frame, reused.
    scratch: Vec<u8>,
    /// zstd level of the frames ([`ZSTD_LEVEL`] unless [`FrameWriter::set_level`]).
    level: i32,
    frames: u64,
    bytes_written: u64,
}

impl<S: Sink> FrameWriter<S> {
    /// Writes and syncs the header as the file's first frame, so even a recording cut off at
    /// once says what it is. The file is written in this crate's [`crate::FORMAT_VERSION`],
    /// whatever `header` says.
    pub fn new(sink: S, header: &Header) -> io::Result<Self> {
        let compressor = FrameCompressor::new()?;
        let mut w = FrameWriter {
            sink,
            buf: Vec::with_capacity(64 << 10),
            bulk: Vec::with_capacity(64 << 10),
            run: Run::default(),
            heap: HeapEncoder::default(),
            nodes: NodeRun::default(),
            compressor,
            heap_bytes: 0,
            stacks: StackFilter::new(header),
            out: Vec::new(),
            scratch: Vec::new(),
            level: ZSTD_LEVEL,
            frames: 0,
            bytes_written: 0,
        };
        w.push(&Record::Header(Header {
            format_version: crate::FORMAT_VERSION,
            ..header.clone()
        }))?;
        w.flush()?;
        Ok(w)
    }

    /// Buffers one record; closes a frame early when the buffer passes [`SOFT_FRAME_LIMIT`].
    /// Heap events (`Alloc`/`Free`) go through [`FrameWriter::heap_alloc`] and
    /// [`FrameWriter::heap_free`]: readers give them back one by one, in the same order, with
    /// block handles in place of addresses. A [`Record::Unknown`] is not written: it kept its
    /// tag but not its payload, and a tag with an empty payload is damage when the tag is one
    /// this version knows (a heap batch's carry start reads back as `Unknown(HEAP_EVENTS)`).
    pub fn push(&mut self, record: &Record) -> io::Result<()> {
        match record {
            Record::Alloc(a) => {
                return self.heap_alloc(a.pid, a.tid, a.time, a.addr, a.size, a.stack)
            }
            Record::Free(f) => return self.heap_free(f.pid, f.tid, f.time, f.addr),
            Record::Unknown(_) => return Ok(()),
            Record::StackNode(n) => {
                self.write_heap_batch();
                if self.nodes.add(n, &mut self.bulk) {
                    self.run.records += 1;
                }
                return self.check_size();
            }
            _ => {}
        }
        self.write_batch();
        if let Some(stub) = pairs::stub(record) {
            self.run.close(&mut self.buf);
            stub.encode(&mut self.buf);
            pairs::encode_bulk(record, &mut self.bulk);
            // The stack copy ends the bulk record.
            if let Some(filter) = &mut self.stacks {
                let end = self.bulk.len();
                match record {
                    Record::Sample(s) => filter.sample(s, &self.bulk, end),
                    Record::EventSample(e) => filter.sample(&e.sample, &self.bulk, end),
                    _ => {}
                }
            }
        } else {
            self.run.close(&mut self.buf);
            record.encode(&mut self.buf);
            if let (Some(filter), Record::Mmap(m)) = (&mut self.stacks, record) {
                filter.mapping(m);
            }
        }
        self.check_size()
    }

    /// Buffers heap events of process `pid`, as `push` of their `Alloc`/`Free` records does
    /// without building them (rec's hot path: a batch lets the encoder prefetch).
    pub fn heap_events(&mut self, pid: u32, mut events: &[HeapEvent]) -> io::Result<()> {
        self.write_nodes();
        while !events.is_empty() {
            if !self.heap.accepts(pid) {
                self.write_batch();
                self.check_size()?;
            }
            let n = events.len().min(self.heap.room());
            self.heap.events(pid, &events[..n]);
            events = &events[n..];
        }
        Ok(())
    }

    /// Buffers one allocation of `size` bytes at `addr` with trace-tree id `stack`.
    pub fn heap_alloc(
        &mut self,
        pid: u32,
        tid: u32,
        time: u64,
        addr: u64,
        size: u64,
        stack: u64,
    ) -> io::Result<()> {
        self.heap_events(
            pid,
            &[HeapEvent {
                tid,
                time,
                addr,
                size,
                stack,
                alloc: true,
            }],
        )
    }

    /// Buffers one free of `addr`.
    pub fn heap_free(&mut self, pid: u32, tid: u32, time: u64, addr: u64) -> io::Result<()> {
        self.heap_events(
            pid,
            &[HeapEvent {
                tid,
                time,
                addr,
                size: 0,
                stack: 0,
                alloc: false,
            }],
        )
    }

    /// Tells the writer that process `pid`'s address space is gone (replaced by exec, or the
    /// process ended): its live blocks will never be freed, and its next heap events start
    /// afresh. Frees the memory the writer kept for it.
    pub fn heap_forget(&mut self, pid: u32) {
        self.heap.forget(pid);
    }

    /// Takes every process's live heap blocks as (address, size, stack) and empties the
    /// writer's heap state (after a [`FrameWriter::flush`], which wrote the pending events):
    /// the live set a new segment carries ([`FrameWriter::carry_heap`]).
    pub fn take_heap_live(&mut self) -> LiveSet {
        self.heap.take_live()
    }

    /// Writes the carried live set of each process (from [`FrameWriter::take_heap_live`] of
    /// the previous segment's writer) into this one, stamped `time` (the segment's start), so
    /// that this segment read alone knows every block still live, and the frees to come find
    /// their blocks. See `heap_stream` for what the reader makes of it.
    pub fn carry_heap(&mut self, live: &LiveSet, time: u64) -> io::Result<()> {
        for (pid, blocks) in live {
            self.write_batch();
            self.check_size()?;
            self.heap.carry_start(*pid, time);
            for &(addr, size, stack) in blocks {
                if !self.heap.accepts(*pid) {
                    self.write_batch();
                    self.check_size()?;
                }
                self.heap.carried(*pid, addr, size, stack);
            }
        }
        Ok(())
    }

    /// Tracks at most `n` live heap blocks, all processes together: bounds the writer's
    /// memory however much the program leaks (see `heap_stream`).
    pub fn set_heap_live_limit(&mut self, n: usize) {
        self.heap.set_live_limit(n);
    }

    /// Live blocks untracked past the limit since the last call (at most this many live
    /// blocks are missing from the next carried live set).
    pub fn take_heap_untracked(&mut self) -> u64 {
        self.heap.take_untracked()
    }

    /// Live heap blocks the writer tracks (to free a block's frees of their address, see
    /// `heap_stream`), all processes together.
    pub fn heap_live_blocks(&self) -> usize {
        self.heap.live_blocks()
    }

    fn check_size(&mut self) -> io::Result<()> {
        if self.buffered() >= SOFT_FRAME_LIMIT {
            self.flush()?;
        }
        Ok(())
    }

    /// Moves the pending heap events or trace-tree nodes (never both), if any, into the bulk
    /// frame as one record.
    fn write_batch(&mut self) {
        self.write_heap_batch();
        self.write_nodes();
    }

    fn write_heap_batch(&mut self) {
        let before = self.bulk.len();
        if self.heap.append_record(&mut self.bulk) {
            self.heap_bytes += self.bulk.len() - before;
            self.run.records += 1;
            self.run.heap += 1;
        }
    }

    fn write_nodes(&mut self) {
        let before = self.bulk.len();
        if self.nodes.append_record(&mut self.bulk) {
            self.heap_bytes += self.bulk.len() - before;
            self.run.records += 1;
        }
    }

    /// Compresses the frames from here on at zstd `level` (a sink that compresses frames
    /// itself chooses its own): a recording made in memory for one analysis (a converted
    /// `perf.data`) is read once, soon, and gains nothing from level 7's search.
    pub fn set_level(&mut self, level: i32) {
        self.level = level;
    }

    /// Uncompressed bytes waiting for the next frame pair.
    pub fn buffered(&self) -> usize {
        self.buf.len() + self.bulk.len()
    }

    /// Closes the current frame pair: filter its stack copies (see `stack_filter`),
    /// compress, write, `fdatasync`. A no-op when nothing is buffered.
    pub fn flush(&mut self) -> io::Result<()> {
        self.write_batch();
        self.run.close(&mut self.buf);
        // Every bulk record left a stub or a run in `buf`.
        if self.buf.is_empty() {
            return Ok(());
        }
        if let Some(filter) = &mut self.stacks {
            filter.apply(&mut self.bulk);
        }
        let frames = if self.bulk.is_empty() { 1 } else { 2 };
        let heap = std::mem::take(&mut self.heap_bytes);
        if self.sink.takes_records() {
            // Counted as the records' size: the sink compresses them later.
            self.bytes_written += self.buffered() as u64;
            self.sink
                .write_records(&mut self.buf, &mut self.bulk, heap)?;
        } else {
            self.compressor.compress_pair(
                &self.buf,
                &self.bulk,
                self.level,
                heap,
                &mut self.out,
                &mut self.scratch,
            )?;
            self.sink.write_all(&self.out)?;
            self.bytes_written += self.out.len() as u64;
        }
        self.buf.clear();
        self.bulk.clear();
        self.sink.sync()?;
        self.frames += frames;
        Ok(())
    }

    /// Writes the [`End`] record that marks the recording complete, flushes, and returns the sink.
    pub fn finish(mut self, end: End) -> io::Result<S> {
        self.push(&Record::End(end))?;
        self.flush()?;
        Ok(self.sink)
    }

    /// Flushes and returns the sink without an [`End`] record: the file then reads as a
    /// recording that was cut short (a conversion that stopped at damage).
    pub fn close(mut self) -> io::Result<S> {
        self.flush()?;
        Ok(self.sink)
    }

    /// The sink, for what it needs to be told besides records.
    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
    }

    /// Frames written so far (a pair's bulk frame counts as one).
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Compressed bytes written so far (uncompressed for a sink that [`Sink::takes_records`]).
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes that compress some, differently at levels 3 and 7: words from a small
    /// vocabulary in pseudo-random order.
    fn text(n: usize, seed: u64) -> Vec<u8> {
        let words: [&[u8]; 8] = [
            b"alloc ", b"free ", b"0x7f3a ", b"node ", b"stack ", b"16 ", b"4096 ", b"\n",
        ];
        let (mut x, mut out) = (seed | 1, Vec::with_capacity(n + 8));
        while out.len() < n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.extend_from_slice(words[(x % 8) as usize]);
        }
        out
    }

    /// What `compress_pair` of a fresh compressor makes of a records frame alone at `level`.
    fn at(level: i32, records: &[u8]) -> Vec<u8> {
        let mut c = FrameCompressor::new().expect("zstd");
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        c.compress_pair(records, &[], level, 0, &mut out, &mut scratch)
            .expect("zstd");
        out
    }

    #[test]
    fn heap_pairs_that_repeat_little_take_the_heap_level_until_one_repeats() {
        let mixed = text(1 << 20, 7);
        let (level3, level7) = (at(HEAP_LEVEL, &mixed), at(ZSTD_LEVEL, &mixed));
        assert_ne!(level3, level7);
        assert!(
            level7.len() * REPEATS > mixed.len(),
            "the text repeats too much"
        );
        let mut c = FrameCompressor::new().expect("zstd");
        let (mut out, mut scratch) = (Vec::new(), Vec::new());
        let mut pair = |c: &mut FrameCompressor, records: &[u8], heap: usize| {
            c.compress_pair(records, &[], ZSTD_LEVEL, heap, &mut out, &mut scratch)
                .expect("zstd");
            out.clone()
        };
        // The first heap pair: level 7; it repeated little, so the next takes level 3.
        assert_eq!(pair(&mut c, &mixed, mixed.len()), level7);
        assert_eq!(pair(&mut c, &mixed, mixed.len()), level3);
        // Not heap records: level 7 whatever the last heap pair did.
        assert_eq!(pair(&mut c, &mixed, mixed.len() / 2 - 1), level7);
        // Heap records that repeat (zeros): level 3 once more, then level 7 again.
        let zeros = vec![0u8; 1 << 20];
        assert_eq!(pair(&mut c, &zeros, zeros.len()), at(HEAP_LEVEL, &zeros));
        assert_eq!(pair(&mut c, &mixed, mixed.len()), level7);
        // A writer's lower level stays.
        let mut low = FrameCompressor::new().expect("zstd");
        low.compress_pair(&mixed, &[], 1, mixed.len(), &mut out, &mut scratch)
            .expect("zstd");
        assert_eq!(out, at(1, &mixed));
    }
}
