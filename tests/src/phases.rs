//! Helpers for the tests of time and thread filters over `tests/programs/phases.c`, whose
//! phases are known in time (`tests/tests/filters.rs`, `tests/tests/diff_filters.rs`).

use std::path::Path;

use crossprof_format::Record;
use serde_json::Value;

use crate::{hostside_ok, read_records};

/// Keeps windows this far from a phase's edge: heap events carry the kernel tick's coarse
/// clock (up to 10 ms behind), and a phase's first sample may come a tick late.
pub const MARGIN_NS: u64 = 100_000_000;

/// Seconds, exactly, as `--from/--to` take them.
pub fn secs(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// `hostside ARGS...` parsed as JSON.
pub fn json(args: &[&str]) -> Value {
    serde_json::from_str(&hostside_ok(args)).expect("valid JSON")
}

/// `hostside report --json --top 1000 --sysroot S FILE EXTRA...`.
pub fn report(file: &Path, sysroot: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "report",
        "--json",
        "--top",
        "1000",
        "--sysroot",
        sysroot.to_str().unwrap(),
        file.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    json(&args)
}

/// The recording's start on the board clock and its records.
pub fn raw(file: &Path) -> (u64, Vec<Record>) {
    let bytes = std::fs::read(file).unwrap();
    let start = crossprof_format::Reader::new(&bytes)
        .expect("a recording")
        .header()
        .start_clock_ns;
    (start, read_records(file).0)
}

/// A report's CPU sample count.
pub fn samples(r: &Value) -> u64 {
    r["cpu"]["samples"].as_u64().unwrap()
}

/// Edges of phases.c relative to the recording's start: (start, a→b, b→c, end), and the
/// sleeper's tid.
pub struct Phases {
    /// phase_a's start, after the program's own start-up (its allocations among it), which a
    /// loaded machine can stretch.
    pub start: u64,
    /// The a→b edge.
    pub ab: u64,
    /// The b→c edge.
    pub bc: u64,
    /// The end.
    pub end: u64,
    /// The sleeper thread's id.
    pub sleeper: u32,
}

/// The edges phases.c printed on `stderr`, relative to `start` (the recording's).
pub fn phases(stderr: &[u8], start: u64) -> Phases {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .find(|l| l.starts_with("phases "))
        .unwrap_or_else(|| panic!("no phases line in {text:?}"));
    let w: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    Phases {
        start: w[0] - start,
        ab: w[1] - start,
        bc: w[2] - start,
        end: w[3] - start,
        sleeper: w[4] as u32,
    }
}
