//! Issue 2, acceptance 5: a recording survives `kill -9` of rec, truncation at any byte and bit
//! flips. hostside never panics, and every frame that was complete before the cut comes back
//! with exactly its samples.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crossprof_format::{Reader, Record};
use crossprof_symbols::Lookup;
use crossprof_tests::*;
use hostside::output::{info, text};
use hostside::pipeline::{analyze, Wants};
use hostside::recording::Recording;

/// A finished 10-second recording and, for each complete frame, (end offset, samples up to it).
struct Finished {
    bytes: Vec<u8>,
    frame_ends: Vec<(usize, u64)>,
    program: Program,
}

fn finished() -> &'static Finished {
    static F: OnceLock<Finished> = OnceLock::new();
    F.get_or_init(|| {
        let program = build("cpu_phases.c", "power", C_FP);
        let out = scratch().join("power.zst");
        // 10 seconds of CPU time, so at least 10 s of wall time and 10 flushes of the default
        // 1 s interval on any processor and under any load (a count of rounds took 11 s here
        // and would take 5 on a processor twice as fast).
        // Frame-pointer chains keep this 10 s file small: every prefix test re-reads it.
        record(
            &out,
            &["--call-graph", "fp"],
            &[program.board.to_str().unwrap(), "10", "0", "0"],
        );
        let bytes = std::fs::read(&out).unwrap();
        let mut frame_ends = Vec::new();
        let mut r = Reader::new(&bytes).unwrap();
        let mut samples = 0u64;
        let mut last_end = r.summary().bytes_read;
        while let Some(rec) = r.next_record() {
            let end = r.summary().bytes_read;
            if end != last_end {
                // The record just returned is the first of a new frame; the previous frame is whole.
                frame_ends.push((last_end as usize, samples));
                last_end = end;
            }
            if let Record::Sample(_) = rec {
                samples += 1;
            }
        }
        frame_ends.push((last_end as usize, samples));
        assert!(r.summary().complete);
        assert!(
            frame_ends.len() >= 10,
            "a 10 s recording flushed only {} frames",
            frame_ends.len()
        );
        Finished {
            bytes,
            frame_ends,
            program,
        }
    })
}

fn expected_samples(f: &Finished, cut: usize) -> u64 {
    f.frame_ends
        .iter()
        .take_while(|(end, _)| *end <= cut)
        .last()
        .map_or(0, |(_, n)| *n)
}

fn reader_samples(data: &[u8]) -> Option<u64> {
    let mut r = Reader::new(data).ok()?;
    let mut n = 0;
    while let Some(rec) = r.next_record() {
        if let Record::Sample(_) = rec {
            n += 1;
        }
    }
    Some(n)
}

/// The full in-process pipeline a user runs: info, then report (text and the analysis behind
/// the JSON). Returns the sample count the report saw.
fn full_report(data: Vec<u8>, lookup: &Lookup) -> Option<u64> {
    let rec = Recording::from_bytes(Path::new("cut.zst"), data.clone()).ok()?;
    let i = info::collect(&rec);
    let mut sink = Vec::new();
    info::print(&mut sink, &i).unwrap();
    let l = analyze(
        Recording::from_bytes(Path::new("cut.zst"), data).ok()?,
        lookup,
        Wants::default(),
    )
    .ok()?;
    text::cpu_report(&mut sink, &l.context(), &l.cpu, 10).unwrap();
    assert_eq!(i.records.get("sample").copied().unwrap_or(0), l.cpu.samples);
    Some(l.cpu.samples)
}

#[test]
fn every_cut_in_the_last_64k_recovers_every_complete_frame() {
    let f = finished();
    let start = f.bytes.len().saturating_sub(64 << 10);
    let header_end = f.frame_ends[0].0;
    for cut in start..=f.bytes.len() {
        if cut < header_end {
            assert_eq!(
                reader_samples(&f.bytes[..cut]),
                None,
                "a cut inside the header frame leaves no recording"
            );
            continue;
        }
        let got = reader_samples(&f.bytes[..cut])
            .unwrap_or_else(|| panic!("prefix of {cut} bytes unreadable"));
        assert_eq!(got, expected_samples(f, cut), "cut at {cut}");
        let rec = Recording::from_bytes(Path::new("cut.zst"), f.bytes[..cut].to_vec()).unwrap();
        let i = info::collect(&rec);
        assert_eq!(i.complete, cut == f.bytes.len(), "cut at {cut}");
        let whole = f
            .frame_ends
            .iter()
            .take_while(|(end, _)| *end <= cut)
            .last()
            .map_or(0, |(e, _)| *e);
        assert_eq!(i.bytes_discarded as usize, cut - whole, "cut at {cut}");
    }
    // The whole analysis on a sample of those cuts (symbolizing each one is slower).
    let lookup = Lookup {
        sysroot: Some(f.program.sysroot.clone()),
        debug_dirs: vec![],
        search_dirs: vec![],
    };
    for cut in (start.max(header_end)..=f.bytes.len()).step_by(509) {
        assert_eq!(
            full_report(f.bytes[..cut].to_vec(), &lookup),
            Some(expected_samples(f, cut)),
            "cut at {cut}"
        );
    }
}

#[test]
fn random_cuts_anywhere_recover_every_complete_frame() {
    let f = finished();
    let lookup = Lookup {
        sysroot: Some(f.program.sysroot.clone()),
        debug_dirs: vec![],
        search_dirs: vec![],
    };
    let header_end = f.frame_ends[0].0;
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for i in 0..1000 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let cut = (rng % f.bytes.len() as u64) as usize;
        let got = reader_samples(&f.bytes[..cut]);
        if cut < header_end {
            assert_eq!(
                got, None,
                "a cut inside the header frame leaves no recording"
            );
            continue;
        }
        assert_eq!(got, Some(expected_samples(f, cut)), "cut at {cut}");
        if i % 10 == 0 {
            assert_eq!(
                full_report(f.bytes[..cut].to_vec(), &lookup),
                Some(expected_samples(f, cut))
            );
        }
    }
}

#[test]
fn bit_flips_never_panic_and_never_invent_samples() {
    let f = finished();
    let lookup = Lookup {
        sysroot: Some(f.program.sysroot.clone()),
        debug_dirs: vec![],
        search_dirs: vec![],
    };
    let total = *f.frame_ends.last().map(|(_, n)| n).unwrap();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..1000 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let mut d = f.bytes.clone();
        let bit = (rng % (d.len() as u64 * 8)) as usize;
        d[bit / 8] ^= 1 << (bit % 8);
        // A flipped frame fails its checksum: only the frames before it come back.
        if let Some(n) = reader_samples(&d) {
            assert!(n <= total);
            assert!(
                n >= expected_samples(f, bit / 8),
                "flip at byte {} lost intact frames before it",
                bit / 8
            );
        }
        if i % 20 == 0 {
            full_report(d, &lookup);
        }
    }
}

#[test]
fn hostside_binary_reports_a_torn_file_as_incomplete() {
    let f = finished();
    let cut = f.bytes.len() - 100;
    let path = scratch().join("torn.zst");
    std::fs::write(&path, &f.bytes[..cut]).unwrap();
    let text = hostside_ok(&["info", path.to_str().unwrap()]);
    assert!(text.contains("INCOMPLETE"), "{text}");
    let j: serde_json::Value =
        serde_json::from_str(&hostside_ok(&["report", "--json", path.to_str().unwrap()])).unwrap();
    assert_eq!(j["recording"]["complete"], false);
    assert_eq!(
        j["recording"]["bytes_discarded"].as_u64(),
        Some((cut - f.frame_ends[f.frame_ends.len() - 2].0) as u64)
    );
}

fn pids_of(path: &Path) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() {
            if std::fs::read_link(e.path().join("exe")).ok().as_deref() == Some(path) {
                v.push(pid);
            }
        }
    }
    v
}

#[test]
fn kill_9_of_rec_keeps_everything_synced_before_it() {
    let p = build("cpu_split.c", "kill9", C_FP);
    let out: PathBuf = scratch().join("kill9.zst");
    let mut rec = Command::new(rec())
        .args(["--call-graph", "fp", "--out"])
        .arg(&out)
        .arg("--")
        .arg(&p.board)
        .arg("0")
        .spawn()
        .unwrap();
    // Killed once the program has used 3 s of CPU time under rec (the kernel's accounting):
    // several flushes' worth of samples however little CPU a loaded machine leaves it, and it
    // ran right up to the kill, so its newest samples are from just before it.
    {
        let _rec = cpu_time::KillOnPanic(rec.id());
        let app = cpu_time::child_of(rec.id());
        let _app = cpu_time::KillOnPanic(app);
        cpu_time::wait_for_recording(&out);
        cpu_time::run_for_cpu(app, 3.0);
    }
    // The moment of the kill on the clock rec stamps records with (CLOCK_MONOTONIC), not time
    // since the spawn: rec's own start-up, slow on a loaded machine, is not lost data.
    let kill_at = monotonic_ns();
    rec.kill().unwrap(); // SIGKILL
    rec.wait().unwrap();
    for pid in pids_of(&p.board) {
        unsafe_kill(pid);
    }
    let bytes = std::fs::read(&out).unwrap();
    let n = reader_samples(&bytes).expect("file readable after kill -9");
    // At most one flush interval (1 s) is lost. Judged by time, not by a sample count, so a
    // loaded machine (fewer samples per second) cannot fail it: the newest surviving sample is
    // at most the flush interval plus slack older than the kill.
    let mut r = Reader::new(&bytes).unwrap();
    let mut last = 0;
    while let Some(rec) = r.next_record() {
        if let Record::Sample(s) = rec {
            last = last.max(s.time);
        }
    }
    let lost = kill_at.saturating_sub(last);
    assert!(n > 100, "only {n} samples survived");
    assert!(
        lost <= 1_600_000_000,
        "the newest surviving sample is {:.2} s older than the kill",
        lost as f64 / 1e9
    );
    let j: serde_json::Value = serde_json::from_str(&hostside_ok(&[
        "report",
        "--json",
        "--sysroot",
        p.sysroot.to_str().unwrap(),
        out.to_str().unwrap(),
    ]))
    .unwrap();
    assert_eq!(j["recording"]["complete"], false);
    assert_eq!(j["cpu"]["samples"].as_u64(), Some(n));
    let (a, b) = (count(&j, "hot_a", "self"), count(&j, "hot_b", "self"));
    assert!(is_three_to_one(a, b), "{a} vs {b}");
}

/// Nanoseconds on CLOCK_MONOTONIC.
fn monotonic_ns() -> u64 {
    // SAFETY: ts is a valid timespec for clock_gettime to fill.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn unsafe_kill(pid: u32) {
    let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
}
