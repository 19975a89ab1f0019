//! Issue 27, acceptance 3: `rec --heap --max-size 1MiB` on a program that runs for minutes.
//! Ground truth: `heap_ring.c` keeps LEAKS leaked blocks (site `leak_some`) and a ring of K
//! blocks (site `ring_slot`) live while replacing ring blocks about 100000 times a second.
//! rec is killed with SIGKILL at a random moment in the second half of the run; then the
//! disk use must stay within the bound plus a quarter (see `rec`'s `segments`), older
//! segments must have been deleted, the recording must read, and the newest segment read
//! alone must report as leaked exactly the program's live set: the LEAKS blocks and the K
//! ring blocks (K - 1 when the kill fell between a slot's free and its malloc). rec's peak
//! RSS (VmHWM, read just before the kill) is printed and must stay under 64 MiB.
//!
//! The ring's events compress to about 5 KB a second, so the suite runs 25 s bounded to
//! 64 KiB (segments of 14 KB, a few seconds each); the acceptance's 10 minutes at 1 MiB:
//! `CROSSPROF_HEAP_RING_SECS=600 CROSSPROF_HEAP_RING_MAX=1MiB cargo test --profile host
//! -p crossprof-tests --test heap_max_size -- --nocapture`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crossprof_tests::*;
use serde_json::Value;

const K: u64 = 1000;
const LEAKS: u64 = 50;

fn files(base: &Path) -> Vec<PathBuf> {
    let name = base.file_name().unwrap().to_str().unwrap().to_string();
    let mut v: Vec<(u64, PathBuf)> = std::fs::read_dir(base.parent().unwrap())
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            let n = p.file_name()?.to_str()?.to_string();
            if n == name {
                return Some((0, p));
            }
            let k = n.strip_prefix(&format!("{name}."))?.parse().ok()?;
            Some((k, p))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

fn site<'a>(r: &'a Value, name: &str) -> Option<&'a Value> {
    r["heap"]["sites"]
        .as_array()?
        .iter()
        .find(|s| s["function"].as_str() == Some(name))
}

fn leaked(r: &Value, name: &str) -> (u64, u64) {
    site(r, name).map_or((0, 0), |s| {
        (number(s, "leaked_allocations"), number(s, "leaked_bytes"))
    })
}

fn status_kib(pid: u32, key: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_bounded_heap_recording_killed_at_random_keeps_the_live_set() {
    let secs: u64 = std::env::var("CROSSPROF_HEAP_RING_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(25);
    let max_arg = std::env::var("CROSSPROF_HEAP_RING_MAX").unwrap_or_else(|_| "64KiB".into());
    let max: u64 = match max_arg.strip_suffix("KiB") {
        Some(k) => k.parse::<u64>().unwrap() << 10,
        None => max_arg.strip_suffix("MiB").unwrap().parse::<u64>().unwrap() << 20,
    };
    let p = build(
        "heap_ring.c",
        "heap_ring",
        &["-O1", "-fno-omit-frame-pointer"],
    );
    let dir = scratch().join("heap_max_size");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("ring.zst");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    // A moment in the second half of the run, at least 2 s before its end.
    let kill_at = secs * 1000 / 2 + seed % (secs * 1000 / 2 - 2000);
    eprintln!("{secs} s run, rec killed after {kill_at} ms (seed {seed})");
    let mut rec = Command::new(rec())
        .args([
            "--heap",
            "--no-cpu",
            "--flush-ms",
            "200",
            "--max-size",
            &max_arg,
        ])
        .arg("--out")
        .arg(&out)
        .arg("--")
        .arg(&p.board)
        .args([secs.to_string(), K.to_string(), LEAKS.to_string()])
        .env("CROSSPROF_HEAP_LIB", heap_lib())
        .stderr(Stdio::null())
        .spawn()
        .expect("run rec");
    let pid = rec.id();
    let mut max_used = 0;
    let mut waited = 0;
    while waited < kill_at {
        std::thread::sleep(Duration::from_millis(500));
        waited += 500;
        let used: u64 = files(&out)
            .iter()
            .filter_map(|f| std::fs::metadata(f).ok())
            .map(|m| m.len())
            .sum();
        max_used = max_used.max(used);
    }
    let hwm = status_kib(pid, "VmHWM:");
    let app: Vec<u32> = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect();
    rec.kill().expect("SIGKILL rec");
    rec.wait().unwrap();
    for a in app {
        // SAFETY: a signal to the child rec launched.
        unsafe { libc::kill(a as i32, libc::SIGKILL) };
    }
    let present = files(&out);
    eprintln!(
        "{} segment files, at most {max_used} bytes on disk for --max-size {max}; rec VmHWM {hwm} KiB",
        present.len()
    );
    assert!(max_used <= max + max / 4, "{max_used} bytes on disk");
    assert!(hwm > 0 && hwm < 64 << 10, "rec VmHWM {hwm} KiB");
    let info: Value =
        serde_json::from_str(&hostside_ok(&["info", "--json", out.to_str().unwrap()])).unwrap();
    assert_eq!(info["complete"], false, "{info:#}");
    assert!(info["first_segment"].as_u64().unwrap() > 0, "{info:#}");
    let ring_bytes: u64 = (0..K).map(|i| 32 + i * 37 % 200).sum();
    let leak_bytes: u64 = (0..LEAKS).map(|i| 1000 + i).sum();
    // The newest segment alone, then every segment present as one recording.
    let newest = present.last().unwrap().clone();
    for path in [newest, out.clone()] {
        let r = heap_report(&path, &p.sysroot, &[]);
        let (ring_n, ring_b) = leaked(&r, "ring_slot");
        let (leak_n, leak_b) = leaked(&r, "leak_some");
        eprintln!(
            "{}: leaked ring_slot {ring_n} blocks {ring_b} B (live set {K}, {ring_bytes} B), \
             leak_some {leak_n} blocks {leak_b} B (live set {LEAKS}, {leak_bytes} B)",
            path.display()
        );
        assert_eq!((leak_n, leak_b), (LEAKS, leak_bytes), "{:#}", r["heap"]);
        assert!(ring_n == K || ring_n == K - 1, "{:#}", r["heap"]);
        assert!(ring_b <= ring_bytes && ring_b + 232 >= ring_bytes);
    }
}
