//! Issue 27, acceptance 1: `rec --heap -p PID` attached to a running daemon-like program
//! (tests/programs/heap_phases.c: phases of known allocations, each run when the program reads
//! its number) during its second phase, on x86_64 and on the emulated AArch64 and ARMv7 boards
//! (real Debian kernels, the board's static rec and glibc interposer). The driver
//! (tests/programs/heap_attach_driver.c) runs phase 1, starts rec, runs phase 2 once rec says it
//! attached, stops rec with SIGINT, runs phase 3 after the detach and checks that the program
//! ends with correct output. The report has exactly phase 2's allocations per site (1,000
//! temporary in two_temporary, 200 leaked in two_leak, 51 in two_grow), nothing of phases 1
//! and 3, and phase 1's 300 blocks freed in phase 2 as frees of unknown blocks, counted apart.
//! On x86_64 heaptrack attached the same way (`heaptrack -p`, through gdb) counts the same
//! phase 2 sites.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crossprof_tests::board_heap::interposer_files;
use crossprof_tests::boards::{boot, Board, Sysroot};
use crossprof_tests::*;
use serde_json::Value;

/// Phase 2's functions with their allocations, temporary allocations and leaked blocks, as
/// the program makes them.
const PHASE_TWO: [(&str, [u64; 3]); 3] = [
    ("two_temporary", [1000, 1000, 0]),
    ("two_leak", [200, 0, 200]),
    ("two_grow", [51, 51, 0]),
];

/// Per function of the report's heap sites: allocations, temporary, leaked blocks.
fn by_function(report: &Value) -> BTreeMap<String, [u64; 3]> {
    let mut out: BTreeMap<String, [u64; 3]> = BTreeMap::new();
    for s in report["heap"]["sites"].as_array().expect("sites") {
        let e = out
            .entry(s["function"].as_str().unwrap_or("?").to_string())
            .or_default();
        e[0] += number(s, "allocations");
        e[1] += number(s, "temporary");
        e[2] += number(s, "leaked_allocations");
    }
    out
}

/// The report of an attach recording holds phase 2 exactly and nothing else.
fn assert_phase_two(report: &Value, what: &str) {
    let sites = by_function(report);
    for (f, counts) in PHASE_TWO {
        assert_eq!(sites.get(f), Some(&counts), "{what}: {f}: {sites:?}");
    }
    assert_eq!(
        sites.len(),
        3,
        "{what}: only phase 2's sites were recorded: {sites:?}"
    );
    assert_eq!(number(&report["heap"], "allocations"), 1251, "{what}");
    let unknown = report["diagnostics"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["kind"] == "heap-unknown-frees"))
        .map(|d| number(d, "count"));
    assert_eq!(
        unknown,
        Some(300),
        "{what}: phase 1's blocks freed after the attach"
    );
}

/// Runs the driver on x86_64 with `tool` attaching; its combined output.
fn drive(driver: &Path, program: &Path, marker: &str, stop: &str, tool: &[&str]) -> String {
    let o = Command::new(driver)
        .arg(program)
        .args([marker, stop, "--"])
        .args(tool)
        .current_dir(scratch())
        .output()
        .expect("run the driver");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success() && text.contains("result ok"), "{text}");
    text
}

/// heaptrack_print's allocations per function of `functions` in `data` (from its flame graph
/// of allocation counts: each stack once, so a function is counted once per stack).
fn heaptrack_allocations(data: &Path, functions: &[&str]) -> Vec<u64> {
    let folded = data.with_extension("folded");
    let o = Command::new("heaptrack_print")
        .arg("--file")
        .arg(data)
        .args(["--print-allocators=0", "--print-peaks=0", "--print-leaks=0"])
        .args(["--print-temporary=0", "--flamegraph-cost-type=allocations"])
        .arg("--print-flamegraph")
        .arg(&folded)
        .output()
        .expect("run heaptrack_print");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&folded).expect("flame graph");
    functions
        .iter()
        .map(|f| {
            text.lines()
                .filter(|l| {
                    l.split(';').any(|frame| {
                        let frame = frame.trim();
                        frame == *f || frame.starts_with(&format!("{f} ("))
                    })
                })
                .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
                .sum()
        })
        .collect()
}

#[test]
fn attached_during_phase_two_on_x86_64_like_heaptrack() {
    let tag = "heap_attach";
    let program = build("heap_phases.c", tag, &["-O2"]);
    let driver = build("heap_attach_driver.c", "heap_attach_driver", &["-O2"]);
    add_system_libs(&program.sysroot, &program.board);
    let out = scratch().join(tag).join("h.zst");
    let rec = rec();
    let said = drive(
        &driver.board,
        &program.board,
        "attached to",
        "stop",
        &[
            rec.to_str().unwrap(),
            "--heap",
            "--no-cpu",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(said.contains("call slots redirected"), "{said}");
    let report = heap_report(&out, &program.sysroot, &[]);
    assert_phase_two(&report, "x86_64");

    // heaptrack attached the same way: through gdb, until the program ends (a SIGINT would
    // kill its interpreter before the data is written), so phase 3 is in it too, at sites
    // of its own. heaptrack names functions on the machine that records, from the binary
    // itself: it runs the unstripped copy (the same code).
    let ht = scratch().join(tag).join("heaptrack");
    drive(
        &driver.board,
        &program.unstripped,
        "injection finished",
        "wait",
        &["heaptrack", "-o", ht.to_str().unwrap()],
    );
    let data = ["zst", "gz"]
        .iter()
        .map(|e| ht.with_extension(e))
        .find(|p| p.exists())
        .expect("heaptrack data");
    let names: Vec<&str> = PHASE_TWO.iter().map(|(f, _)| *f).collect();
    let theirs = heaptrack_allocations(&data, &names);
    let ours: Vec<u64> = PHASE_TWO.iter().map(|(_, c)| c[0]).collect();
    assert_eq!(
        theirs, ours,
        "heaptrack -p (left) and rec --heap -p per site"
    );
}

fn on_board(board: Board, tag: &str) {
    let sysroot = Sysroot::new(board, tag);
    let p = sysroot.build_c(board, "heap_phases.c", "heap_phases", &["-O2"]);
    let d = sysroot.build_c(
        board,
        "heap_attach_driver.c",
        "heap_attach_driver",
        &["-O2"],
    );
    let mut files = interposer_files(board);
    for q in [&p, &d] {
        files.push((q.guest.clone(), std::fs::read(&q.stripped).unwrap(), 0o755));
    }
    let job: Vec<String> = [
        &d.guest,
        &p.guest,
        "attached to",
        "stop",
        "--",
        "/rec",
        "--heap",
        "--no-cpu",
        "--out",
        "/out/h.zst",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let run = boot(board, tag, files, &[job]);
    let log = String::from_utf8_lossy(run.file("job0.log")).into_owned();
    assert!(log.contains("result ok"), "{log}");
    run.assert_ok(1);
    let report = heap_report(&run.save("h.zst", tag), &sysroot.dir, &[]);
    assert_phase_two(&report, tag);
}

#[test]
fn attached_during_phase_two_on_the_aarch64_board() {
    on_board(Board::Aarch64, "heap_attach_aarch64");
}

#[test]
fn attached_during_phase_two_on_the_armv7_board() {
    on_board(Board::Armv7, "heap_attach_armv7");
}
