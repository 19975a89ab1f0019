//! Issue 29, acceptance 1 on a board: Debian's own `perf` (the arm64 `linux-perf` package,
//! the same 6.1 as the board's kernel, with the libraries it loads; tests/boards/setup.sh
//! unpacks it) records the stripped CPU ground truth on the emulated AArch64 board, once with
//! `perf record -g` (the kernel's frame-pointer walk) and once with `--call-graph dwarf`
//! (stack copies, unwound here by crossprof with the sysroot's tables). `hostside report`
//! reads each perf.data with the program's debug sysroot: its module found by the build-id
//! perf stored, the 75:25 split, the same samples as `perf script`, and `main` reached in at
//! least as many samples as perf's own reading of the same file on this host.

use crossprof_tests::boards::{boot, debian_libc, debian_perf, Board, BoardProgram, Sysroot};
use crossprof_tests::*;

/// The board job `perf record -F 999 -e cpu-clock CALL_GRAPH -o OUT -- PROGRAM ROUNDS`.
fn perf_job(call_graph: &[&str], out: &str, p: &BoardProgram, rounds: &str) -> Vec<String> {
    let mut job = vec!["/usr/bin/perf", "record", "-q", "-N", "-F", "999"];
    job.extend(["-e", "cpu-clock"]);
    job.extend(call_graph);
    job.extend(["-o", out, "--", &p.guest, rounds]);
    job.into_iter().map(String::from).collect()
}

/// hostside's report of `data` against perf's own reading of it, on the board's architecture,
/// with `main` reached in at least 90% of the samples in hot_a and hot_b.
fn assert_reads_like_perf(data: &std::path::Path, sysroot: &Sysroot, p: &BoardProgram) {
    let r = perf::assert_reads_perf_data_like_perf(data, &sysroot.dir, &p.guest);
    assert_eq!(r.arch, Board::Aarch64.arch_name());
    let ((a, b), (ours, _)) = (r.hot, r.main);
    assert!(
        ours * 10 >= (a + b) * 9,
        "main reached in {ours} samples of {} in hot_a and hot_b",
        a + b
    );
}

#[test]
fn perf_data_recorded_by_perf_on_the_aarch64_board() {
    let board = Board::Aarch64;
    let tag = "board_perf_data";
    let sysroot = Sysroot::new(board, tag);
    // Frame pointers for the kernel's walk; the compiler's defaults for the stack copies.
    let fp = sysroot.build_c(board, "cpu_split.c", "cpu_split_fp", C_FP);
    let dwarf = sysroot.build_c(board, "cpu_split.c", "cpu_split", &["-O2"]);
    let mut files = debian_perf(board);
    // The board runs the C library perf came with (Debian's): the sysroot holds the same
    // files, and Debian's detached debug info for them.
    for (guest, data, _) in &files {
        if guest.contains("/libc.so") || guest.contains("/ld-linux") {
            let dest = sysroot.dir.join(guest.trim_start_matches('/'));
            std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
            std::fs::write(&dest, data).unwrap();
        }
    }
    std::fs::create_dir_all(sysroot.dir.join("usr/lib")).unwrap();
    std::os::unix::fs::symlink(
        debian_libc(board).join("usr/lib/debug"),
        sysroot.dir.join("usr/lib/debug"),
    )
    .unwrap();
    for p in [&fp, &dwarf] {
        files.push((p.guest.clone(), std::fs::read(&p.stripped).unwrap(), 0o755));
    }
    let jobs = [
        perf_job(&["-g"], "/out/fp.data", &fp, "300"),
        perf_job(&["--call-graph", "dwarf"], "/out/dwarf.data", &dwarf, "300"),
    ];
    let run = boot(board, tag, files, &jobs);
    run.assert_ok(jobs.len());
    assert_reads_like_perf(&run.save("fp.data", tag), &sysroot, &fp);
    assert_reads_like_perf(&run.save("dwarf.data", tag), &sysroot, &dwarf);
}
