//! Issue 11 on the emulated boards: real programs nobody here wrote (the corpus of
//! `tests/realworld/`: SQLite's shell and the Lua interpreter from Debian's sources, built by
//! Debian's cross compilers with a distribution's flags, Thumb-2 on ARMv7), recorded on the
//! AArch64 and ARMv7 boards by the board's `rec` with its defaults (`--call-graph dwarf` and
//! the default stack copy), and unwound here. The board runs Debian's own C library; the
//! debug sysroot holds the unstripped programs and that library's detached debug info
//! (`libc6-dbg`), as a distribution's or Yocto's debug filesystem does.
//!
//! Each program is linked by GNU ld, lld and mold (the layouts differ: lld and mold share a
//! file page between the read-only and the executable segment). For each build at least 95%
//! of the samples must unwind to the program's entry: complete in `cpu.stack_unwinding`, and
//! rooted at `_start` (or the loader's start code) in the exported stacks; no frame may lie
//! outside a mapping. One boot per board records all six, in 30 to 50 s.
//!
//! `CROSSPROF_BOARD_CALL_GRAPH=dwarf=SIZE` records with that stack copy instead (to measure
//! what a program needs; the checks still apply), `CROSSPROF_BOARD_LINKERS=bfd` only those
//! linkers' builds.

use std::path::{Path, PathBuf};

use crossprof_tests::board_files::{add_libraries, symlink};
use crossprof_tests::boards::{boot, debian_libc, Board, Files};
use crossprof_tests::realworld::{build, RealProgram, BOARD_PROGRAMS, LINKERS};
use crossprof_tests::*;
use serde_json::Value;

/// The least share of samples, in percent, that must unwind to the program's entry.
const MIN_COMPLETE_PERCENT: f64 = 95.0;

/// Samples below which a percentage means little.
const MIN_SAMPLES: u64 = 300;

/// One program prepared for a board run.
struct Case {
    program: RealProgram,
    /// Its path on the board: `/usr/bin/NAME` for GNU ld's build, under `/opt/LINKER/` for the
    /// others, so that all share one boot.
    guest: String,
    /// `sqlite3-lld`: the program and its linker.
    name: String,
    /// The debug sysroot of this run (the board's own C library, with its debug info).
    sysroot: PathBuf,
    /// The recording's name in /out.
    out: String,
}

/// The board files of `p`, linked by `linker` (program, the shared libraries it loads, from
/// Debian's C library where that has them, and its workload inputs in `/`, the jobs' working
/// directory) and its debug sysroot under `dir`.
fn prepare(board: Board, p: RealProgram, linker: &str, dir: &Path, files: &mut Files) -> Case {
    assert!(
        !p.board_args.is_empty(),
        "{} has no board workload in its recipe",
        p.program
    );
    let libc = debian_libc(board);
    let name = format!("{}-{linker}", p.program);
    let sysroot = dir.join(format!("{name}-sysroot"));
    let guest = match linker {
        "bfd" => p.guest.clone(),
        _ => format!("/opt/{linker}{}", p.guest),
    };
    symlink(&p.unstripped, &sysroot.join(guest.trim_start_matches('/')));
    symlink(&libc.join("usr/lib/debug"), &sysroot.join("usr/lib/debug"));
    files.push((guest.clone(), std::fs::read(&p.board).unwrap(), 0o755));
    add_libraries(board, &p.libs, &sysroot, files);
    for input in &p.board_inputs {
        if !files.iter().any(|(g, _, _)| *g == format!("/{input}")) {
            let data = std::fs::read(p.workdir.join(input)).unwrap();
            files.push((format!("/{input}"), data, 0o644));
        }
    }
    Case {
        out: format!("{name}.zst"),
        name,
        guest,
        program: p,
        sysroot,
    }
}

fn job(case: &Case) -> Vec<String> {
    let mut job = vec!["/rec".to_string()];
    if let Ok(cg) = std::env::var("CROSSPROF_BOARD_CALL_GRAPH") {
        job.extend(["--call-graph".to_string(), cg]);
    }
    job.extend([
        "--out".to_string(),
        format!("/out/{}", case.out),
        "--".to_string(),
        case.guest.clone(),
    ]);
    job.extend(case.program.board_args.iter().cloned());
    job
}

fn u(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no {field} in {v}"))
}

/// The checks on one recording; returns a summary line.
fn check(board: Board, case: &Case, recording: &Path) -> String {
    let name = format!("{} on {}", case.name, board.arch_name());
    let r = report_json(recording, Some(&case.sysroot));
    assert_eq!(r["recording"]["arch"], board.arch_name());
    assert_eq!(r["recording"]["complete"], true, "{name}");
    let samples = u(&r["cpu"], "samples");
    assert!(samples >= MIN_SAMPLES, "{name}: only {samples} samples");
    let u_ = &r["cpu"]["stack_unwinding"];
    let (complete, truncated) = (u(u_, "complete"), u(u_, "truncated"));
    let total = complete + truncated + u(u_, "no_registers");
    assert_eq!(total, samples, "{name}: every sample carries a stack copy");
    let pct = 100.0 * complete as f64 / total as f64;
    // An address outside every mapping would show as a function of module `[unknown]`.
    let functions = r["cpu"]["functions"].as_array().unwrap();
    let unknown: Vec<&Value> = functions
        .iter()
        .filter(|f| f["module"] == "[unknown]")
        .collect();
    assert!(
        unknown.is_empty(),
        "{name}: frames outside every mapping: {unknown:?}"
    );
    // Complete means rooted at the entry point, as the exported stacks show it: the
    // program's `_start`, or during start-up the dynamic loader's (whose `_start` runs on
    // into `_dl_start_user`, which calls the libraries' initialisers).
    let stacks = folded_stacks(recording, &case.sysroot);
    let rooted: u64 = stacks
        .iter()
        .filter(|(s, _)| {
            matches!(
                s.get(1).map(String::as_str),
                Some("_start" | "_dl_start_user")
            )
        })
        .map(|(_, n)| n)
        .sum();
    let rooted_pct = 100.0 * rooted as f64 / samples as f64;
    let bytes = std::fs::metadata(recording).unwrap().len();
    let summary = format!(
        "{name}: {samples} samples in {:.1} s ({} bytes each in the file), {complete} unwound to \
         the entry ({pct:.1}%), {rooted} rooted at _start ({rooted_pct:.1}%), cut short by {}, \
         {} frames by prologue analysis; recording {} sysroot {}",
        r["recording"]["duration_ns"].as_f64().unwrap_or(0.0) / 1e9,
        bytes / samples,
        u_["truncated_by"],
        u_["prologue_frames"],
        recording.display(),
        case.sysroot.display()
    );
    assert!(
        pct >= MIN_COMPLETE_PERCENT && rooted_pct >= MIN_COMPLETE_PERCENT,
        "{summary}"
    );
    // Each program's own code holds most of the samples, all under its `main`.
    let main = functions
        .iter()
        .find(|f| f["function"] == "main")
        .unwrap_or_else(|| panic!("{name}: no main"));
    assert_eq!(main["module"].as_str(), Some(case.guest.as_str()));
    summary
}

fn board_runs_real_programs(board: Board, arch: &str) {
    let linkers = std::env::var("CROSSPROF_BOARD_LINKERS");
    let linkers: Vec<&str> = match &linkers {
        Ok(l) => l.split(',').collect(),
        Err(_) => LINKERS.to_vec(),
    };
    let tag = format!("board_realworld_{arch}");
    let dir = scratch().join(&tag);
    let mut files = Files::new();
    let mut cases = Vec::new();
    for linker in &linkers {
        for p in BOARD_PROGRAMS {
            let program = build(p, &format!("{arch}-{linker}-O2-pie"));
            cases.push(prepare(board, program, linker, &dir, &mut files));
        }
    }
    let jobs: Vec<Vec<String>> = cases.iter().map(job).collect();
    let run = boot(board, &tag, files, &jobs);
    run.assert_ok(jobs.len());
    let mut failures = Vec::new();
    for case in &cases {
        let recording = dir.join(&case.out);
        std::fs::write(&recording, run.file(&case.out)).unwrap();
        match std::panic::catch_unwind(|| check(board, case, &recording)) {
            Ok(summary) => eprintln!("{summary}"),
            Err(e) => failures.push(
                e.downcast_ref::<String>()
                    .cloned()
                    .unwrap_or_else(|| "check failed".into()),
            ),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn aarch64_board_unwinds_real_programs_to_their_entry() {
    board_runs_real_programs(Board::Aarch64, "aarch64");
}

#[test]
fn armv7_board_unwinds_thumb2_real_programs_to_their_entry() {
    board_runs_real_programs(Board::Armv7, "armv7");
}
