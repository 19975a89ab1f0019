//! Issue 16, acceptance 3 (the Node part): Debian's Node.js runs a script with a known hot
//! function under `node --perf-basic-prof` (a perf map) or `node --perf-prof` (a jitdump);
//! `rec` carries the map or dump into the recording and, with it deleted from this machine,
//! hostside gives the hot function the share perf gives it on the same script (perf reads
//! the map from /tmp), within 5 points.
//!
//! perf's own jitdump path (`perf record -k 1` + `perf inject --jit`) is not the reference:
//! Debian's perf 6.1 aborts in `perf inject --jit` on most runs here ("assertion failed at
//! util/build-id.c:1010", then "stack smashing detected"), so perf's share comes from its
//! perf-map run of the same script.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
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

/// Runs `f` and removes the perf maps it left in /tmp; returns how many there were. One at a
/// time, across processes too (a lock file in /tmp beside the maps): the tests of this file,
/// and another checkout's suite running them at the same moment, would otherwise count (and
/// remove) each other's maps.
fn removing_new_maps(f: impl FnOnce()) -> usize {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let lock = std::fs::File::create("/tmp/crossprof-node-jit-perf-maps.lock").unwrap();
    lock.lock().unwrap();
    let before = perf_maps();
    f();
    let new: Vec<PathBuf> = perf_maps().difference(&before).cloned().collect();
    for p in &new {
        std::fs::remove_file(p).unwrap();
    }
    new.len()
}

/// The script, the CPU time it runs for (seconds: the same number of samples on any processor
/// and under any load, where a count of rounds took 1.2 s here), and the `hot.js:LINE` V8
/// puts in the hot function's name.
fn script() -> (PathBuf, &'static str, String) {
    let script = source("hot.js");
    // V8 names the function `JS:*hot /path/hot.js:LINE:COLUMN` (`~` before it is optimized;
    // Node 18's V8, Debian bookworm's, `LazyCompile:*hot /path/hot.js:LINE`).
    let line = std::fs::read_to_string(&script)
        .unwrap()
        .lines()
        .position(|l| l.starts_with("function hot("))
        .expect("function hot in hot.js")
        + 1;
    (script, "1.2", format!("hot.js:{line}"))
}

/// Whether `name` is V8's name of the JIT-compiled function at `at` (`hot.js:LINE`): a code
/// kind (`JS` since Node 20, `LazyCompile` or `Function` before) and the location, with or
/// without its column.
fn is_js_function_at(name: &str, at: &str) -> bool {
    let kind = name.split(':').next().unwrap_or("");
    let location = name.rsplit(' ').next().unwrap_or("");
    matches!(kind, "JS" | "LazyCompile" | "Function")
        && (location.ends_with(at) || location.contains(&format!("{at}:")))
}

/// perf, the reference: its report names JIT code from the map while it is there. Returns
/// the hot function's share and perf's report.
fn perf_share(dir: &Path) -> (f64, String) {
    let (script, secs, hot_at) = script();
    let data = dir.join("perf.data");
    let n = removing_new_maps(|| {
        let o = Command::new("perf")
            .current_dir(dir)
            .args(["record", "-q", "-F", "999", "-e", "cpu-clock", "-o"])
            .arg(&data)
            .args(["--", "node", "--perf-basic-prof"])
            .arg(&script)
            .arg(secs)
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
        // `    66.24%  [.] JS:*hot /path/hot.js:4:20`
        .filter(|l| {
            l.split_once("] ")
                .is_some_and(|(_, name)| is_js_function_at(name.trim(), &hot_at))
        })
        .filter_map(|l| {
            l.split_whitespace()
                .next()?
                .trim_end_matches('%')
                .parse::<f64>()
                .ok()
        })
        .sum();
    assert!(
        perf_hot > 40.0,
        "perf gives hot only {perf_hot:.1}%:\n{perf_text}"
    );
    (perf_hot, perf_text)
}

/// The hot function's share of the samples in hostside's report of `recording`.
fn hostside_share(recording: &Path) -> (f64, u64) {
    let (_, _, hot_at) = script();
    let report = report_json(recording, None);
    let samples = report["cpu"]["samples"].as_u64().unwrap();
    let ours: u64 = report["cpu"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            let name = f["function"].as_str().unwrap_or("");
            is_js_function_at(name, &hot_at)
        })
        .inspect(|f| assert_eq!(f["module"], "[jit]"))
        .map(|f| f["self"].as_u64().unwrap())
        .sum();
    assert!(samples > 500, "too few samples: {samples}");
    (100.0 * ours as f64 / samples as f64, samples)
}

/// One test's run of the script: perf's share of the hot function in a scratch directory
/// of its own, and rec's recording of node with `jit_flag` there.
struct NodeRun {
    dir: PathBuf,
    recording: PathBuf,
    perf_hot: f64,
    /// The perf maps node wrote in /tmp under rec (removed, so only the recording has them).
    maps: usize,
}

/// Runs perf on the script, then rec with `node JIT_FLAG`, in `<scratch>/<tag>`. (Node runs
/// in that directory: it writes an `isolate-*-v8.log`, and with `--perf-prof` its jitdump,
/// where it runs.)
fn record_node(tag: &str, jit_flag: &str) -> NodeRun {
    let (script, secs, _) = script();
    let dir = scratch().join(tag);
    std::fs::create_dir_all(&dir).unwrap();
    let (perf_hot, _) = perf_share(&dir);
    let recording = dir.join("node.zst");
    let maps = removing_new_maps(|| {
        let o = Command::new(rec())
            .current_dir(&dir)
            .arg("--out")
            .arg(&recording)
            .args(["--call-graph", "fp", "--", "node", jit_flag])
            .arg(&script)
            .arg(secs)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    });
    NodeRun {
        dir,
        recording,
        perf_hot,
        maps,
    }
}

/// Asserts hostside's share of the hot function is within 5 points of perf's; `what` says
/// what the recording carried, for the log.
fn assert_perfs_share(run: &NodeRun, what: &str) {
    let perf_hot = run.perf_hot;
    let (ours_pct, samples) = hostside_share(&run.recording);
    eprintln!("hot ({what}): hostside {ours_pct:.1}% of {samples} samples, perf {perf_hot:.1}%");
    assert!(
        (ours_pct - perf_hot).abs() <= 5.0,
        "hot: hostside {ours_pct:.1}% vs perf {perf_hot:.1}%"
    );
}

#[test]
fn the_hot_js_function_has_perfs_share() {
    let (_, _, hot_at) = script();
    // rec, then no map left on this machine.
    let run = record_node("node", "--perf-basic-prof");
    assert!(run.maps >= 1, "node wrote no perf map under rec");
    let bytes = std::fs::read(&run.recording).unwrap();
    let mut reader = Reader::new(&bytes).unwrap();
    let mut carried = 0;
    while let Some(r) = reader.next_record() {
        if let Record::JitMap(j) = r {
            assert!(!j.truncated);
            carried += usize::from(String::from_utf8_lossy(&j.data).contains(&hot_at));
        }
    }
    assert_eq!(carried, 1, "the recording carries node's map");
    assert_perfs_share(&run, "perf map");
}

#[test]
fn the_hot_js_function_named_from_nodes_jitdump_has_perfs_share() {
    let (_, _, hot_at) = script();
    // rec with `--perf-prof`: V8 writes jit-PID.dump into its working directory and maps it.
    let run = record_node("node-jitdump", "--perf-prof");
    assert_eq!(run.maps, 0, "--perf-prof alone writes no perf map");
    let mut dumps = 0;
    for e in std::fs::read_dir(&run.dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if crossprof_format::is_jitdump(&name) || name.ends_with("-v8.log") {
            dumps += usize::from(name.ends_with(".dump"));
            std::fs::remove_file(&p).unwrap();
        }
    }
    assert_eq!(dumps, 1, "node wrote one jitdump under rec");
    let bytes = std::fs::read(&run.recording).unwrap();
    let mut reader = Reader::new(&bytes).unwrap();
    let (mut pieces, mut size, mut file_size) = (0, 0u64, 0);
    while let Some(r) = reader.next_record() {
        if let Record::JitMap(j) = r {
            assert_eq!((j.kind.as_str(), j.truncated), ("jitdump", false));
            assert_eq!(j.offset, size, "pieces in file order");
            pieces += 1;
            size += j.data.len() as u64;
            file_size = j.file_size;
        }
    }
    assert!(size > 0, "the recording carries node's jitdump");
    assert_eq!(size, file_size, "all of it");
    assert_perfs_share(
        &run,
        &format!("{hot_at}, jitdump of {size} bytes in {pieces} pieces"),
    );
}
