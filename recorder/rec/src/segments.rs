//! The recording's files, and `--max-size`: a flight recorder for long-running boards.
//!
//! Without `--max-size` a recording is one file. With it, the recording is a series of
//! segment files: `FILE` (segment 0), then `FILE.1`, `FILE.2`, ... Each segment is a complete
//! recording file of its own: it starts with the header (numbered with its segment, the
//! recording's start unchanged) and the state a reader needs (the vDSO, every recorded
//! process's threads and executable mappings, read from /proc when the segment starts), so
//! it can be read alone. When the current segment reaches 7/32 of SIZE (a little under a
//! quarter, for the frame that crosses the limit), the next one is created, its header and
//! state written and synced, and only then are the oldest segments deleted, until the closed
//! ones take at most three quarters of SIZE: the disk use stays within SIZE plus the new
//! segment's start and one frame (at most a quarter of SIZE in all), and at every moment the
//! files on disk are whole segments (the newest perhaps with a torn last frame). Nothing is
//! rewritten: files are only appended to, created and deleted.
//!
//! `hostside` given `FILE` reads every segment still present, oldest first, as one recording.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crossprof_format::{segment_path, FrameWriter, Header};

use crate::disk::Disk;

/// The smallest `--max-size`: four segments of 16 KiB, room for a header and a process
/// snapshot each with samples after them.
pub const MIN_MAX_SIZE: u64 = 64 << 10;

/// Parses `--max-size`'s value (see [`parse_bytes`]), at least [`MIN_MAX_SIZE`].
pub fn parse_size(s: &str) -> Result<u64, String> {
    parse_bytes("--max-size", s, MIN_MAX_SIZE, "64KiB")
}

/// Parses `flag`'s value `s`: bytes, or a number with `K`, `M`, `G` (powers of 1000) or
/// `KiB`, `MiB`, `GiB` (powers of 1024), as `hostside report --fail-on-leak` takes them; at
/// least `min` (said as `min_text`).
pub fn parse_bytes(flag: &str, s: &str, min: u64, min_text: &str) -> Result<u64, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{flag} {s}: give a number of bytes, e.g. 10M or 512KiB"))?;
    let mult: u64 = match unit {
        "" => 1,
        "K" | "k" | "KB" | "kB" => 1000,
        "M" | "MB" => 1000 * 1000,
        "G" | "GB" => 1000 * 1000 * 1000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => {
            return Err(format!(
                "{flag} {s}: unknown unit {unit:?} (K, M, G, KiB, MiB, GiB)"
            ))
        }
    };
    let bytes = n
        .checked_mul(mult)
        .ok_or_else(|| format!("{flag} {s}: too large"))?;
    if bytes < min {
        return Err(format!("{flag} {s}: at least {min_text}"));
    }
    Ok(bytes)
}

/// Creates (truncating) the recording's first file, after removing segment files a previous
/// recording at the same path left (`FILE.1`, `FILE.2`, ...: exactly the files `hostside`
/// would read with it, see [`crossprof_format::numbered_segments`]), so that they are never
/// read as part of this one. One that cannot be removed is an error naming it: it would be.
pub fn create_first(base: &Path) -> io::Result<File> {
    for (_, stale) in crossprof_format::numbered_segments(base) {
        std::fs::remove_file(&stale).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot remove {}, a segment of an earlier recording at this path that \
                     hostside would read as part of this one: {e}",
                    stale.display()
                ),
            )
        })?;
    }
    create(base)
}

fn create(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
}

/// Makes the directory's entries (a created or deleted segment) durable; false when it could
/// not (the directory could not be opened or synced).
fn sync_dir(base: &Path) -> bool {
    let dir = match base.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir).and_then(|d| d.sync_all()).is_ok()
}

/// What went wrong keeping the segments durable and within the bound since the recording
/// began: rec writes each total as a `Lost` record (kinds `Lost::DIRECTORY_SYNC_FAILED` and
/// `Lost::SEGMENT_DELETE_FAILED`, running totals: see `crossprof_format::Lost`) at the
/// start of every segment, so that the newest segments tell it whatever was deleted; `hostside
/// info` and `report` show it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DurabilityErrors {
    /// Directory syncs that failed: a created or deleted segment may not survive power loss.
    pub dir_sync_failed: u64,
    /// Segment deletes that failed: the file stays on disk and its bytes still count
    /// against `--max-size` (newer segments are deleted in its place).
    pub delete_failed: u64,
}

/// The segments of a `--max-size` recording: which exist, and when to start the next.
/// Holds a few paths and sizes (at most SIZE / segment size + 1), nothing per record.
pub struct Segments {
    base: PathBuf,
    max_total: u64,
    segment_limit: u64,
    index: u32,
    /// Closed segments still on disk, oldest first, with their sizes.
    closed: VecDeque<(PathBuf, u64)>,
    header: Header,
    /// Compressed and uncompressed bytes of the last frame seen: how much of what is
    /// buffered the disk will see.
    ratio: (u64, u64),
    /// `bytes_written` and `buffered` of the writer at the last [`Segments::due`].
    seen: (u64, u64),
    /// Bytes of the current segment's header and state: a segment ends only after more, so
    /// state larger than a segment cannot make every record start a new one.
    prologue: u64,
    /// Segments that could not be deleted, with their sizes: still on disk, so still counted,
    /// and tried again at every retirement.
    stuck: Vec<(PathBuf, u64)>,
    /// Errors since the recording began (see [`Segments::errors`]).
    errors: DurabilityErrors,
}

impl Segments {
    /// Segments of the recording at `base`, together at most `max_total` bytes, each with
    /// `header` (the recording's, as segment 0 was written with).
    pub fn new(base: &Path, max_total: u64, header: Header) -> Segments {
        Segments {
            base: base.to_path_buf(),
            max_total,
            // 7/32 of the bound rather than a quarter: segments end a little past their size
            // (the frame that crosses it), and three closed ones must still fit in the
            // three quarters `retire` keeps.
            segment_limit: max_total / 32 * 7,
            index: 0,
            closed: VecDeque::new(),
            header,
            ratio: (1, 1),
            seen: (0, 0),
            prologue: 0,
            stuck: Vec::new(),
            errors: DurabilityErrors::default(),
        }
    }

    /// The errors since the recording began, to be written into each new segment.
    pub fn errors(&self) -> DurabilityErrors {
        self.errors
    }

    fn sync_dir(&mut self) {
        if !sync_dir(&self.base) {
            self.errors.dir_sync_failed += 1;
        }
    }

    /// Whether the current segment, written through `w`, is full; called after every record.
    /// Closes the frame early when what is buffered, compressed as the last frame was, would
    /// take the segment past its size: segments then overshoot it by little, whatever
    /// `--flush-ms` and the data rate.
    pub fn due(&mut self, w: &mut FrameWriter<Disk>) -> io::Result<bool> {
        let (written, buffered) = (w.bytes_written(), w.buffered() as u64);
        if written > self.seen.0 && self.seen.1 > 0 {
            self.ratio = (written - self.seen.0, self.seen.1);
        }
        let estimate = buffered.saturating_mul(self.ratio.0) / self.ratio.1.max(1);
        if buffered > 0 && written.saturating_add(estimate) >= self.segment_limit {
            w.flush()?;
            self.ratio = ((w.bytes_written() - written).max(1), buffered);
        }
        self.seen = (w.bytes_written(), w.buffered() as u64);
        Ok(w.bytes_written() >= self.segment_limit && w.bytes_written() > self.prologue)
    }

    /// Closes the current segment (`w`: flushed and synced here) and starts the next: its
    /// file, header and a synced first frame. The caller then writes the state and calls
    /// [`Segments::retire`].
    pub fn next(&mut self, mut w: FrameWriter<Disk>, now: u64) -> io::Result<FrameWriter<Disk>> {
        w.flush()?;
        let size = w.bytes_written();
        drop(w);
        self.closed
            .push_back((segment_path(&self.base, self.index), size));
        self.index += 1;
        let path = segment_path(&self.base, self.index);
        let header = Header {
            segment: self.index,
            segment_start_ns: now,
            ..self.header.clone()
        };
        let w = FrameWriter::new(Disk::Inline(create(&path)?), &header)?;
        self.sync_dir();
        self.seen = (w.bytes_written(), 0);
        Ok(w)
    }

    /// Deletes the oldest closed segments until they take at most three quarters of the
    /// bound, the room a full current segment needs. Called once the new segment's state is on disk (written by `w`).
    /// A segment that cannot be deleted (a read-only or failing file system) stays counted,
    /// so newer ones go in its place; it is tried again each time.
    pub fn retire(&mut self, w: &FrameWriter<Disk>) {
        self.prologue = w.bytes_written();
        let room = self.max_total - self.max_total / 4;
        let mut deleted = false;
        self.stuck.retain(|(path, _)| {
            let gone = std::fs::remove_file(path).is_ok();
            deleted |= gone;
            !gone
        });
        let stuck: u64 = self.stuck.iter().map(|(_, n)| n).sum();
        let mut total: u64 = stuck + self.closed.iter().map(|(_, n)| n).sum::<u64>();
        while total > room {
            let Some((path, size)) = self.closed.pop_front() else {
                break;
            };
            if std::fs::remove_file(&path).is_ok() {
                total -= size;
                deleted = true;
            } else {
                self.errors.delete_failed += 1;
                self.stuck.push((path, size));
            }
        }
        if deleted {
            self.sync_dir();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_like_fail_on_leak() {
        assert_eq!(parse_size("10M"), Ok(10_000_000));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("65536"), Ok(65536));
        assert!(parse_size("1K").unwrap_err().contains("at least"));
        assert!(parse_size("10X").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }

    #[test]
    fn a_frame_closes_early_when_it_would_overfill_the_segment() {
        let dir = std::env::temp_dir().join(format!("rec-seg-early-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let base = dir.join("t.zst");
        let header = Header::default();
        let mut w = FrameWriter::new(Disk::Inline(create_first(&base).unwrap()), &header).unwrap();
        let mut s = Segments::new(&base, MIN_MAX_SIZE, header);
        // Incompressible records: the frame must close before it passes the segment size.
        let mut x = 1u64;
        let mut rotated = false;
        while !rotated {
            let data: Vec<u8> = (0..1000)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            let blob = crossprof_format::Record::Blob(crossprof_format::Blob {
                name: "x".into(),
                addr: 0,
                data,
            });
            w.push(&blob).unwrap();
            rotated = s.due(&mut w).unwrap();
        }
        let size = std::fs::metadata(&base).unwrap().len();
        assert!(
            (s.segment_limit..s.segment_limit + 2100).contains(&size),
            "{size} bytes in a {} byte segment",
            s.segment_limit
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn rotation_keeps_the_newest_segments_within_the_limit() {
        let dir = std::env::temp_dir().join(format!("rec-seg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let base = dir.join("t.zst");
        // A stale segment of an earlier recording is removed; other files, those hostside
        // would not read with it, are not.
        std::fs::write(segment_path(&base, 7), b"old").unwrap();
        for other in ["t.zst.keep", "t.zst.07"] {
            std::fs::write(dir.join(other), b"x").unwrap();
        }
        let header = Header {
            format_version: crossprof_format::FORMAT_VERSION,
            ..Default::default()
        };
        let mut w = FrameWriter::new(Disk::Inline(create_first(&base).unwrap()), &header).unwrap();
        assert!(!segment_path(&base, 7).exists());
        assert!(dir.join("t.zst.keep").exists() && dir.join("t.zst.07").exists());
        let mut s = Segments::new(&base, 256 << 10, header);
        assert_eq!(s.segment_limit, 56 << 10);
        assert!(!s.due(&mut w).unwrap());
        for i in 1..=10u32 {
            // Pretend each segment filled up.
            (s.segment_limit, s.prologue) = (0, 0);
            assert!(s.due(&mut w).unwrap());
            s.segment_limit = 64 << 10;
            w = s.next(w, u64::from(i)).unwrap();
            s.retire(&w);
        }
        // Tiny segments: all fit, nothing deleted yet.
        assert!(base.exists() && segment_path(&base, 10).exists());
        // Segments a frame past their size: the newest three closed ones stay.
        for (_, n) in s.closed.iter_mut() {
            *n = 60 << 10;
        }
        s.retire(&w);
        let left: Vec<u32> = (0..=10)
            .filter(|&i| segment_path(&base, i).exists())
            .collect();
        assert_eq!(left, vec![7, 8, 9, 10]);
        assert_eq!(s.errors(), DurabilityErrors::default());
        let bytes = std::fs::read(segment_path(&base, 10)).unwrap();
        let r = crossprof_format::Reader::new(&bytes).unwrap();
        assert_eq!((r.header().segment, r.header().segment_start_ns), (10, 10));
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_segment_that_cannot_be_deleted_is_reported_and_still_counted() {
        let dir = std::env::temp_dir().join(format!("rec-seg-stuck-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let base = dir.join("t.zst");
        let header = Header {
            format_version: crossprof_format::FORMAT_VERSION,
            ..Default::default()
        };
        let mut w = FrameWriter::new(Disk::Inline(create_first(&base).unwrap()), &header).unwrap();
        let mut s = Segments::new(&base, 256 << 10, header);
        for i in 1..=4u32 {
            (s.segment_limit, s.prologue) = (0, 0);
            assert!(s.due(&mut w).unwrap());
            s.segment_limit = 64 << 10;
            w = s.next(w, u64::from(i)).unwrap();
        }
        // Segment 0 becomes a non-empty directory: removing it as a file fails.
        std::fs::remove_file(&base).unwrap();
        std::fs::create_dir_all(base.join("x")).unwrap();
        for (_, n) in s.closed.iter_mut() {
            *n = 60 << 10;
        }
        s.retire(&w);
        // 0 stays, still counted, so 1 goes in its place: 0, 2, 3 and the current 4 remain.
        let left: Vec<u32> = (0..=4)
            .filter(|&i| segment_path(&base, i).exists())
            .collect();
        assert_eq!(left, vec![0, 2, 3, 4]);
        assert_eq!(
            s.errors(),
            DurabilityErrors {
                dir_sync_failed: 0,
                delete_failed: 1
            }
        );
        // Once it can be deleted, the next retirement does.
        std::fs::remove_dir_all(&base).unwrap();
        std::fs::write(&base, b"x").unwrap();
        s.retire(&w);
        assert!(!base.exists());
        // Totals since the start: the failure is still told.
        assert_eq!(s.errors().delete_failed, 1);
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
