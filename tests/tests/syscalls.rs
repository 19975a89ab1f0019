//! Issue 30, acceptance 1: `rec -e syscalls` of a program with known system calls from known
//! functions (tests/programs/syscalls.c: 1,000 getpid from getpid_loop, 500 write from
//! write_loop of which 100 fail with EBADF, 200 sleeps of 1 ms from sleep_loop), on x86_64 and
//! on the emulated AArch64 and ARMv7 boards (real Debian kernels, the cross-built static
//! `rec`). `hostside report --syscalls --json` gives the counts, errors and calling functions
//! exactly; on x86_64 every call's count and errors equal `strace -c -f`'s on the same binary
//! (strace sees the program's execve, whose entry precedes the recording; rec sees its
//! exit_group, which strace does not list).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use crossprof_tests::boards::{boot, Board, Sysroot};
use crossprof_tests::*;
use serde_json::Value;

/// The report's `syscalls` section of `recording`.
fn syscalls(recording: &Path, sysroot: &Path) -> Vec<Value> {
    let text = hostside_ok(&[
        "report",
        "--json",
        "--top",
        "100",
        "--sysroot",
        sysroot.to_str().expect("UTF-8 path"),
        recording.to_str().expect("UTF-8 path"),
    ]);
    let r: Value = serde_json::from_str(&text).expect("JSON");
    r["syscalls"]
        .as_array()
        .unwrap_or_else(|| panic!("no syscalls section: {}", r["syscalls"]))
        .clone()
}

/// The row of the call named `name` (or of the first of `names` present).
fn call<'a>(rows: &'a [Value], names: &[&str]) -> &'a Value {
    rows.iter()
        .find(|r| names.iter().any(|n| r["name"] == *n))
        .unwrap_or_else(|| {
            let have: Vec<&Value> = rows.iter().map(|r| &r["name"]).collect();
            panic!("none of {names:?} among {have:?}")
        })
}

/// Calls of `row` whose stack passes through `function`.
fn through(row: &Value, function: &str) -> u64 {
    row["stacks"]
        .as_array()
        .expect("stacks")
        .iter()
        .filter(|s| {
            s["stack"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f == function))
        })
        .map(|s| number(s, "count"))
        .sum()
}

/// The known calls, exactly, each from its function.
fn assert_ground_truth(rows: &[Value], what: &str) {
    let getpid = call(rows, &["getpid"]);
    assert_eq!(
        (number(getpid, "count"), number(getpid, "errors")),
        (1000, 0),
        "{what}: {getpid}"
    );
    assert_eq!(through(getpid, "getpid_loop"), 1000, "{what}: {getpid}");

    let write = call(rows, &["write"]);
    assert_eq!(
        (number(write, "count"), number(write, "errors")),
        (500, 100),
        "{what}: {write}"
    );
    assert_eq!(write["errnos"]["EBADF"], 100, "{what}: {write}");
    assert_eq!(through(write, "write_loop"), 500, "{what}: {write}");

    // glibc sleeps with clock_nanosleep, its 64-bit-time variant on 32-bit boards.
    let sleep = call(rows, &["clock_nanosleep", "clock_nanosleep_time64"]);
    assert_eq!(number(sleep, "count"), 200, "{what}: {sleep}");
    assert_eq!(number(sleep, "errors"), 0, "{what}: {sleep}");
    assert_eq!(through(sleep, "sleep_loop"), 200, "{what}: {sleep}");
    let total = number(sleep, "total_ns");
    assert!(
        total >= 200_000_000,
        "{what}: 200 sleeps of 1 ms took {total} ns"
    );
}

/// `strace -c -f`'s table of `program`: calls and errors per system call.
fn strace_counts(program: &Path) -> BTreeMap<String, (u64, u64)> {
    let table = scratch().join("syscalls.strace");
    let o = Command::new("strace")
        .args(["-c", "-f", "-o"])
        .arg(&table)
        .arg(program)
        .stdin(Stdio::null())
        .output()
        .expect("strace (Debian's strace; scripts/setup.sh installs it)");
    assert!(o.status.success(), "strace: {o:?}");
    let text = std::fs::read_to_string(&table).expect("strace's table");
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            // % time, seconds, usecs/call, calls, [errors,] syscall
            let name = *w.last()?;
            let calls = w.get(3)?.parse().ok()?;
            let errors = if w.len() == 6 { w[4].parse().ok()? } else { 0 };
            (name != "total").then(|| (name.to_string(), (calls, errors)))
        })
        .collect()
}

#[test]
fn system_calls_on_x86_64_match_the_program_and_strace() {
    let program = build("syscalls.c", "syscalls", &["-O2"]);
    add_system_libs(&program.sysroot, &program.board);
    let out = scratch().join("syscalls.zst");
    let board = program.board.to_str().expect("UTF-8 path");
    record(&out, &["-e", "syscalls"], &[board]);
    let rows = syscalls(&out, &program.sysroot);
    assert_ground_truth(&rows, "x86_64");

    let mut ours: BTreeMap<String, (u64, u64)> = rows
        .iter()
        .map(|r| {
            let name = r["name"].as_str().expect("name").to_string();
            (name, (number(r, "count"), number(r, "errors")))
        })
        .collect();
    let mut strace = strace_counts(&program.board);
    assert_eq!(strace.remove("execve").map(|c| c.0), Some(1));
    assert_eq!(ours.remove("exit_group").map(|c| c.0), Some(1));
    assert_eq!(ours, strace, "hostside (left) and strace -c -f (right)");
}

/// The ground truth on an emulated board, recorded by the board's own static `rec`.
fn on_board(board: Board, tag: &str) {
    let sysroot = Sysroot::new(board, tag);
    let p = sysroot.build_c(board, "syscalls.c", "syscalls", &["-O2"]);
    let files = vec![(p.guest.clone(), std::fs::read(&p.stripped).unwrap(), 0o755)];
    let job: Vec<String> = [
        "/rec",
        "-e",
        "syscalls",
        "--out",
        "/out/s.zst",
        "--",
        &p.guest,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let run = boot(board, tag, files, &[job]);
    run.assert_ok(1);
    let out = run.save("s.zst", tag);
    assert_ground_truth(&syscalls(&out, &sysroot.dir), tag);
}

#[test]
fn system_calls_on_the_aarch64_board() {
    on_board(Board::Aarch64, "syscalls_aarch64");
}

#[test]
fn system_calls_on_the_armv7_board() {
    on_board(Board::Armv7, "syscalls_armv7");
}
