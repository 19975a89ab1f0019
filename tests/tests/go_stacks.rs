//! Issue 24: Go stacks. `go_split.go`, built by Debian's Go toolchain and stripped as Go
//! programs ship (no `.symtab`, no DWARF, and Go code never has `.eh_frame`), recorded with
//! `rec`'s defaults: every stack is unwound with Go's own function table (`.gopclntab`, which
//! stripping keeps) to Go's outermost frame, named as Go names functions, with the exact
//! chains and the 3:1 split the program makes. perf on the same program in the same test is
//! the reference: its `--call-graph dwarf` finds no table for Go code, and its frame-pointer
//! chains skip the caller of every frameless leaf.

use std::process::Command;

use crossprof_tests::boards::{boot, Board, Sysroot};
use crossprof_tests::golang::assert_go_split_ground_truth;
use crossprof_tests::perf::{self, PerfSample};
use crossprof_tests::perf_compare;
use crossprof_tests::*;
use serde_json::Value;

/// Rounds of `go_split` per phase: about a second of CPU each on the machines here.
const ROUNDS: &str = "350";

/// Asserts of a Go program's `report --json`: at least 95% of the samples complete (the
/// runtime's own start-up and stack growth included) and no frame outside a mapping.
/// Returns (samples, complete).
fn assert_complete(r: &Value) -> (u64, u64) {
    let samples = r["cpu"]["samples"].as_u64().expect("samples");
    let u = &r["cpu"]["stack_unwinding"];
    let complete = u["complete"].as_u64().expect("complete");
    assert!(
        complete * 100 >= samples * 95,
        "{complete} of {samples} complete: {u:#}"
    );
    // No frame outside every mapping is ever shown (stacks cut there lose it: a sample
    // inside execve still holds rec's registers).
    let functions = r["cpu"]["functions"].as_array().expect("functions");
    let outside: Vec<&Value> = functions
        .iter()
        .filter(|f| f["module"] == "[unknown]")
        .collect();
    assert!(
        outside.is_empty(),
        "frames outside every mapping: {outside:?}"
    );
    (samples, complete)
}

/// Asserts what `report --json` says of a `go_split` recording: [`assert_complete`], few stack
/// switches, and the leaves named with their file and line. Returns the samples.
fn assert_report(r: &Value) -> u64 {
    let (samples, _) = assert_complete(r);
    let u = &r["cpu"]["stack_unwinding"];
    let functions = r["cpu"]["functions"].as_array().expect("functions");
    // Nothing in the loops switches stacks; the runtime's own work does (growing the new
    // goroutine's stack, starting threads), a larger part of a short run on the slower
    // emulated board.
    let switches = u["go_stack_switches"].as_u64().expect("go_stack_switches");
    assert!(
        switches * 100 <= samples * 10,
        "{switches} stack switches: {u:#}"
    );
    for (name, line) in [("main.hotA", 29), ("main.hotB", 37)] {
        let f = functions
            .iter()
            .find(|f| f["function"] == name)
            .unwrap_or_else(|| panic!("no {name} in {functions:#?}"));
        assert!(
            f["file"]
                .as_str()
                .is_some_and(|p| p.ends_with("go_split.go")),
            "{f}"
        );
        // The loop's line (the hottest instruction is the loop's compare or its body).
        let l = f["line"].as_u64().expect("line");
        assert!((line - 1..=line).contains(&l), "{name} at line {l}: {f}");
    }
    samples
}

/// (samples in the two leaves, those whose chain reaches `runtime.goexit`) of a perf run.
fn perf_complete(samples: &[PerfSample]) -> (u64, u64) {
    let leaf = |s: &&PerfSample| s.frames.iter().any(|f| f.name.starts_with("main.hot"));
    let user = samples.iter().filter(leaf).count() as u64;
    let complete = samples
        .iter()
        .filter(leaf)
        .filter(|s| {
            s.frames
                .iter()
                .any(|f| f.name.starts_with("runtime.goexit"))
        })
        .count() as u64;
    (user, complete)
}

#[test]
fn stripped_go_unwinds_with_its_own_table_to_goexit() {
    let p = build("go_split.go", "go-split", &[]);
    // As distributed: the stripped program is all the sysroot has.
    let bare = scratch().join("go-split").join("sysroot-stripped");
    let at = bare.join(p.board.strip_prefix("/").expect("absolute"));
    std::fs::create_dir_all(at.parent().expect("parent")).expect("mkdir");
    std::fs::copy(&p.board, &at).expect("copy");

    let recording = scratch().join("go-split.zst");
    record(&recording, &[], &[p.board.to_str().expect("utf-8"), ROUNDS]);
    let header = crossprof_format::Reader::new(&std::fs::read(&recording).expect("read"))
        .expect("a recording")
        .header()
        .call_graph
        .clone();
    assert!(header.starts_with("dwarf="), "rec's default is {header}");

    let stripped = report_json(&recording, Some(&bare));
    let samples = assert_report(&stripped);
    let (known, user) = assert_go_split_ground_truth(&folded_stacks(&recording, &bare));
    // With the unstripped program (DWARF) the same stacks and names.
    assert_report(&report_json(&recording, Some(&p.sysroot)));
    assert_go_split_ground_truth(&folded_stacks(&recording, &p.sysroot));

    // perf on the same program, reading names and tables from the unstripped copy in the
    // sysroot (no build-id cache, so that `perf script --symfs` reads the sysroot).
    let mut perf_lines = Vec::new();
    for call_graph in ["dwarf", "fp"] {
        let data = scratch().join(format!("go-split.{call_graph}.perf.data"));
        run_ok(
            Command::new("perf")
                .args(["record", "-q", "--no-buildid", "-F", "999"])
                .args(["--call-graph", call_graph, "-o"])
                .arg(&data)
                .arg("--")
                .arg(&p.board)
                .arg(ROUNDS),
        );
        let (perf_user, perf_done) = perf_complete(&perf::script(&data, &p.sysroot));
        assert!(
            perf_user > 0,
            "perf --call-graph {call_graph}: no sample in the leaves"
        );
        perf_lines.push(format!(
            "perf --call-graph {call_graph}: {perf_done} of {perf_user} reach runtime.goexit"
        ));
        assert!(
            known * perf_user >= perf_done * user,
            "crossprof completes {known} of {user}, fewer than perf {call_graph}'s {perf_done} of {perf_user}"
        );
    }
    eprintln!(
        "go_split: crossprof {known} of {user} leaf samples on the known chains ({samples} samples); {}",
        perf_lines.join("; ")
    );
}

/// The same on the emulated AArch64 board: Go's ARM64 frames keep the return address at the
/// bottom of the frame and a sampled leaf's in the link register.
#[test]
fn aarch64_board_unwinds_stripped_go_to_goexit() {
    let board = Board::Aarch64;
    let tag = "board_aarch64_go";
    let sysroot = Sysroot::new(board, tag);
    let p = sysroot.build_go(board, "go_split.go", "go_split");
    // As distributed: the sysroot holds the stripped program.
    std::fs::copy(&p.stripped, &p.unstripped).expect("copy");
    let files = vec![(
        p.guest.clone(),
        std::fs::read(&p.stripped).expect("read"),
        0o755,
    )];
    // 80 rounds: the runtime's stack switches are a fixed amount of work (about 20 samples
    // on this board), which 40 rounds (210 samples) put just over the 10% allowed.
    let job: Vec<String> = ["/rec", "--out", "/out/go.zst", "--", &p.guest, "80"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let run = boot(board, tag, files, &[job]);
    run.assert_ok(1);
    let out = run.save("go.zst", tag);
    let r = report_json(&out, Some(&sysroot.dir));
    let samples = assert_report(&r);
    assert!(samples >= 150, "{samples} samples");
    let (known, user) = assert_go_split_ground_truth(&folded_stacks(&out, &sysroot.dir));
    eprintln!("{tag}: {known} of {user} leaf samples on the known chains ({samples} samples)");
}

/// Go's own `gofmt`, built by Debian's Go toolchain from its sources (`cmd/gofmt`) and
/// stripped, formatting the compiler's largest packages: at least 95% of its samples
/// complete with `rec`'s defaults and only the stripped program in the sysroot, no frame
/// outside a mapping, every Go frame named, at least as many complete as perf's frame-pointer
/// chains (perf's `--call-graph dwarf` finds no table for Go code) in the same run, and the
/// self shares of perf's top 10 functions within 3 points.
#[test]
fn gofmt_built_by_debians_go_unwinds_and_agrees_with_perf() {
    let dir = scratch().join("gofmt");
    let sysroot = dir.join("sysroot");
    let board = dir.join("board").join("gofmt");
    let unstripped = sysroot.join(board.strip_prefix("/").expect("absolute"));
    std::fs::create_dir_all(unstripped.parent().expect("parent")).expect("mkdir");
    std::fs::create_dir_all(board.parent().expect("parent")).expect("mkdir");
    crossprof_tests::golang::go_build(std::path::Path::new("cmd/gofmt"), &unstripped, "amd64");
    run_ok(Command::new("strip").arg("-o").arg(&board).arg(&unstripped));
    let bare = dir.join("sysroot-stripped");
    let at = bare.join(board.strip_prefix("/").expect("absolute"));
    std::fs::create_dir_all(at.parent().expect("parent")).expect("mkdir");
    std::fs::copy(&board, &at).expect("copy");

    // The workload: the compiler's SSA, type checker, parser and noder sources.
    let goroot = Command::new("go")
        .args(["env", "GOROOT"])
        .output()
        .expect("go env");
    let goroot = String::from_utf8_lossy(&goroot.stdout).trim().to_string();
    let mut command = vec![board.to_string_lossy().into_owned(), "-l".into()];
    for pkg in ["ssa", "types2", "syntax", "noder", "ssagen"] {
        let d = std::path::Path::new(&goroot)
            .join("src/cmd/compile/internal")
            .join(pkg);
        let mut files: Vec<String> = std::fs::read_dir(&d)
            .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "go"))
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        files.sort();
        command.extend(files);
    }
    let recording = dir.join("gofmt.zst");
    let data = dir.join("gofmt.perf.data");
    perf::record_with_rec(&rec(), &recording, &data, "fp", 1999, &dir, &command);

    let r = report_json(&recording, Some(&bare));
    let (samples, complete) = assert_complete(&r);
    assert!(samples >= 500, "{samples} samples");
    let u = &r["cpu"]["stack_unwinding"];
    let functions = r["cpu"]["functions"].as_array().expect("functions");
    let module = board.to_str().expect("utf-8");
    assert!(
        functions.iter().any(|f| f["module"] == module),
        "no function in {module}: {functions:#?}"
    );
    let unnamed: Vec<&Value> = functions
        .iter()
        .filter(|f| {
            f["module"] == module && f["function"].as_str().is_some_and(|n| n.contains("+0x"))
        })
        .collect();
    assert!(unnamed.is_empty(), "unnamed Go frames: {unnamed:?}");

    let reference = perf::profile(&perf::script(&data, &sysroot), |c| c != "waitexec");
    let pct = perf_compare::pct;
    let perf_compare::Shares { worst, rows } = perf_compare::shares(&r, &reference, false);
    eprintln!(
        "gofmt: crossprof {complete} of {samples} complete ({} at a Go stack switch); perf -g: \
         {} of {} reach the entry\n  perf% hostside% self, perf's top 10 (worst {worst:.1})\n  {}",
        u["go_stack_switches"],
        reference.reach_entry,
        reference.samples,
        rows.join("\n  ")
    );
    assert!(
        pct(complete, samples) >= pct(reference.reach_entry, reference.samples),
        "fewer complete than perf"
    );
    assert!(
        worst <= perf_compare::TOLERANCE,
        "self shares differ by {worst:.1} points"
    );
}
