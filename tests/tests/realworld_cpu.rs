//! Full stacks on real programs (issue 11): every program of the real-world corpus
//! (`tests/realworld/`: sqlite3, lua, zstd, ninja from Debian sources, ripgrep from
//! crates.io), linked by GNU ld, lld and mold (ripgrep: Rust's default linker), recorded on
//! x86_64 with `rec` at its defaults and analysed with `hostside report --json --sysroot`;
//! and in the same test `perf record --call-graph dwarf` with the same stack size on the same
//! binary, read with `perf script`, as the live reference.
//!
//! Each test asserts: at least 95% of the samples unwind to the program's or thread's entry
//! (`cpu.stack_unwinding`); no frame lies outside a mapping; and the inclusive shares of
//! perf's top functions (top 10 by self, top 10 by total) agree with hostside's within 3
//! points. Functions perf shows as inlined frames are left out of the comparison: perf's
//! inline expansion (through libdw) and hostside's (DWARF through addr2line) differ on which
//! call sites they expand, which is not about unwinding.

use std::collections::HashMap;
use std::path::Path;

use crossprof_tests::perf::{self, normalize};
use crossprof_tests::realworld::{self, RealProgram};
use crossprof_tests::{rec, report_json, scratch};
use serde_json::Value;

/// Allowed difference of a function's inclusive share between hostside and perf, points.
const TOLERANCE: f64 = 3.0;
/// Share of samples that must unwind to the entry.
const COMPLETE: f64 = 95.0;

/// The stack-copy size `rec --help` names as the default of `--call-graph dwarf`.
fn rec_default_stack() -> u32 {
    let o = std::process::Command::new(rec())
        .arg("--help")
        .output()
        .expect("rec --help");
    let help = String::from_utf8_lossy(&o.stdout);
    // "dwarf[=SIZE] copy ... (at most SIZE bytes, default N, max 65528)"
    help.split_once("bytes, default ")
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no default stack size in rec --help:\n{help}"))
}

/// The stack-copy size a recording was made with, from its header (`dwarf=N`).
fn stack_size(recording: &Path) -> u32 {
    let bytes = std::fs::read(recording).expect("read recording");
    let r = crossprof_format::Reader::new(&bytes).expect("a recording");
    let mode = r.header().call_graph.clone();
    mode.strip_prefix("dwarf=")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("rec's default call graph is {mode:?}, not dwarf=SIZE"))
}

/// hostside's inclusive counts by normalized name (rows of one name summed: C++ overloads).
fn our_totals(report: &Value) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    for f in report["cpu"]["functions"].as_array().expect("functions") {
        let name = normalize(f["function"].as_str().expect("name"));
        *m.entry(name).or_default() += f["total"].as_u64().expect("total");
    }
    m
}

/// The samples each profiler should take of one run: the 500 asserted below with room to
/// spare. The dry run has no profiler, so the profiled run takes more CPU time and more
/// samples than this (2,000 to 3,000 of a 1,200 aim on the corpus here, both profilers copying
/// stacks at once), never fewer.
const SAMPLES_WANTED: f64 = 800.0;

/// The sampling frequency that gives [`SAMPLES_WANTED`] samples of the workload on this
/// processor: the workload's CPU time comes from a dry run, as the kernel accounted it (the
/// workloads are fixed work, about one second of CPU on the machines the suite grew on, so at
/// a fixed 999 Hz a processor twice as fast would take too few samples). Between 999 Hz and
/// 4999 Hz, far below the kernel's default sample-rate limit, so neither tool is throttled.
// The child is reaped by wait4, which Child::wait cannot do: it drops the rusage.
#[allow(clippy::zombie_processes)]
fn sampling_freq(p: &RealProgram) -> u32 {
    let child = p.command().spawn().expect("run the workload");
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 reaps our own child and fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid is our child's, not yet reaped; both pointers are valid.
    let r = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert!(
        r > 0 && libc::WIFEXITED(status),
        "the workload's dry run failed: {status:#x}"
    );
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let cpu = secs(usage.ru_utime) + secs(usage.ru_stime);
    (SAMPLES_WANTED / cpu.max(1e-3)).clamp(999.0, 4999.0) as u32
}

fn pct(n: u64, of: u64) -> f64 {
    100.0 * n as f64 / of.max(1) as f64
}

/// Runs the comparison; a share difference above the limit is measured once more.
///
/// perf and rec sample the same run, but each with its own timer and ring, so their samples
/// differ: on a shared, loaded two-core machine ripgrep's two threads once gave shares 4
/// points apart (`Regex::try_search` 75.8% by perf, 71.8% by hostside). A real disagreement
/// between the unwinders shows in both rounds; one noisy round does not fail the suite. Every other assertion (the
/// 95% of complete stacks, no frame outside a mapping) holds in each round.
fn check(program: &str, variant: &str) {
    let first = measure(program, variant, 1);
    if first.0 <= TOLERANCE {
        return;
    }
    eprintln!(
        "{program} {variant}: {:.1} points apart; recording both again",
        first.0
    );
    let (worst, rows) = measure(program, variant, 2);
    assert!(
        worst <= TOLERANCE,
        "{program} {variant}: inclusive shares differ from perf's by {:.1} and then {worst:.1} \
         points (limit {TOLERANCE}):\n  first round, perf% hostside%\n  {}\n  second round\n  {}",
        first.0,
        first.1,
        rows
    );
}

/// One round: both profilers on the program, every per-run assertion checked; returns the
/// largest share difference and the rows compared.
fn measure(program: &str, variant: &str, round: u32) -> (f64, String) {
    let p: RealProgram = realworld::build(program, variant);
    let tag = format!("rw-{program}-{variant}-{round}");
    let recording = scratch().join(format!("{tag}.zst"));
    let data = scratch().join(format!("{tag}.perf.data"));
    let size = rec_default_stack();
    let freq = sampling_freq(&p);
    perf::record_with_rec(
        &rec(),
        &recording,
        &data,
        size,
        freq,
        &p.workdir,
        &p.command_line(),
    );
    assert_eq!(stack_size(&recording), size);
    let report = report_json(&recording, Some(&p.sysroot));
    let samples = report["cpu"]["samples"].as_u64().expect("samples");
    let u = &report["cpu"]["stack_unwinding"];
    let complete = u["complete"].as_u64().expect("complete");

    let comm = p
        .board
        .file_name()
        .and_then(|n| n.to_str())
        .expect("file name");
    let reference = perf::profile(&perf::script(&data, &p.sysroot), comm);
    // perf.data holds every stack copy in full: tens of MB per program.
    let _ = std::fs::remove_file(&data);

    eprintln!(
        "{program} {variant}: hostside {:.1}% of {samples} samples reach the entry \
         (cut short: {}); perf {:.1}% of {}; stack copy {size} bytes",
        pct(complete, samples),
        u["truncated_by"],
        pct(reference.reach_entry, reference.samples),
        reference.samples
    );
    // Enough samples for the shares below to mean something (at 500, a share's standard
    // error is at most 2.2 points). The frequency aims at SAMPLES_WANTED, whatever the
    // processor's speed; cpu-clock counts the program's CPU time, so load does not change it.
    assert!(
        samples >= 500 && reference.samples >= 500,
        "too few samples to compare: hostside {samples}, perf {}",
        reference.samples
    );
    assert!(
        pct(complete, samples) >= COMPLETE,
        "{program} {variant}: only {complete} of {samples} samples unwind to the entry: {u}"
    );
    // perf must itself be a working reference for the comparison to mean anything.
    assert!(
        pct(reference.reach_entry, reference.samples) >= 90.0,
        "perf reaches the entry in only {} of {} samples: is the sysroot right?",
        reference.reach_entry,
        reference.samples
    );
    let outside: Vec<&Value> = report["cpu"]["functions"]
        .as_array()
        .expect("functions")
        .iter()
        .filter(|f| f["module"] == "[unknown]")
        .collect();
    assert!(
        outside.is_empty(),
        "{program} {variant}: frames outside every mapping: {outside:?}"
    );

    let ours = our_totals(&report);
    let eligible = |name: &String| {
        name != "[unknown]" && !name.contains("+0x") && !reference.inlined.contains(name)
    };
    let mut by_self: Vec<(&String, &u64)> = reference
        .self_samples
        .iter()
        .filter(|(n, _)| eligible(n))
        .collect();
    by_self.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut by_total: Vec<(&String, &u64)> = reference
        .total
        .iter()
        .filter(|(n, _)| eligible(n))
        .collect();
    by_total.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut compared: Vec<&String> = by_self
        .iter()
        .take(10)
        .chain(by_total.iter().take(10))
        .map(|(n, _)| *n)
        .collect();
    compared.sort();
    compared.dedup();
    let mut rows = Vec::new();
    let mut worst = 0.0f64;
    for name in &compared {
        let theirs = pct(reference.total[*name], reference.samples);
        let mine = pct(ours.get(*name).copied().unwrap_or(0), samples);
        worst = worst.max((theirs - mine).abs());
        rows.push(format!("{theirs:6.1} {mine:6.1}  {name}"));
    }
    eprintln!(
        "{program} {variant}: perf% hostside% of perf's top functions (worst {worst:.1} points)\n  {}",
        rows.join("\n  ")
    );
    assert!(
        compared.len() >= 10,
        "only {} functions to compare",
        compared.len()
    );
    (worst, rows.join("\n  "))
}

macro_rules! cases {
    ($($name:ident: $program:literal $variant:literal;)*) => {
        $(
            #[test]
            fn $name() {
                check($program, $variant);
            }
        )*
    };
}

cases! {
    sqlite3_gnu_ld: "sqlite3" "bfd-O2-pie";
    sqlite3_lld: "sqlite3" "lld-O2-pie";
    sqlite3_mold: "sqlite3" "mold-O2-pie";
    sqlite3_gnu_ld_os_no_pie: "sqlite3" "bfd-Os-nopie";
    lua_gnu_ld: "lua" "bfd-O2-pie";
    lua_lld: "lua" "lld-O2-pie";
    lua_mold: "lua" "mold-O2-pie";
    lua_lld_os_no_pie: "lua" "lld-Os-nopie";
    zstd_gnu_ld: "zstd" "bfd-O2-pie";
    zstd_lld: "zstd" "lld-O2-pie";
    zstd_mold: "zstd" "mold-O2-pie";
    ninja_gnu_ld: "ninja" "bfd-O2-pie";
    ninja_lld: "ninja" "lld-O2-pie";
    ninja_mold: "ninja" "mold-O2-pie";
    ninja_mold_os_no_pie: "ninja" "mold-Os-nopie";
    ripgrep_rust_default_linker: "ripgrep" "rust";
}
