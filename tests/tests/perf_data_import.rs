//! Issue 29, acceptance 1 (x86_64): a `perf.data` recorded by Debian's `perf record
//! --call-graph dwarf` of the stripped CPU ground-truth program (hot_a does 3x hot_b's work),
//! read by `hostside report` with the program's debug sysroot: its module found by the
//! build-id perf stored, its stack copies unwound by crossprof, the 75:25 split, and `main`
//! reached in at least as many samples as perf's own unwinding of the same file reaches it.
//! A damaged file is a clear error, never a panic.

use std::path::Path;
use std::process::{Command, Stdio};

use crossprof_tests::*;

/// `perf record -e cpu-clock --call-graph dwarf` of `program ROUNDS` into `out`, its
/// build-ids in the file (not in perf's cache).
fn perf_record(out: &Path, program: &Path, rounds: &str) {
    let o = Command::new("perf")
        .args([
            "record",
            "-q",
            "-N",
            "-e",
            "cpu-clock",
            "--call-graph",
            "dwarf",
        ])
        .arg("-o")
        .arg(out)
        .arg("--")
        .arg(program)
        .arg(rounds)
        .stdin(Stdio::null())
        .output()
        .expect("perf (Debian's linux-perf; scripts/setup.sh installs it)");
    assert!(
        o.status.success(),
        "perf record failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn hostside_reports_a_perf_data_file_recorded_with_dwarf_stacks() {
    let program = build("cpu_split.c", "perf_data_import", &["-O2"]);
    add_system_libs(&program.sysroot, &program.board);
    let data = scratch().join("perf_data_import.data");
    perf_record(&data, &program.board, "1500");
    let board = program.board.to_str().expect("UTF-8 path");
    perf::assert_reads_perf_data_like_perf(&data, &program.sysroot, board);
}

#[test]
fn a_damaged_perf_data_file_is_a_clear_error() {
    let program = build("cpu_split.c", "perf_data_damaged", &["-O2"]);
    let data = scratch().join("perf_data_damaged.data");
    perf_record(&data, &program.board, "100");
    let bytes = std::fs::read(&data).expect("read perf.data");
    let cut = scratch().join("perf_data_cut.data");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).expect("write");
    let o = Command::new(hostside())
        .arg("report")
        .arg(&cut)
        .output()
        .expect("run hostside");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("damaged perf.data") && err.contains("runs past its end"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}
