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
//! phase 2 sites. Each platform also attaches sampled (`--heap-sample 1KiB`): the estimate
//! of phase 2 within 4 standard errors, nothing else recorded.

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

/// Mean bytes between samples of the sampled attach: about 90 of phase 2's 1,251
/// allocations (91,616 bytes) are recorded.
const SAMPLE_MEAN: u64 = 1024;

/// Phase 2's allocation sizes (a realloc counts at its new size, as the interposer samples).
fn phase_two_sizes() -> Vec<u64> {
    let mut sizes = vec![64; 1000];
    sizes.extend([32; 200]);
    sizes.extend((1..=51).map(|i| 16 * i));
    sizes
}

/// The report of a sampled attach (`--heap-sample 1KiB`) estimates phase 2 and holds nothing
/// else: the rate reached the attached interposer (the header's rate, fewer samples than
/// allocations), the estimated allocations lie within 4 standard errors of the 1,251 made
/// (the error at the truth: `sqrt(sum (1-p)/p)` over the sizes), and only phase 2's sites
/// appear. Phase 1's blocks freed after the attach are not seen at all (only frees of
/// sampled blocks are recorded).
fn assert_sampled_phase_two(report: &Value, what: &str) {
    let heap = &report["heap"];
    assert_eq!(
        number(&heap["sampled"], "mean_bytes"),
        SAMPLE_MEAN,
        "{what}"
    );
    let samples = number(&heap["sampled"], "samples");
    let sizes = phase_two_sizes();
    assert!(
        samples > 0 && samples < sizes.len() as u64 / 4,
        "{what}: {samples} samples of {} allocations",
        sizes.len()
    );
    let p = |s: u64| -(-(s as f64) / SAMPLE_MEAN as f64).exp_m1();
    let se: f64 = sizes
        .iter()
        .map(|&s| (1.0 - p(s)) / p(s))
        .sum::<f64>()
        .sqrt();
    let estimate = heap["allocations"].as_f64().expect("allocations");
    let truth = sizes.len() as f64;
    assert!(
        (estimate - truth).abs() <= 4.0 * se,
        "{what}: {estimate} allocations estimated, {truth} made (standard error {se:.0})"
    );
    let sites = by_function(report);
    assert!(
        sites
            .keys()
            .all(|f| PHASE_TWO.iter().any(|(two, _)| two == f)),
        "{what}: a site outside phase 2: {sites:?}"
    );
    let unknown = report["diagnostics"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["kind"] == "heap-unknown-frees"));
    assert!(unknown.is_none(), "{what}: {unknown:?}");
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
    // rec attached with `extra` arguments, recording to `name`; the driver's output.
    let attach = |name: &str, extra: &[&str]| {
        let out = scratch().join(tag).join(name);
        let rec = rec();
        let mut tool = vec![rec.to_str().unwrap(), "--heap", "--no-cpu"];
        tool.extend(extra);
        tool.extend(["--out", out.to_str().unwrap()]);
        let said = drive(&driver.board, &program.board, "attached to", "stop", &tool);
        (out, said)
    };
    let (out, said) = attach("h.zst", &[]);
    assert!(said.contains("call slots redirected"), "{said}");
    let report = heap_report(&out, &program.sysroot, &[]);
    assert_phase_two(&report, "x86_64");

    // Sampled: the rate goes to the attached interposer with the socket.
    let mean = SAMPLE_MEAN.to_string();
    let (sampled, _) = attach("s.zst", &["--heap-sample", &mean]);
    assert_sampled_phase_two(
        &heap_report(&sampled, &program.sysroot, &[]),
        "x86_64 sampled",
    );

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
    // The same attach, sampled: the rate is passed in a register of the board's width.
    let mean = SAMPLE_MEAN.to_string();
    let mut sampled = job.clone();
    sampled.truncate(sampled.len() - 2);
    sampled.extend(["--heap-sample", &mean, "--out", "/out/s.zst"].map(String::from));
    let run = boot(board, tag, files, &[job, sampled]);
    for log in ["job0.log", "job1.log"] {
        let log = String::from_utf8_lossy(run.file(log)).into_owned();
        assert!(log.contains("result ok"), "{log}");
    }
    run.assert_ok(2);
    let report = heap_report(&run.save("h.zst", tag), &sysroot.dir, &[]);
    assert_phase_two(&report, tag);
    let report = heap_report(&run.save("s.zst", tag), &sysroot.dir, &[]);
    assert_sampled_phase_two(&report, &format!("{tag} sampled"));
}

#[test]
fn attached_during_phase_two_on_the_aarch64_board() {
    on_board(Board::Aarch64, "heap_attach_aarch64");
}

#[test]
fn attached_during_phase_two_on_the_armv7_board() {
    on_board(Board::Armv7, "heap_attach_armv7");
}
