//! The disk side of the recording on threads of their own: one compresses each frame and
//! writes it, one runs `fdatasync`, so that neither zstd (tens of milliseconds for a 4 MiB
//! frame on a slow core) nor the disk (a sync took 5 ms on average and up to 190 ms on this
//! shared VM; more on a board's SD card) stops rec from draining the kernel's rings.
//!
//! Without them the rings overflowed while rec compressed and waited for the disk: recording
//! a program that switches 200,000 times a second, rec spent 1.4 s of a 3 s run in
//! `fdatasync` and lost 40% of its records (bench/RESULTS.md). Frames are compressed and
//! written in the order they came. A sync asked for after a frame runs once that frame is
//! written; syncs asked for while one runs are done as one, so a disk that syncs slowly gets
//! fewer, larger syncs while writes go on. The file is always whole frames plus at most one
//! torn one, as before, and everything written before a finished sync is durable.
//!
//! Frames whose bytes are mostly blocking stacks and wakers' stacks (`--off-cpu`: threads
//! blocking and waking each other in the same few places, up to 200,000 times a second) are
//! compressed at [`FAST_LEVEL`]: zstd's fastest
//! level already finds their repeats, and level 7 cost rec more CPU than `perf record` spent
//! on the same switches. Everything else keeps [`ZSTD_LEVEL`], which the compressor lowers
//! for heap events that repeat little (`crossprof_format::HEAP_LEVEL`).
//!
//! Memory: at most [`MAX_QUEUED`] bytes of records wait for compression; when it falls further
//! behind, the recording thread waits (and the kernel counts what it drops). Buffers go back
//! to the recording thread for reuse, so a steady recording allocates nothing per frame.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crossprof_format::{FrameCompressor, Sink, SOFT_FRAME_LIMIT, ZSTD_LEVEL};

/// Bytes of records that may wait for the thread: the frame it compresses and one more.
pub const MAX_QUEUED: usize = 2 * SOFT_FRAME_LIMIT;
/// zstd level of frames that are mostly blocking stacks.
pub const FAST_LEVEL: i32 = 1;
/// Spare buffers kept for reuse.
const SPARE: usize = 4;

#[derive(Default)]
struct State {
    /// Records and bulk records of whole frame pairs, with the level to compress them at and
    /// their bytes of heap records (see `FrameCompressor::compress_pair`).
    frames: VecDeque<(Vec<u8>, Vec<u8>, i32, usize)>,
    queued: usize,
    /// A sync was asked for after the last frame queued.
    sync_after_queued: bool,
    /// The frames asked to be synced are written: the sync thread may run.
    sync_ready: bool,
    /// No more frames will come.
    closed: bool,
    /// The writing thread is done: the sync thread ends after a last sync.
    written: bool,
    error: Option<io::Error>,
    spare: Vec<Vec<u8>>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the queue half-changed: go on.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait<'a>(&self, g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed.wait(g).unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps the first error and wakes everyone.
    fn fail(&self, e: io::Error) {
        let mut g = self.lock();
        g.error.get_or_insert(e);
        g.written = true;
        drop(g);
        self.changed.notify_all();
    }
}

/// A [`Sink`] that hands frames' records to the threads that compress, write and sync them.
/// An I/O error of a thread is returned by the next call after it (and by
/// [`DiskThread::close`]); what was written and synced before it stays valid.
pub struct DiskThread {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// Bytes of blocking stacks in the frame being filled (see [`DiskThread::note_blocking`]).
    blocking: usize,
}

impl DiskThread {
    /// Starts the threads: frames are written to `writer`, and `syncer`'s `sync` makes them
    /// durable (for a file, a clone of its descriptor).
    pub fn new<W, Y>(mut writer: W, mut syncer: Y) -> io::Result<DiskThread>
    where
        W: Sink + Send + 'static,
        Y: Sink + Send + 'static,
    {
        let mut compressor = FrameCompressor::new()?;
        let shared = Arc::new(Shared::default());
        let mut d = DiskThread {
            shared: shared.clone(),
            threads: Vec::new(),
            blocking: 0,
        };
        let theirs = shared.clone();
        d.threads.push(
            std::thread::Builder::new()
                .name("rec-write".into())
                .spawn(move || {
                    match write_loop(&theirs, &mut writer, &mut compressor) {
                        Ok(()) => theirs.lock().written = true,
                        Err(e) => theirs.fail(e),
                    }
                    theirs.changed.notify_all();
                })?,
        );
        d.threads.push(
            std::thread::Builder::new()
                .name("rec-sync".into())
                .spawn(move || {
                    if let Err(e) = sync_loop(&shared, &mut syncer) {
                        shared.fail(e);
                    }
                })?,
        );
        Ok(d)
    }

    /// Counts `bytes` of blocking stacks into the frame being filled; they choose its level.
    pub fn note_blocking(&mut self, bytes: usize) {
        self.blocking += bytes;
    }

    /// Waits until every frame is written and synced; returns the threads' first error.
    pub fn close(mut self) -> io::Result<()> {
        self.stop();
        match self.shared.lock().error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn stop(&mut self) {
        let mut g = self.shared.lock();
        g.closed = true;
        g.sync_after_queued = true;
        drop(g);
        self.shared.changed.notify_all();
        for t in self.threads.drain(..) {
            if t.join().is_err() {
                self.shared.fail(io::Error::other("a disk thread panicked"));
            }
        }
    }
}

/// The writing thread: compresses and writes every frame waiting, then lets the sync thread
/// run if a sync was asked for after them.
fn write_loop(
    shared: &Shared,
    sink: &mut impl Sink,
    compressor: &mut FrameCompressor,
) -> io::Result<()> {
    let (mut out, mut scratch) = (Vec::new(), Vec::new());
    loop {
        let mut g = shared.lock();
        while g.frames.is_empty() && !g.sync_after_queued && !g.closed && g.error.is_none() {
            g = shared.wait(g);
        }
        if g.error.is_some() {
            return Ok(());
        }
        let frames = std::mem::take(&mut g.frames);
        let sync = std::mem::take(&mut g.sync_after_queued);
        let closed = g.closed;
        drop(g);
        for (records, bulk, level, heap) in frames {
            compressor.compress_pair(&records, &bulk, level, heap, &mut out, &mut scratch)?;
            sink.write_all(&out)?;
            let mut g = shared.lock();
            g.queued -= records.len() + bulk.len();
            for buffer in [records, bulk] {
                if g.spare.len() < SPARE {
                    g.spare.push(buffer);
                }
            }
            drop(g);
            shared.changed.notify_all();
        }
        let mut g = shared.lock();
        g.sync_ready |= sync;
        let finished = closed && g.frames.is_empty() && !g.sync_after_queued;
        drop(g);
        shared.changed.notify_all();
        if finished {
            return Ok(());
        }
    }
}

/// The sync thread: syncs whenever written frames ask for it, until the writing is done.
fn sync_loop(shared: &Shared, sink: &mut impl Sink) -> io::Result<()> {
    loop {
        let mut g = shared.lock();
        while !g.sync_ready && !g.written {
            g = shared.wait(g);
        }
        let sync = std::mem::take(&mut g.sync_ready);
        let done = g.written;
        let failed = g.error.is_some();
        drop(g);
        if failed {
            return Ok(());
        }
        if sync {
            sink.sync()?;
        }
        if done {
            return Ok(());
        }
    }
}

/// A thread's error, for the recording thread: a copy (the original is kept for
/// [`DiskThread::close`]).
fn failed(g: &State) -> Option<io::Error> {
    g.error
        .as_ref()
        .map(|e| io::Error::new(e.kind(), e.to_string()))
}

impl Sink for DiskThread {
    /// Not used: the writer hands over records ([`Sink::takes_records`]).
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let _ = buf;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the disk thread takes records",
        ))
    }

    /// Asks for a sync once the frames queued so far are written; does not wait for it.
    fn sync(&mut self) -> io::Result<()> {
        let mut g = self.shared.lock();
        if let Some(e) = failed(&g) {
            return Err(e);
        }
        g.sync_after_queued = true;
        drop(g);
        self.shared.changed.notify_all();
        Ok(())
    }

    fn takes_records(&self) -> bool {
        true
    }

    /// Queues the frame pair's records (swapping in spare buffers), waiting while
    /// [`MAX_QUEUED`] bytes are queued already.
    fn write_records(
        &mut self,
        records: &mut Vec<u8>,
        bulk: &mut Vec<u8>,
        heap: usize,
    ) -> io::Result<()> {
        let len = records.len() + bulk.len();
        let level = if self.blocking * 2 >= len {
            FAST_LEVEL
        } else {
            ZSTD_LEVEL
        };
        self.blocking = 0;
        let mut g = self.shared.lock();
        while g.error.is_none() && !g.frames.is_empty() && g.queued + len > MAX_QUEUED {
            g = self.shared.wait(g);
        }
        if let Some(e) = failed(&g) {
            return Err(e);
        }
        let mut swap = |buffer: &mut Vec<u8>| {
            let mut spare = g.spare.pop().unwrap_or_default();
            spare.clear();
            std::mem::replace(buffer, spare)
        };
        let (records, bulk) = (swap(records), swap(bulk));
        g.queued += len;
        g.frames.push_back((records, bulk, level, heap));
        drop(g);
        self.shared.changed.notify_all();
        Ok(())
    }
}

impl Drop for DiskThread {
    /// Lets the threads finish what was queued (a recording that ends early still gets its
    /// frames written).
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.stop();
        }
    }
}

/// Where a recording's frames go: a thread of their own ([`DiskThread`]), or inline into a
/// file (`--max-size`: its segments measure the compressed bytes as each frame is written).
pub enum Disk {
    /// Compressed, written and synced by the recording thread.
    Inline(std::fs::File),
    /// Handed to [`DiskThread`].
    Thread(DiskThread),
}

impl Disk {
    /// Counts blocking-stack bytes for the frame's level (threaded frames only).
    pub fn note_blocking(&mut self, bytes: usize) {
        if let Disk::Thread(d) = self {
            d.note_blocking(bytes);
        }
    }

    /// Waits for the thread to write and sync everything; inline frames are already synced.
    pub fn close(self) -> io::Result<()> {
        match self {
            Disk::Inline(_) => Ok(()),
            Disk::Thread(d) => d.close(),
        }
    }
}

impl Sink for Disk {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Disk::Inline(f) => Sink::write_all(f, buf),
            Disk::Thread(d) => d.write_all(buf),
        }
    }

    fn sync(&mut self) -> io::Result<()> {
        match self {
            Disk::Inline(f) => Sink::sync(f),
            Disk::Thread(d) => d.sync(),
        }
    }

    fn takes_records(&self) -> bool {
        matches!(self, Disk::Thread(_))
    }

    fn write_records(
        &mut self,
        records: &mut Vec<u8>,
        bulk: &mut Vec<u8>,
        heap: usize,
    ) -> io::Result<()> {
        match self {
            Disk::Inline(f) => f.write_records(records, bulk, heap),
            Disk::Thread(d) => d.write_records(records, bulk, heap),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossprof_format::{
        End, EventSample, FrameWriter, Header, Reader, Record, Sample, FORMAT_VERSION,
    };

    /// A file in memory, shared with the test; fails writes after `fail_after` of them.
    #[derive(Clone, Default)]
    struct File {
        bytes: Arc<Mutex<Vec<u8>>>,
        ops: Arc<Mutex<Vec<&'static str>>>,
        fail_after: Option<usize>,
    }

    impl Sink for File {
        fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
            let mut ops = self.ops.lock().unwrap();
            if self.fail_after.is_some_and(|n| ops.len() >= n) {
                return Err(io::Error::other("disk full"));
            }
            ops.push("write");
            self.bytes.lock().unwrap().extend_from_slice(buf);
            Ok(())
        }
        fn sync(&mut self) -> io::Result<()> {
            self.ops.lock().unwrap().push("sync");
            Ok(())
        }
    }

    fn header() -> Header {
        Header {
            format_version: FORMAT_VERSION,
            arch: "x86_64".into(),
            pointer_size: 8,
            ..Default::default()
        }
    }

    /// Samples with 2 KiB stacks, three frames' worth; `blocking` makes them blocking stacks.
    fn records(blocking: bool) -> Vec<Record> {
        (0..6000u64)
            .map(|n| {
                let sample = Sample {
                    time: n,
                    pid: 7,
                    tid: 7 + (n % 3) as u32,
                    stack: (0..2048).map(|i| (i as u64 * 7 + n / 100) as u8).collect(),
                    ..Default::default()
                };
                if blocking {
                    Record::EventSample(EventSample { event: 1, sample })
                } else {
                    Record::Sample(sample)
                }
            })
            .collect()
    }

    #[test]
    fn the_file_is_byte_for_byte_what_the_writer_makes_inline() {
        let rs = records(false);
        let mut inline = FrameWriter::new(Vec::new(), &header()).unwrap();
        let threaded = File::default();
        let mut w = FrameWriter::new(
            DiskThread::new(threaded.clone(), threaded.clone()).unwrap(),
            &header(),
        )
        .unwrap();
        for r in &rs {
            inline.push(r).unwrap();
            w.push(r).unwrap();
        }
        let want = inline.finish(End::default()).unwrap();
        w.finish(End::default()).unwrap().close().unwrap();
        assert_eq!(*threaded.bytes.lock().unwrap(), want);
        // The header's frame, two full frames and the rest with the end; a sync follows the
        // last write.
        let ops = threaded.ops.lock().unwrap();
        assert_eq!(ops.iter().filter(|o| **o == "write").count(), 4);
        assert_eq!(ops.last(), Some(&"sync"));
    }

    #[test]
    fn blocking_stack_frames_are_compressed_fast_and_read_back_the_same() {
        let rs = records(true);
        let file = File::default();
        let mut w = FrameWriter::new(
            DiskThread::new(file.clone(), file.clone()).unwrap(),
            &header(),
        )
        .unwrap();
        for r in &rs {
            if let Record::EventSample(e) = r {
                w.sink_mut().note_blocking(e.sample.stack.len());
            }
            w.push(r).unwrap();
        }
        w.finish(End::default()).unwrap().close().unwrap();
        let bytes = file.bytes.lock().unwrap();
        let mut reader = Reader::new(&bytes).unwrap();
        let mut back = Vec::new();
        while let Some(r) = reader.next_record() {
            back.push(r);
        }
        assert_eq!(back.len(), rs.len() + 1, "the records and the end");
        assert_eq!(&back[..rs.len()], &rs[..]);
        // Level 1 made them: a level-7 file of the same records is smaller.
        let mut seven = FrameWriter::new(Vec::new(), &header()).unwrap();
        for r in &rs {
            seven.push(r).unwrap();
        }
        let seven = seven.finish(End::default()).unwrap();
        assert!(seven.len() < bytes.len(), "{} {}", seven.len(), bytes.len());
    }

    #[test]
    fn a_failed_write_is_reported_by_a_later_call_and_by_close() {
        let file = File {
            fail_after: Some(2),
            ..Default::default()
        };
        let mut d = DiskThread::new(file.clone(), file.clone()).unwrap();
        let mut first_error = None;
        // Frames are queued: the error comes with a call after the thread met it.
        for _ in 0..10_000 {
            if let Err(e) = d.write_records(&mut vec![1, 2, 3], &mut vec![4], 0) {
                first_error = Some(e);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(first_error.expect("no error").to_string(), "disk full");
        // Once stopped, it stays stopped.
        assert!(d.sync().is_err());
        assert_eq!(file.ops.lock().unwrap().len(), 2);
        assert_eq!(d.close().unwrap_err().to_string(), "disk full");
    }
}
