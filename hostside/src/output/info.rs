//! `hostside info`: what a recording holds and whether it is whole, without symbolizing.

use std::collections::BTreeMap;
use std::io::{self, Write};

use crossprof_format::Record;
use serde::Serialize;

use crate::recording::Recording;

/// Everything `info` prints.
#[derive(Serialize)]
pub struct Info {
    /// The file.
    pub path: String,
    /// Format version of the writer.
    pub format_version: u32,
    /// Board architecture.
    pub arch: String,
    /// Whether the board is big-endian.
    pub big_endian: bool,
    /// Pointer size on the board.
    pub pointer_size: u8,
    /// Page size on the board.
    pub page_size: u32,
    /// Board kernel release.
    pub kernel_release: String,
    /// Board host name.
    pub hostname: String,
    /// Profiled command.
    pub command: Vec<String>,
    /// Sampling frequency.
    pub sample_freq: u32,
    /// Call-graph mode.
    pub call_graph: String,
    /// Sampling event.
    pub event: String,
    /// Version of `rec`.
    pub rec_version: String,
    /// Start time, ns since the epoch.
    pub start_unix_ns: u64,
    /// Whether the recording ended normally.
    pub complete: bool,
    /// Frames decoded.
    pub frames: u64,
    /// Bytes decoded.
    pub bytes_read: u64,
    /// Bytes discarded at the end.
    pub bytes_discarded: u64,
    /// Why reading stopped early, if it did.
    pub damage: Option<String>,
    /// Record counts by kind.
    pub records: BTreeMap<&'static str, u64>,
    /// Distinct processes seen.
    pub processes: u64,
    /// Distinct threads seen.
    pub threads: u64,
    /// The application's exit status, when the recording is complete.
    pub exit_status: Option<i64>,
    /// Samples lost.
    pub lost_samples: u64,
    /// Every `Lost` record's count, by kind: what the kernel dropped (`samples`), what the
    /// heap interposer dropped (`heap`), and what `rec` itself could not do, its durability
    /// errors included (`segment-delete-failed`, `directory-sync-failed`).
    pub lost: BTreeMap<String, u64>,
    /// Mapped files and their build-ids (hex), by path.
    pub modules: BTreeMap<String, String>,
    /// Segment files read (1 unless recorded with `rec --max-size`).
    pub segments: u64,
    /// The oldest segment present (0 when none was deleted).
    pub first_segment: u32,
    /// The newest segment.
    pub last_segment: u32,
    /// Nanoseconds from the start of the oldest segment present to the last record.
    pub covered_ns: u64,
}

/// Reads the whole file once and summarizes it.
pub fn collect(rec: &Recording) -> Info {
    let h = rec.header().clone();
    let mut records: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut pids = std::collections::BTreeSet::new();
    let mut tids = std::collections::BTreeSet::new();
    let mut modules = BTreeMap::new();
    let mut exit_status = None;
    let mut lost_samples = 0;
    let mut lost: BTreeMap<String, u64> = BTreeMap::new();
    let mut last_time = h.start_clock_ns;
    let summary = rec.for_each(|r| {
        let time = match &r {
            Record::Sample(s) => s.time,
            Record::EventSample(e) => e.sample.time,
            Record::Switch(s) => s.time,
            Record::Comm(c) => c.time,
            Record::Mmap(m) => m.time,
            Record::Fork(t) | Record::Exit(t) => t.time,
            Record::End(e) => e.time,
            _ => 0,
        };
        last_time = last_time.max(time);
        let kind = match &r {
            Record::Header(_) => "header",
            Record::Comm(c) => {
                pids.insert(c.pid);
                tids.insert(c.tid);
                "comm"
            }
            Record::Fork(t) => {
                pids.insert(t.pid);
                tids.insert(t.tid);
                "fork"
            }
            Record::Exit(_) => "exit",
            Record::Mmap(m) => {
                if m.path.starts_with('/') && m.prot & 4 != 0 {
                    modules.insert(m.path.clone(), hex(&m.build_id));
                }
                "mmap"
            }
            Record::Sample(s) => {
                pids.insert(s.pid);
                tids.insert(s.tid);
                "sample"
            }
            Record::Switch(_) => "switch",
            Record::EventSample(_) => "event_sample",
            Record::JitMap(_) => "jit_map",
            Record::ThreadState(_) => "thread_state",
            Record::Alloc(_) => "alloc",
            Record::Free(_) => "free",
            Record::StackNode(_) => "stack_node",
            Record::Lost(l) => {
                if l.kind == "samples" {
                    lost_samples += l.count;
                }
                l.tally(&mut lost);
                "lost"
            }
            Record::Rss(_) => "rss",
            Record::AnonMap(_) => "anon_map",
            Record::RssSplit(_) => "rss_split",
            Record::Blob(_) => "blob",
            Record::End(e) => {
                exit_status = Some(e.exit_status);
                "end"
            }
            Record::Unknown(_) => "unknown",
        };
        *records.entry(kind).or_default() += 1;
    });
    Info {
        path: rec.path().display().to_string(),
        format_version: h.format_version,
        arch: h.arch,
        big_endian: h.big_endian,
        pointer_size: h.pointer_size,
        page_size: h.page_size,
        kernel_release: h.kernel_release,
        hostname: h.hostname,
        command: h.command,
        sample_freq: h.sample_freq,
        call_graph: h.call_graph,
        event: h.event,
        rec_version: h.rec_version,
        start_unix_ns: h.start_unix_ns,
        complete: summary.complete,
        frames: summary.frames_read(),
        bytes_read: summary.bytes_read,
        bytes_discarded: summary.bytes_discarded,
        damage: summary.damage.map(|d| d.to_string()),
        records,
        processes: pids.len() as u64,
        threads: tids.len() as u64,
        exit_status,
        lost_samples,
        lost,
        modules,
        segments: rec.segment_count() as u64,
        first_segment: rec.segment_range().0,
        last_segment: rec.segment_range().1,
        covered_ns: last_time - h.start_clock_ns,
    }
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Prints `info` for people.
pub fn print(out: &mut dyn Write, i: &Info) -> io::Result<()> {
    writeln!(out, "file          {}", i.path)?;
    writeln!(
        out,
        "format        version {}, written by rec {}",
        i.format_version, i.rec_version
    )?;
    writeln!(
        out,
        "board         {} ({}, {}-bit, {}-endian, {} B pages), kernel {}",
        i.hostname,
        i.arch,
        i.pointer_size as u32 * 8,
        if i.big_endian { "big" } else { "little" },
        i.page_size,
        i.kernel_release
    )?;
    writeln!(out, "command       {}", i.command.join(" "))?;
    writeln!(
        out,
        "sampling      {} at {} Hz, call graphs: {}",
        i.event, i.sample_freq, i.call_graph
    )?;
    let state = if i.complete {
        match i.exit_status {
            Some(s) => format!("complete (application exit status {s})"),
            None => "complete".into(),
        }
    } else {
        format!(
            "INCOMPLETE: {} ({} bytes discarded)",
            i.damage
                .as_deref()
                .unwrap_or("no end record; recording was cut off"),
            i.bytes_discarded
        )
    };
    writeln!(out, "state         {state}")?;
    writeln!(out, "frames        {} ({} bytes)", i.frames, i.bytes_read)?;
    if i.segments > 1 || i.first_segment > 0 {
        let deleted = if i.first_segment > 0 {
            ", older ones deleted by --max-size"
        } else {
            ""
        };
        writeln!(
            out,
            "segments      {} ({} to {}{deleted}), covering {:.2} s",
            i.segments,
            i.first_segment,
            i.last_segment,
            i.covered_ns as f64 / 1e9
        )?;
    }
    writeln!(
        out,
        "tasks         {} processes, {} threads",
        i.processes, i.threads
    )?;
    writeln!(out, "lost samples  {}", i.lost_samples)?;
    let other: Vec<String> = i
        .lost
        .iter()
        .filter(|(k, _)| k.as_str() != "samples")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if !other.is_empty() {
        writeln!(out, "rec lost      {}", other.join(" "))?;
    }
    let recs: Vec<String> = i.records.iter().map(|(k, v)| format!("{k}={v}")).collect();
    writeln!(out, "records       {}", recs.join(" "))?;
    writeln!(out, "modules")?;
    for (path, id) in &i.modules {
        writeln!(
            out,
            "  {} {}",
            if id.is_empty() { "(no build-id)" } else { id },
            path
        )?;
    }
    Ok(())
}
