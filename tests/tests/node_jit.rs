//! Issue 16, acceptance 3 (the Node part): Debian's Node.js runs a script with a known hot
//! function under `node --perf-basic-prof`; `rec` carries the perf map into the recording and,
//! with the map deleted from this machine, hostside gives the hot function the share perf
//! gives it on the same script (perf reads the map from /tmp), within 5 points.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Command;

use crossprof_format::{Reader, Record};
use crossprof_tests::*;

/// The perf maps in /tmp now.
fn perf_maps() -> HashSet<PathBuf> {
    std::fs::read_dir("/tmp")
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n.starts_with("perf-") && n.ends_with(".map")
        })
        .collect()
}

/// Runs `f` and removes the perf maps it left in /tmp; returns how many there were.
fn removing_new_maps(f: impl FnOnce()) -> usize {
    let before = perf_maps();
    f();
    let new: Vec<PathBuf> = perf_maps().difference(&before).cloned().collect();
    for p in &new {
        std::fs::remove_file(p).unwrap();
    }
    new.len()
}

#[test]
fn the_hot_js_function_has_perfs_share() {
    let script = source("hot.js");
    let dir = scratch().join("node");
    std::fs::create_dir_all(&dir).unwrap();
    let rounds = "60";
    // V8 names the function `JS:*hot /path/hot.js:LINE:COLUMN` (`~` before it is optimized).
    let line = std::fs::read_to_string(&script)
        .unwrap()
        .lines()
        .position(|l| l.starts_with("function hot("))
        .expect("function hot in hot.js")
        + 1;
    let hot_at = format!("hot.js:{line}:");

    // perf, the reference: its report names JIT code from the map while it is there.
    let data = dir.join("perf.data");
    let n = removing_new_maps(|| {
        let o = Command::new("perf")
            .args(["record", "-q", "-F", "999", "-e", "cpu-clock", "-o"])
            .arg(&data)
            .args(["--", "node", "--perf-basic-prof"])
            .arg(&script)
            .arg(rounds)
            .output()
            .expect("perf record (Debian linux-perf)");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let o = Command::new("perf")
            .args(["report", "--stdio", "--no-children", "--sort", "sym"])
            .args(["--percent-limit", "0", "-i"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::write(dir.join("perf.txt"), &o.stdout).unwrap();
    });
    assert!(n >= 1, "node wrote no perf map");
    let perf_text = std::fs::read_to_string(dir.join("perf.txt")).unwrap();
    let perf_hot: f64 = perf_text
        .lines()
        .filter(|l| l.contains("JS:") && l.contains(&hot_at))
        .filter_map(|l| {
            l.split_whitespace()
                .next()?
                .trim_end_matches('%')
                .parse::<f64>()
                .ok()
        })
        .sum();

    // rec, then no map left on this machine.
    let recording = dir.join("node.zst");
    let n = removing_new_maps(|| {
        record(
            &recording,
            &["--call-graph", "fp"],
            &[
                "node",
                "--perf-basic-prof",
                script.to_str().unwrap(),
                rounds,
            ],
        );
    });
    assert!(n >= 1, "node wrote no perf map under rec");
    let bytes = std::fs::read(&recording).unwrap();
    let mut reader = Reader::new(&bytes).unwrap();
    let mut carried = 0;
    while let Some(r) = reader.next_record() {
        if let Record::JitMap(j) = r {
            assert!(!j.truncated);
            carried += usize::from(String::from_utf8_lossy(&j.data).contains(&hot_at));
        }
    }
    assert_eq!(carried, 1, "the recording carries node's map");
    let report = report_json(&recording, None);
    let samples = report["cpu"]["samples"].as_u64().unwrap();
    let ours: u64 = report["cpu"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            let name = f["function"].as_str().unwrap_or("");
            name.starts_with("JS:") && name.contains(&hot_at)
        })
        .inspect(|f| assert_eq!(f["module"], "[jit]"))
        .map(|f| f["self"].as_u64().unwrap())
        .sum();
    assert!(samples > 500, "too few samples: {samples}");
    let ours_pct = 100.0 * ours as f64 / samples as f64;
    eprintln!("hot: hostside {ours_pct:.1}% of {samples} samples, perf {perf_hot:.1}%");
    assert!(
        perf_hot > 40.0,
        "perf gives hot only {perf_hot:.1}%:\n{perf_text}"
    );
    assert!(
        (ours_pct - perf_hot).abs() <= 5.0,
        "hot: hostside {ours_pct:.1}% vs perf {perf_hot:.1}%"
    );
}
