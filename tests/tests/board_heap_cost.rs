//! Issue 25's cost measurement (a benchmark, not run by default; `bench/board_heap_cost.py`
//! runs it): the per-allocation cost and the file size of `rec --heap` on the emulated ARMv7
//! board against the AArch64 board's, on the same programs built with Debian's defaults for
//! each: `tests/programs/heap_bench.c` and Lua from the real-world corpus. Each board runs,
//! `ROUNDS` times interleaved, the program alone and under `rec --heap --no-cpu`, timed on the
//! board by `bench/board/timed.c` (wall time and the CPU time of the whole process tree, rec
//! included). Prints one line per board and program; the script turns them into ratios.
//!
//! Emulation (TCG) runs the two instruction sets at different speeds: the per-allocation cost
//! is given in nanoseconds and also relative to the program's own time on the same board.

use std::path::Path;

use crossprof_tests::board_heap::{interposer_files, prepare_real};
use crossprof_tests::boards::{boot, Board, Sysroot};
use crossprof_tests::*;

/// Interleaved rounds per configuration.
const ROUNDS: usize = 3;

/// heap_bench's short-lived allocations (it adds 30,000 of its own).
const N: u64 = 100_000;

/// (wall ns, cpu ns) of a timed job's log.
fn timed(log: &[u8]) -> (f64, f64) {
    let text = String::from_utf8_lossy(log);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with("timed "))
        .unwrap_or_else(|| panic!("no timing in {text}"));
    let w: Vec<&str> = line.split_whitespace().collect();
    (w[2].parse().unwrap(), w[4].parse().unwrap())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn measure(board: Board, arch: &str) {
    let tag = format!("board_heap_cost_{arch}");
    let dir = scratch().join(&tag);
    let sysroot = Sysroot::new(board, &tag);
    let bench = sysroot.build_c(board, "heap_bench.c", "heap_bench", &["-O2"]);
    let mut files = interposer_files(board);
    files.push((
        bench.guest.clone(),
        std::fs::read(&bench.stripped).unwrap(),
        0o755,
    ));
    let timer = dir.join("timed");
    compile_with(
        &board.gcc(),
        root().join("bench/board/timed.c").to_str().unwrap(),
        &["-static", "-O2"],
        &timer,
    );
    files.push(("/timed".into(), std::fs::read(&timer).unwrap(), 0o755));
    let lua = build_lua(board, arch, &dir, &mut files);
    let programs: Vec<(&str, Vec<String>)> = vec![
        ("heap_bench", vec![bench.guest.clone(), N.to_string()]),
        ("lua", {
            let mut v = vec!["./lua".to_string()];
            v.extend(lua.iter().cloned());
            v
        }),
    ];
    let mut jobs = Vec::new();
    for round in 0..ROUNDS {
        for (name, cmd) in &programs {
            let mut base = vec!["/timed".to_string()];
            base.extend(cmd.iter().cloned());
            jobs.push(base);
            let mut rec = vec!["/timed", "/rec", "--heap", "--no-cpu", "--out"]
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>();
            rec.push(format!("/out/{name}{round}.zst"));
            rec.push("--".into());
            rec.extend(cmd.iter().cloned());
            jobs.push(rec);
        }
    }
    let run = boot(board, &tag, files, &jobs);
    run.assert_ok(jobs.len());
    for (p, (name, _)) in programs.iter().enumerate() {
        let (mut base, mut rec) = ((vec![], vec![]), (vec![], vec![]));
        for round in 0..ROUNDS {
            let job = |k: usize| timed(run.file(&format!("job{}.log", round * 4 + p * 2 + k)));
            let (b, r) = (job(0), job(1));
            base.0.push(b.0);
            base.1.push(b.1);
            rec.0.push(r.0);
            rec.1.push(r.1);
        }
        let recording = run.save(&format!("{name}0.zst"), &tag);
        let r = heap_report_json(&recording, Path::new(&sysroot.dir));
        let allocations = r["heap"]["allocations"].as_u64().unwrap_or(0).max(1) as f64;
        let bytes = std::fs::metadata(&recording).unwrap().len();
        let (bw, bc, rw, rc) = (median(base.0), median(base.1), median(rec.0), median(rec.1));
        println!(
            "board_heap_cost {arch} {name}: allocations {allocations} file_bytes {bytes} \
             base_wall_ns {bw:.0} rec_wall_ns {rw:.0} base_cpu_ns {bc:.0} rec_cpu_ns {rc:.0} \
             wall_ns_per_alloc {:.1} cpu_ns_per_alloc {:.1} wall_ratio {:.2} cpu_ratio {:.2}",
            (rw - bw) / allocations,
            (rc - bc) / allocations,
            rw / bw,
            rc / bc,
        );
    }
}

/// Lua from the corpus at `/lua` with its input; its arguments.
fn build_lua(
    board: Board,
    arch: &str,
    dir: &Path,
    files: &mut crossprof_tests::boards::Files,
) -> Vec<String> {
    let probe = crossprof_tests::realworld::build("lua", &format!("{arch}-bfd-O2-pie"));
    let case = prepare_real(
        board,
        "lua",
        &format!("{arch}-bfd-O2-pie"),
        &probe.board_args,
        dir,
        files,
    );
    case.args
}

#[test]
#[ignore = "a benchmark: bench/board_heap_cost.py"]
fn aarch64_board_heap_cost() {
    measure(Board::Aarch64, "aarch64");
}

#[test]
#[ignore = "a benchmark: bench/board_heap_cost.py"]
fn armv7_board_heap_cost() {
    measure(Board::Armv7, "armv7");
}
