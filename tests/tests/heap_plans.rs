//! Issue 25, acceptance 1 (the cost half): the learned unwind plans (x86_64,
//! `recorder/heap/src/stack/plan.rs`) step a frame as framehop's rule for it does, so a
//! recording with them has the stacks of one without them, on a C++ program nobody here wrote.
//!
//! The program: Debian's `protoc` (libprotobuf, libstdc++, built -O2 without frame pointers)
//! generating C++ and Python for libprotobuf-dev's eleven `.proto` files, 740,000 allocations
//! from deep call chains. The comparison: the heap's folded stacks (`hostside export --format
//! collapsed`, each distinct stack with its allocation calls), symbolized, with plans off
//! (`CROSSPROF_HEAP_PLANS=0`, every frame through framehop) and on; equal line for line. The
//! interposer's own counters (`CROSSPROF_HEAP_STATS`) show that the plans did the stepping.

use std::path::Path;
use std::process::Command;

use crossprof_tests::*;

/// libprotobuf-dev's `.proto` files, relative to `/usr/include`.
const PROTOS: [&str; 11] = [
    "google/protobuf/any.proto",
    "google/protobuf/api.proto",
    "google/protobuf/descriptor.proto",
    "google/protobuf/duration.proto",
    "google/protobuf/empty.proto",
    "google/protobuf/field_mask.proto",
    "google/protobuf/source_context.proto",
    "google/protobuf/struct.proto",
    "google/protobuf/timestamp.proto",
    "google/protobuf/type.proto",
    "google/protobuf/wrappers.proto",
];

/// Records protoc with plans `on` or off; the folded heap stacks, sorted, and the
/// interposer's counters line.
fn folded(dir: &Path, on: bool) -> (Vec<String>, String) {
    let name = if on { "plans" } else { "framehop" };
    let out_dir = dir.join(name);
    std::fs::create_dir_all(&out_dir).unwrap();
    let zst = dir.join(format!("{name}.zst"));
    let o = Command::new(rec())
        .args(["--heap", "--no-cpu", "--out"])
        .arg(&zst)
        .arg("--")
        .arg("/usr/bin/protoc")
        .arg("-I/usr/include")
        .arg(format!("--cpp_out={}", out_dir.display()))
        .arg(format!("--python_out={}", out_dir.display()))
        .args(PROTOS)
        .env("CROSSPROF_HEAP_LIB", heap_lib())
        .env("CROSSPROF_HEAP_STATS", "1")
        .env("CROSSPROF_HEAP_PLANS", if on { "1" } else { "0" })
        .output()
        .expect("run rec");
    assert!(o.status.success(), "{o:?}");
    let stats = String::from_utf8_lossy(&o.stderr)
        .lines()
        .find(|l| l.starts_with("crossprof-heap: "))
        .unwrap_or_else(|| panic!("no counters: {o:?}"))
        .to_string();
    let folded = dir.join(format!("{name}.folded"));
    hostside_ok(&[
        "export",
        "--format",
        "collapsed",
        "--heap",
        "-o",
        folded.to_str().unwrap(),
        zst.to_str().unwrap(),
    ]);
    let mut lines: Vec<String> = std::fs::read_to_string(&folded)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    (lines, stats)
}

/// The number after `word` in the counters line.
fn counter(stats: &str, word: &str) -> u64 {
    let at = stats
        .find(word)
        .unwrap_or_else(|| panic!("{word} in {stats}"));
    stats[at + word.len()..]
        .split_whitespace()
        .next()
        .and_then(|n| n.trim_end_matches(')').parse().ok())
        .unwrap_or_else(|| panic!("{word} in {stats}"))
}

#[test]
fn plans_give_framehops_stacks_on_protoc() {
    if !cfg!(target_arch = "x86_64") {
        return;
    }
    for p in PROTOS {
        let p = Path::new("/usr/include").join(p);
        assert!(
            p.exists(),
            "{} is missing: run scripts/test-setup.sh (libprotobuf-dev)",
            p.display()
        );
    }
    let dir = scratch().join("heap_plans");
    std::fs::create_dir_all(&dir).unwrap();
    let (without, stats_off) = folded(&dir, false);
    let (with, stats_on) = folded(&dir, true);
    eprintln!("plans off: {stats_off}\nplans on:  {stats_on}");
    assert_eq!(counter(&stats_off, "(by plan"), 0, "{stats_off}");
    let (unwound, planned) = (
        counter(&stats_on, "frames unwound"),
        counter(&stats_on, "(by plan"),
    );
    assert!(
        planned * 100 >= unwound * 90,
        "plans stepped {planned} of {unwound} frames"
    );
    let calls = |v: &[String]| -> u64 {
        v.iter()
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
            .sum()
    };
    assert!(calls(&with) > 700_000, "{} allocations", calls(&with));
    assert!(
        with.len() > 1_000,
        "{} distinct stacks: too few to tell",
        with.len()
    );
    // The same stacks with the same calls, line for line.
    let differ: Vec<_> = with
        .iter()
        .zip(&without)
        .filter(|(a, b)| a != b)
        .take(3)
        .collect();
    assert!(
        with.len() == without.len() && differ.is_empty(),
        "{} stacks with plans, {} without; first differences: {differ:?}",
        with.len(),
        without.len()
    );
}
