//! Issue 27, "bounded and long": `rec`'s own memory stays bounded however much the program
//! leaks. Ground truth: `heap_leaker.c` leaks about RATE blocks a second at `leak_one`, frees
//! half of them at the end (in `release`) and prints what it allocated and left live.
//!
//! The same program is recorded twice: with `--heap-max-live 4096` (rec tracks at most 4,096
//! live blocks and hands the rest to the file with their address) and with a limit above the
//! program's live set (rec tracks every block). Both reports must give the program's exact
//! counts: allocations, frees matched (the leaked count and bytes), peak bytes. rec's peak RSS
//! (VmHWM, polled while it runs) must be far smaller in the bounded run: its live-block
//! table is the one part of rec that grows with the program's live set.
//!
//! A second test records `heap_ring.c` for 2 s and 12 s: `hostside report --heap` and `html`
//! must take about the same memory for both (they stream the recording).
//!
//! The suite runs 3 s at 200,000 blocks a second; a long run, e.g. 10 minutes at 5,000 a
//! second: `CROSSPROF_HEAP_LEAK_SECS=600 CROSSPROF_HEAP_LEAK_RATE=5000 cargo test --profile
//! host -p crossprof-tests --test heap_bounded -- --nocapture` (bench/RESULTS.md).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crossprof_tests::*;
use serde_json::Value;

fn env_or(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Runs `rec --heap --no-cpu --heap-max-live LIMIT` on the leaker; returns rec's VmHWM in
/// KiB (polled until it exits) and the program's stdout.
fn record(board: &Path, out: &Path, limit: u64, secs: u64, rate: u64) -> (u64, String) {
    let mut rec = Command::new(rec())
        .args(["--heap", "--no-cpu", "--heap-max-live", &limit.to_string()])
        .arg("--out")
        .arg(out)
        .arg("--")
        .arg(board)
        .args([secs.to_string(), rate.to_string()])
        .env("CROSSPROF_HEAP_LIB", heap_lib())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run rec");
    let pid = rec.id();
    let mut hwm = 0;
    let mut last_report = std::time::Instant::now();
    while rec.try_wait().expect("wait for rec").is_none() {
        if let Some(h) = status_kib(pid, "VmHWM:") {
            hwm = hwm.max(h);
        }
        if last_report.elapsed() > Duration::from_secs(30) {
            let rss = status_kib(pid, "VmRSS:").unwrap_or(0);
            eprintln!("limit {limit}: rec VmRSS {rss} KiB, VmHWM {hwm} KiB");
            last_report = std::time::Instant::now();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = rec.wait_with_output().expect("rec output");
    assert!(o.status.success(), "rec failed: {:?}", o.status);
    (hwm, String::from_utf8_lossy(&o.stdout).into_owned())
}

fn site<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["heap"]["sites"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["function"].as_str() == Some(name)))
        .unwrap_or_else(|| panic!("no site {name}: {r:#}"))
}

#[test]
fn rec_memory_stays_bounded_while_a_program_leaks_and_counts_stay_exact() {
    let secs = env_or("CROSSPROF_HEAP_LEAK_SECS", 3);
    let rate = env_or("CROSSPROF_HEAP_LEAK_RATE", 200_000);
    let p = build(
        "heap_leaker.c",
        "heap_leaker",
        &["-O1", "-fno-omit-frame-pointer"],
    );
    let dir = scratch().join("heap_bounded");
    std::fs::create_dir_all(&dir).unwrap();
    let mut hwms = Vec::new();
    for (limit, name) in [
        (4096, "bounded"),
        (secs * rate * 2 + 1_000_000, "unbounded"),
    ] {
        let out = dir.join(format!("{name}.zst"));
        let (hwm, stdout) = record(&p.board, &out, limit, secs, rate);
        let truth: Vec<u64> = stdout
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        let [allocated, leaked, leaked_bytes] = truth[..] else {
            panic!("program output: {stdout:?}");
        };
        let r = heap_report(&out, &p.sysroot, &[]);
        let h = &r["heap"];
        eprintln!(
            "{name} (--heap-max-live {limit}): {allocated} blocks, {leaked} leaked; rec VmHWM \
             {hwm} KiB"
        );
        let leak = site(&r, "leak_one");
        assert_eq!(number(leak, "allocations"), allocated, "{name}");
        assert_eq!(number(h, "allocations"), allocated, "{name}");
        assert_eq!(number(leak, "leaked_allocations"), leaked, "{name}");
        assert_eq!(number(leak, "leaked_bytes"), leaked_bytes, "{name}");
        assert_eq!(number(h, "leaked_bytes"), leaked_bytes, "{name}");
        let all_bytes: u64 = (0..allocated).map(|i| 16 + i % 7 * 8).sum();
        assert_eq!(number(h, "peak_bytes"), all_bytes, "{name}");
        assert_eq!(number(h, "lost_events"), 0, "{name}");
        hwms.push((allocated, hwm));
    }
    let (allocated, bounded) = hwms[0];
    let unbounded = hwms[1].1;
    // Tracking every block costs at least 16 bytes each (the table's slots); the bounded run
    // tracks 4,096.
    let table_kib = allocated * 16 / 1024;
    assert!(
        bounded + table_kib / 2 < unbounded,
        "rec VmHWM {bounded} KiB bounded vs {unbounded} KiB unbounded ({allocated} live blocks)"
    );
}

/// Runs `hostside ARGS` to completion; its peak RSS in KiB (`ru_maxrss` of its own wait4).
fn hostside_peak_kib(args: &[&str]) -> u64 {
    // Reaped by the wait4 below, which also gives its rusage (Child::wait does not).
    #[allow(clippy::zombie_processes)]
    let child = Command::new(hostside())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run hostside");
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for the child spawned above.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, writing into the two locals.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "hostside {args:?}: status {status}"
    );
    usage.ru_maxrss as u64
}

/// The reports stream a recording: `report --heap` and `html` of a recording with about
/// eight times the heap events (the same program, `heap_ring.c`, for 12 s instead of 2 s:
/// about 2 million events against 240,000, the same live set) take about the same memory
/// (8.5 MiB for both here).
#[test]
fn reports_of_a_longer_recording_take_no_more_memory() {
    let p = build(
        "heap_ring.c",
        "heap_ring_bounded",
        &["-O1", "-fno-omit-frame-pointer"],
    );
    let dir = scratch().join("heap_bounded_reports");
    std::fs::create_dir_all(&dir).unwrap();
    let mut peaks = Vec::new();
    for secs in [2, 12] {
        let out = dir.join(format!("ring{secs}.zst"));
        let o = Command::new(rec())
            .args(["--heap", "--no-cpu", "--out"])
            .arg(&out)
            .arg("--")
            .arg(&p.board)
            .args([secs.to_string().as_str(), "1000", "50"])
            .env("CROSSPROF_HEAP_LIB", heap_lib())
            .output()
            .expect("run rec");
        assert!(o.status.success(), "rec failed: {o:?}");
        let (f, s) = (out.to_str().unwrap(), p.sysroot.to_str().unwrap());
        let html = dir.join(format!("ring{secs}.html"));
        let report = hostside_peak_kib(&["report", "--heap", "--sysroot", s, f]);
        let page = hostside_peak_kib(&["html", "--sysroot", s, "-o", html.to_str().unwrap(), f]);
        let r = heap_report(&out, &p.sysroot, &[]);
        let allocations = number(&r["heap"], "allocations");
        eprintln!(
            "{secs} s: {allocations} allocations; hostside report --heap {report} KiB, html {page} KiB"
        );
        peaks.push((allocations, report, page));
    }
    let ((short, r0, h0), (long, r1, h1)) = (peaks[0], peaks[1]);
    assert!(long > short * 4, "{short} then {long} allocations");
    // Every event held would cost more than 16 bytes each: over 80 MB for the long one.
    assert!(r1 < r0 + r0 / 4, "report: {r0} KiB then {r1} KiB");
    assert!(h1 < h0 + h0 / 4, "html: {h0} KiB then {h1} KiB");
}
