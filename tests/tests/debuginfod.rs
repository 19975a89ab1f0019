//! Issue 16, acceptance 2: with no sysroot and the board's binary absent from this machine,
//! `DEBUGINFOD_URLS` pointing at Debian's debuginfod (serving a directory with `-F`, on
//! loopback in a private network namespace) gives the same report as `--sysroot`; the file
//! comes from the cache once fetched; a server that is stopped, silent, answering garbage or
//! another ELF file gives a `debuginfod-failed` diagnostic and the report still finishes, in
//! bounded time and without a wrong name.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crossprof_tests::*;
use serde_json::Value;

struct Run {
    out: PathBuf,
    program: Program,
    id: String,
    reference: Value,
}

fn build_id_hex(path: &Path) -> String {
    let o = Command::new("readelf")
        .arg("-n")
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("build-id")
        .trim()
        .to_string()
}

/// Records the program, moves its binary away, and runs tests/debuginfod/scenario.sh in a
/// private network namespace, once for every test.
fn run() -> &'static Run {
    static R: OnceLock<Run> = OnceLock::new();
    R.get_or_init(|| {
        let (program, recording) = fixtures::recorded_cpu_split("dbgd");
        let mirror = fixtures::mirror_sysroot(&program);
        let reference = report_json(&recording, Some(&mirror));
        // The host lacks the board's binary from now on.
        std::fs::rename(&program.board, program.board.with_extension("away")).unwrap();
        let served = scratch().join("dbgd-served");
        std::fs::create_dir_all(&served).unwrap();
        std::fs::copy(&program.unstripped, served.join("cpu_split")).unwrap();
        let out = scratch().join("dbgd-out");
        std::fs::create_dir_all(&out).unwrap();
        let id = build_id_hex(&program.unstripped);
        let o = Command::new("unshare")
            .arg("-n")
            .arg("--")
            .arg(root().join("tests/debuginfod/scenario.sh"))
            .env("HOSTSIDE", hostside())
            .env("REC", &recording)
            .env("SERVED", &served)
            .env("ID", &id)
            .env("OUT", &out)
            .env("OTHER_ELF", "/bin/true")
            .output()
            .expect("run unshare");
        assert!(
            o.status.success(),
            "scenario failed ({:?}): {}\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr),
            std::fs::read_to_string(out.join("debuginfod.log")).unwrap_or_default()
        );
        Run {
            out,
            program,
            id,
            reference,
        }
    })
}

fn report(r: &Run, name: &str) -> Value {
    let text = std::fs::read_to_string(r.out.join(format!("{name}.json"))).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| {
        let err = std::fs::read_to_string(r.out.join(format!("{name}.err"))).unwrap_or_default();
        panic!("{name}: {e}: {text}\n{err}")
    })
}

fn seconds(r: &Run, name: &str) -> f64 {
    let t = std::fs::read_to_string(r.out.join(format!("{name}.times"))).unwrap();
    let v: Vec<f64> = t.split_whitespace().map(|x| x.parse().unwrap()).collect();
    v[1] - v[0]
}

fn module<'a>(report: &'a Value, path: &Path) -> &'a Value {
    report["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["path"].as_str() == path.to_str())
        .unwrap_or_else(|| panic!("no module {}: {report:#}", path.display()))
}

fn debuginfod_failed(report: &Value) -> Option<&Value> {
    report["diagnostics"]
        .as_array()?
        .iter()
        .find(|d| d["kind"] == "debuginfod-failed")
}

#[test]
fn a_served_module_gives_the_same_report_as_the_sysroot() {
    let r = run();
    assert!(count(&r.reference, "hot_a", "self") > 0);
    for name in ["served", "cached"] {
        let rep = report(r, name);
        let m = module(&rep, &r.program.board);
        assert_eq!(m["match"], "build-id", "{name}");
        assert_eq!(m["found_by"], "debuginfod", "{name}");
        assert_eq!(rep["cpu"], r.reference["cpu"], "{name}: {rep:#}");
        assert!(debuginfod_failed(&rep).is_none(), "{name}: {rep:#}");
    }
    // elfutils' cache layout: BUILDID/executable and BUILDID/debuginfo.
    let cache = r.out.join("cache-served").join(&r.id);
    assert!(cache.join("executable").is_file());
    assert!(cache.join("debuginfo").is_file());
}

#[test]
fn a_broken_server_gives_a_diagnostic_and_no_wrong_name() {
    let r = run();
    for name in ["stopped", "silent", "garbage", "file"] {
        let rep = report(r, name);
        let m = module(&rep, &r.program.board);
        assert_eq!(m["match"], "missing", "{name}: {m}");
        let names: Vec<&str> = rep["cpu"]["functions"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f["function"].as_str())
            .collect();
        for wrong in ["hot_a", "hot_b", "main"] {
            assert!(!names.contains(&wrong), "{name}: {wrong} named: {names:?}");
        }
        let d = debuginfod_failed(&rep).unwrap_or_else(|| panic!("{name}: {rep:#}"));
        assert_eq!(d["count"], 1, "{name}: {d}");
        let msg = d["message"].as_str().unwrap();
        assert!(msg.contains("127.0.0.1:80"), "{name}: {msg}");
        assert!(msg.contains(&r.id), "{name}: {msg}");
        // Two artifacts, each bounded by DEBUGINFOD_TIMEOUT=2 s: never a hang.
        assert!(
            seconds(r, name) < 15.0,
            "{name} took {} s",
            seconds(r, name)
        );
        // Nothing unverified is kept.
        let cached = r.out.join(format!("cache-{name}")).join(&r.id);
        assert!(!cached.join("executable").exists(), "{name}");
        assert!(!cached.join("debuginfo").exists(), "{name}");
    }
    let garbage = report(r, "garbage");
    let msg = debuginfod_failed(&garbage).unwrap()["message"]
        .as_str()
        .unwrap();
    assert!(msg.contains("not an ELF file with this build-id"), "{msg}");
}
