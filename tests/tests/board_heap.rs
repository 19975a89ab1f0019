//! Issue 4, heap half: the heap ground truth (`tests/programs/heap_truth.c`) recorded with
//! `rec --heap` on the emulated AArch64 and ARMv7 boards (real Debian kernels under
//! qemu-system, see `crossprof_tests::boards`), with the glibc interposer from `dist/` next to
//! `rec`, and analysed here on x86_64 with a sysroot of unstripped copies. The counts are the
//! ones the source dictates, the same that `heaptrack_print` gives for this program on x86_64
//! (`heap_report.rs`): per site and in total, each site at its marked file:line.
//!
//! The program is built by Debian's cross gcc with its defaults (`-O2 -g`, no frame pointers,
//! Thumb-2 on armhf, no `-funwind-tables`): on ARMv7 the C code has no `.ARM.exidx` entries,
//! so the interposer does not unwind there: it records registers and stack words, which
//! hostside unwinds with the sysroot's `.debug_frame` (see `crossprof-heap`'s `stack`
//! module).

use crossprof_tests::board_heap::interposer_files;
use crossprof_tests::boards::{boot, Board, BoardProgram, Sysroot};
use crossprof_tests::*;
use serde_json::Value;

/// `churn`'s iteration count on the boards: under TCG emulation each recorded allocation costs
/// microseconds, so a tenth of a million keeps a boot well under half a minute. `churn`'s
/// numbers scale exactly with it; `leak_some` and `grow` are fixed by the program.
const CHURN: u64 = 100_000;

fn heap_job(out: &str, p: &BoardProgram, extra: &[&str]) -> Vec<String> {
    let churn = CHURN.to_string();
    let mut job = vec!["/rec", "--heap"];
    job.extend_from_slice(extra);
    job.extend_from_slice(&["--out", out, "--", &p.guest, &churn]);
    job.iter().map(|s| s.to_string()).collect()
}

fn u(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no {field} in {v}"))
}

/// The one site named `function`, at the line marked `LINE:<marker>` in the program.
fn site<'a>(h: &'a Value, p: &BoardProgram, function: &str, marker: &str) -> &'a Value {
    let sites = h["sites"].as_array().expect("sites");
    let matching: Vec<&Value> = sites.iter().filter(|s| s["function"] == function).collect();
    assert_eq!(
        matching.len(),
        1,
        "one {function} site expected: {sites:#?}"
    );
    let s = matching[0];
    assert_eq!(
        s["file"].as_str().map(|f| f.ends_with("heap_truth.c")),
        Some(true),
        "{s}"
    );
    assert_eq!(
        s["line"].as_u64(),
        Some(marker_line(&p.source, marker) as u64),
        "{s}"
    );
    assert_eq!(s["module"].as_str(), Some(p.guest.as_str()), "{s}");
    s
}

/// The heap numbers heap_truth.c dictates for `churn(CHURN); leak_some(20000); grow(1000)`.
fn assert_heap_truth(r: &Value, p: &BoardProgram, board: Board) {
    assert_eq!(r["recording"]["arch"], board.arch_name());
    assert_eq!(r["recording"]["complete"], true);
    let m = r["modules"]
        .as_array()
        .expect("modules")
        .iter()
        .find(|m| m["path"].as_str() == Some(p.guest.as_str()))
        .unwrap_or_else(|| panic!("module {} not recorded: {r:#}", p.guest));
    assert_eq!(m["match"], "build-id", "{m}");
    let h = &r["heap"];
    let churn = site(h, p, "churn", "churn");
    assert_eq!(
        (
            u(churn, "allocations"),
            u(churn, "temporary"),
            u(churn, "leaked_allocations"),
            u(churn, "leaked_bytes")
        ),
        (CHURN, CHURN, 0, 0),
        "{churn}"
    );
    assert!((16..80).contains(&u(churn, "peak_bytes")), "{churn}");
    let leak = site(h, p, "leak_some", "leak");
    assert_eq!(
        (
            u(leak, "allocations"),
            u(leak, "temporary"),
            u(leak, "leaked_allocations"),
            u(leak, "leaked_bytes"),
            u(leak, "peak_bytes")
        ),
        (20_000, 0, 20_000, 2_000_000, 2_000_000),
        "{leak}"
    );
    let grow = site(h, p, "grow", "grow");
    assert_eq!(
        (
            u(grow, "allocations"),
            u(grow, "temporary"),
            u(grow, "leaked_allocations"),
            u(grow, "leaked_bytes"),
            u(grow, "peak_bytes")
        ),
        (1000, 1000, 0, 0, 64_000),
        "{grow}"
    );
    // Nothing else allocates in this program (no stdio): the totals are the three sites.
    assert_eq!(
        (
            u(h, "allocations"),
            u(h, "temporary"),
            u(h, "leaked_allocations"),
            u(h, "leaked_bytes")
        ),
        (CHURN + 21_000, CHURN + 1000, 20_000, 2_000_000),
        "{h:#}"
    );
    let peak = u(h, "peak_bytes");
    assert!((2_064_000..2_064_000 + 4096).contains(&peak), "{h}");
}

/// The allocations whose stack the interposer cut short, by the reason it recorded (zeros
/// left out).
fn cut_short(h: &Value) -> Vec<(String, u64)> {
    h["anomalies"]["cut_short_allocations"]
        .as_object()
        .expect("cut_short_allocations")
        .iter()
        .filter_map(|(why, n)| Some((why.clone(), n.as_u64().filter(|&n| n > 0)?)))
        .collect()
}

/// The sites' callers: `main` under each, where the unwinder can see it.
fn stack_of(h: &Value, function: &str) -> Vec<String> {
    h["sites"]
        .as_array()
        .expect("sites")
        .iter()
        .find(|s| s["function"] == function)
        .and_then(|s| s["stack"].as_array())
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn aarch64_board_heap_counts_equal_the_ground_truth() {
    let board = Board::Aarch64;
    let tag = "board_heap_aarch64";
    let sysroot = Sysroot::new(board, tag);
    let p = sysroot.build_c(board, "heap_truth.c", "heap_truth", &["-O2"]);
    let mut files = interposer_files(board);
    files.push((p.guest.clone(), std::fs::read(&p.stripped).unwrap(), 0o755));
    let run = boot(board, tag, files, &[heap_job("/out/h.zst", &p, &[])]);
    run.assert_ok(1);
    let out = run.save("h.zst", tag);
    let r = heap_report_json(&out, &sysroot.dir);
    assert_heap_truth(&r, &p, board);
    // framehop unwinds the whole stack from .eh_frame on AArch64.
    assert_eq!(stack_of(&r["heap"], "leak_some"), ["leak_some", "main"]);
    assert_eq!(cut_short(&r["heap"]), []);
}

/// Default armhf code (Thumb-2, no unwind tables), with and without CPU sampling (the second
/// run checks the path that never opens perf), and the same program built with
/// `-funwind-tables`: the interposer records the entry registers and the stack words an
/// unwind may need, and hostside unwinds them with the sysroot's `.debug_frame` (issue 25),
/// so every allocation has its whole stack, `main` included, and none was cut short.
#[test]
fn armv7_board_heap_counts_equal_the_ground_truth() {
    let board = Board::Armv7;
    let tag = "board_heap_armv7";
    let sysroot = Sysroot::new(board, tag);
    let p = sysroot.build_c(board, "heap_truth.c", "heap_truth", &["-O2"]);
    let tables = sysroot.build_c(
        board,
        "heap_truth.c",
        "heap_truth_tables",
        &["-O2", "-funwind-tables"],
    );
    let mut files = interposer_files(board);
    for q in [&p, &tables] {
        files.push((q.guest.clone(), std::fs::read(&q.stripped).unwrap(), 0o755));
    }
    let run = boot(
        board,
        tag,
        files,
        &[
            heap_job("/out/h.zst", &p, &[]),
            heap_job("/out/h_nocpu.zst", &p, &["--no-cpu"]),
            heap_job("/out/h_tables.zst", &tables, &[]),
        ],
    );
    run.assert_ok(3);
    for (name, q) in [
        ("h.zst", &p),
        ("h_nocpu.zst", &p),
        ("h_tables.zst", &tables),
    ] {
        let out = run.save(name, tag);
        let r = heap_report_json(&out, &sysroot.dir);
        assert_heap_truth(&r, q, board);
        for function in ["churn", "leak_some", "grow"] {
            assert_eq!(stack_of(&r["heap"], function), [function, "main"], "{name}");
        }
        assert_eq!(cut_short(&r["heap"]), [], "{name}");
    }
}
