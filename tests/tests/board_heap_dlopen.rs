//! Issue 25 on the emulated boards: `tests/programs/heap_dlopen_stress.c` (four threads
//! allocating while a fifth loads a library, allocates through it and unloads it, in a loop)
//! under `rec --heap` with the glibc interposer from `dist/`, as `heap_dlopen_stress.rs` does
//! on x86_64. The board powers off within its time limit (an interposer that waited for the
//! loader's lock from inside an allocation could hang the program), no event is lost, and the
//! counts at both sites are the ones the program counted itself. On AArch64 every library
//! stack is whole; on ARMv7 (whose code, built with Debian armhf's defaults, has no unwind
//! tables on the board) the stacks are unwound on the host from the recorded stack words, up
//! to the thread's entry.

use crossprof_tests::board_heap::interposer_files;
use crossprof_tests::boards::{boot, Board, BoardProgram, Sysroot};
use crossprof_tests::*;
use serde_json::Value;

/// Seconds the program runs on the board (the boot's time limit is three minutes).
const SECONDS: &str = "30";

/// The site of `function`, at the line marked `marker` in `p`'s source.
fn site<'a>(h: &'a Value, p: &BoardProgram, function: &str, marker: &str) -> &'a Value {
    let s = h["sites"]
        .as_array()
        .expect("sites")
        .iter()
        .find(|s| s["function"] == function)
        .unwrap_or_else(|| panic!("no {function} site: {:#}", h["sites"]));
    assert_eq!(
        s["line"].as_u64(),
        Some(marker_line(&p.source, marker) as u64),
        "{s:#}"
    );
    s
}

/// Runs the program on `board`; the library site's most frequent stack, how many
/// allocations of the whole run had their stack cut short, and how many the program and the
/// library made at their marked sites.
fn run(board: Board, tag: &str) -> (Vec<String>, u64, u64) {
    let sysroot = Sysroot::new(board, tag);
    let flags = ["-O1", "-fno-builtin"];
    let lib = sysroot.build_c(
        board,
        "heap_dlopen_stress_lib.c",
        "libstress.so",
        &[&flags[..], &["-shared", "-fPIC"]].concat(),
    );
    let main = sysroot.build_c(
        board,
        "heap_dlopen_stress.c",
        "dlopen_stress",
        &[&flags[..], &["-pthread"]].concat(),
    );
    let mut files = interposer_files(board);
    for q in [&lib, &main] {
        files.push((
            q.guest.clone(),
            std::fs::read(&q.stripped).expect("read"),
            0o755,
        ));
    }
    let job: Vec<String> = [
        "/rec",
        "--heap",
        "--no-cpu",
        "--out",
        "/out/s.zst",
        "--",
        &main.guest,
        &lib.guest,
        SECONDS,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let r = boot(board, tag, files, &[job]);
    r.assert_ok(1);
    let log = String::from_utf8_lossy(r.file("job0.log")).into_owned();
    let field = |name: &str| -> u64 {
        log.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{tag}: no {name} in the job's output: {log}"))
    };
    let (workers, cycles) = (field("workers"), field("cycles"));
    assert!(workers > 1_000 && cycles > 10, "{tag}: {workers} {cycles}");
    let out = r.save("s.zst", tag);
    let report = heap_report_json(&out, &sysroot.dir);
    let h = &report["heap"];
    assert_eq!(h["lost_events"], 0, "{tag}");
    let w = site(h, &main, "burst", "worker_malloc");
    assert_eq!(w["allocations"].as_u64(), Some(workers), "{tag}: {w:#}");
    assert_eq!(w["leaked_allocations"].as_u64(), Some(0), "{tag}: {w:#}");
    let l = site(h, &lib, "lib_churn", "lib_malloc");
    assert_eq!(l["allocations"].as_u64(), Some(10 * cycles), "{tag}: {l:#}");
    assert_eq!(l["leaked_allocations"].as_u64(), Some(0), "{tag}: {l:#}");
    let stack = l["stack"]
        .as_array()
        .expect("stack")
        .iter()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect();
    (stack, cut_short(h), workers + 10 * cycles)
}

/// The allocations whose stack the interposer cut short, in all (any reason).
fn cut_short(h: &Value) -> u64 {
    h["anomalies"]["cut_short_allocations"]
        .as_object()
        .expect("cut_short_allocations")
        .values()
        .filter_map(Value::as_u64)
        .sum()
}

#[test]
fn aarch64_board_allocations_racing_dlopen_and_dlclose_neither_hang_nor_miscount() {
    let (stack, cut, _) = run(Board::Aarch64, "board_dlopen_stress_aarch64");
    assert_eq!(stack[..3], ["lib_churn", "cycle", "loader"], "{stack:?}");
    // framehop unwinds every stack whole, through the library loaded since too.
    assert_eq!(cut, 0);
}

#[test]
fn armv7_board_allocations_racing_dlopen_and_dlclose_neither_hang_nor_miscount() {
    let (stack, cut, marked) = run(Board::Armv7, "board_dlopen_stress_armv7");
    // The host unwinds the recorded stack words through the library loaded since, with
    // its `.debug_frame` from the sysroot, up to the thread's entry.
    assert_eq!(stack[..3], ["lib_churn", "cycle", "loader"], "{stack:?}");
    // This sysroot's C library (the cross toolchain's) has no unwind tables for the
    // threads' start code: every stack stops there, and says so.
    assert!(cut >= marked, "{cut} {marked}");
}
