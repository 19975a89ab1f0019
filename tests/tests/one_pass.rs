//! Issue 26, acceptance 1: one pass over the stacks for every profile. `mutex_split.c`
//! recorded with CPU samples, off-CPU waits with their wakers, a fault event and heap events;
//! `hostside --verbose report --json` reads it in two passes, the metadata pass and one pass
//! that feeds every profile, and together they decode every compressed frame of the file once:
//! the metadata pass the records frames, the other the bulk frames of samples and heap events
//! (the frame pairs of recorder/format/src/pairs.rs). Each profile of that shared
//! pass is the one a pass made for fewer profiles gives (the text reports ask for one profile
//! besides the CPU one), and matches what the program measured itself.

use std::path::Path;
use std::process::Command;

use crossprof_tests::*;
use serde_json::Value;

/// `hostside --verbose ARGS`: the standard output and each pass's (what, frames decoded).
fn verbose(args: &[&str]) -> (String, Vec<(String, u64)>) {
    let o = Command::new(hostside())
        .arg("--verbose")
        .args(args)
        .output()
        .expect("run hostside");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "hostside {args:?}: {err}");
    // "hostside: FILE: read WHAT in S s, N frames decoded"
    let passes = err
        .lines()
        .filter_map(|l| {
            let (_, rest) = l.split_once(": read ")?;
            let (what, rest) = rest.split_once(" in ")?;
            let frames = rest.split(", ").nth(1)?.strip_suffix(" frames decoded")?;
            Some((what.to_string(), frames.parse().ok()?))
        })
        .collect();
    (String::from_utf8(o.stdout).expect("utf-8"), passes)
}

/// The number just before `unit` on the first line of `text` holding `unit`.
fn number_before(text: &str, unit: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.contains(unit))
        .unwrap_or_else(|| panic!("no {unit:?} in {text}"));
    let before = line.split(unit).next().unwrap_or_default();
    before
        .split([' ', '('])
        .rfind(|w| !w.is_empty())
        .unwrap_or_default()
        .to_string()
}

#[test]
fn every_profile_comes_from_one_pass_over_the_stacks() {
    let options = ["--heap", "-e", "cpu-clock,page-faults", "--flush-ms", "20"];
    let m = fixtures::recorded_mutex_split_with("one_pass", &options);
    let (file, sysroot) = (path_str(&m.recording), path_str(&m.program.sysroot));
    let info: Value =
        serde_json::from_str(&hostside_ok(&["info", "--json", file])).expect("info json");
    let frames = info["frames"].as_u64().expect("frames");
    assert!(
        frames >= 20,
        "only {frames} frames: --flush-ms 20 makes many"
    );

    let report = [
        "report",
        "--json",
        "--top",
        "1000",
        "--event",
        "page-faults",
        "--sysroot",
        sysroot,
        file,
    ];
    let (json, passes) = verbose(&report);
    let names: Vec<&str> = passes.iter().map(|(what, _)| what.as_str()).collect();
    assert_eq!(names, ["metadata", "samples and heap events"], "two passes");
    let (records, bulk) = (passes[0].1, passes[1].1);
    // `info` counts every frame; opening the file decodes the header's.
    assert_eq!(
        records + bulk + 1,
        frames,
        "every frame decoded once, by one pass or the other"
    );
    assert!(
        records >= 10 && bulk >= 10,
        "{records} records frames, {bulk} bulk frames"
    );
    let r: Value = serde_json::from_str(&json).expect("report json");
    // The same bytes every time (no hash map's order shows through).
    let (again, _) = verbose(&report);
    // On a difference, show where: the first differing byte with some context each way,
    // so that the output that still depends on a hash map's order is named.
    let at = json
        .bytes()
        .zip(again.bytes())
        .position(|(a, b)| a != b)
        .unwrap_or(json.len().min(again.len()));
    let around = |s: &str| {
        let from = s.floor_char_boundary(at.saturating_sub(300));
        let to = s.ceil_char_boundary((at + 300).min(s.len()));
        s[from..to].to_string()
    };
    assert!(
        json == again,
        "two runs of the same report differ at byte {at}:\n{}\n---\n{}",
        around(&json),
        around(&again)
    );

    // The off-CPU waits, split as the program measured them.
    let total_ns = |name: &str| {
        r["off_cpu"]["functions"]
            .as_array()
            .and_then(|f| f.iter().find(|f| f["function"] == name))
            .and_then(|f| f["total_ns"].as_u64())
            .unwrap_or(0)
    };
    let (take, turn) = (total_ns("take_lock"), total_ns("wait_turn"));
    let (s, truth) = (
        share(take, turn),
        m.measured_share("take_lock", "wait_turn"),
    );
    assert!(
        (s - truth).abs() <= 2.0,
        "take_lock has {s:.1}% of take_lock+wait_turn, the program measured {truth:.1}%"
    );
    let wakers = r["off_cpu"]["wakeups"]["blocked"]
        .as_array()
        .map_or(0, Vec::len);
    assert!(wakers > 0, "no waker stacks: {:#}", r["off_cpu"]["wakeups"]);
    // The fault event's profile and the heap's, every allocation record counted.
    assert_eq!(r["cpu"]["event"], "page-faults");
    let faults = r["cpu"]["samples"].as_u64().expect("samples");
    assert!(faults > 0, "no page faults");
    let allocations = r["heap"]["allocations"].as_u64().expect("allocations");
    assert_eq!(Some(allocations), info["records"]["alloc"].as_u64());

    // Each the same as a pass that made it with the CPU profile only.
    let (event_text, passes) = verbose(&[
        "report",
        "--event",
        "page-faults",
        "--sysroot",
        sysroot,
        file,
    ]);
    assert_eq!(passes[1], ("samples".to_string(), bulk));
    assert_eq!(
        number_before(&event_text, " samples;"),
        faults.to_string(),
        "{event_text}"
    );
    let (off_cpu_text, _) = verbose(&["report", "--off-cpu", "--sysroot", sysroot, file]);
    let wait_ms = r["off_cpu"]["wait_ns"].as_u64().expect("wait_ns") as f64 / 1e6;
    assert_eq!(
        number_before(&off_cpu_text, " ms off-CPU"),
        format!("{wait_ms:.1}"),
        "{off_cpu_text}"
    );
    let (heap_text, _) = verbose(&["report", "--heap", "--sysroot", sysroot, file]);
    assert_eq!(
        number_before(&heap_text, " allocations"),
        allocations.to_string(),
        "{heap_text}"
    );
}

/// A path as the UTF-8 string command lines take.
fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}
