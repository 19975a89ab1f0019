//! Issue 24: stacks deeper than the stack copy. `deep_descent.c` descends 1,000 levels of
//! about 80 bytes each, spinning at every level, far deeper than `rec`'s default copy: each
//! chain the copy cuts short is joined to the same thread's complete chain through the same
//! two frames at the same stack addresses (`hostside/src/stack_join.rs`), and every joined
//! chain must be exactly right: `spin <- descend x k <- run <- main` with the samples' depth
//! uniform (mean k = 500.5). perf on the same program, with the same copy size, is the
//! reference: its `--call-graph dwarf` stops where the copy ends.

use std::process::Command;

use crossprof_tests::*;

/// Levels of the descent (`DEPTH` in the program).
const DEPTH: f64 = 1000.0;

/// (samples in `spin`, of them with the exact chain, the mean number of `descend` frames).
fn chains(stacks: &[(Vec<String>, u64)]) -> (u64, u64, f64) {
    let (mut user, mut exact, mut depth) = (0u64, 0u64, 0u64);
    for (frames, n) in stacks {
        let Some(leaf) = frames.iter().position(|f| f == "spin") else {
            continue;
        };
        user += n;
        let own: Vec<&str> = frames[..leaf]
            .iter()
            .map(String::as_str)
            .skip_while(|f| *f != "main")
            .collect();
        let k = own.iter().filter(|f| **f == "descend").count();
        if own.len() == k + 2 && own.starts_with(&["main", "run"]) {
            exact += n;
            depth += k as u64 * n;
        }
    }
    (user, exact, depth as f64 / exact.max(1) as f64)
}

/// CPU time `deep_descent` runs for (whole descents).
const CPU_SECONDS: &str = "1.5";

#[test]
fn chains_cut_by_the_stack_copy_are_joined_exactly() {
    let p = build("deep_descent.c", "deep-descent", &["-O2"]);
    add_system_libs(&p.sysroot, &p.board);
    add_host_debug_files(&p.sysroot);
    let recording = scratch().join("deep-descent.zst");
    // 1.5 s of CPU time: about 1,500 samples at rec's 999 Hz, however fast the machine.
    record(
        &recording,
        &[],
        &[p.board.to_str().expect("utf-8"), CPU_SECONDS],
    );
    let r = report_json(&recording, Some(&p.sysroot));
    let u = &r["cpu"]["stack_unwinding"];
    let samples = r["cpu"]["samples"].as_u64().expect("samples");
    let joined = u["joined_stacks"].as_u64().expect("joined_stacks");
    // Three levels in four are deeper than the copy.
    assert!(
        joined * 100 >= samples * 50,
        "{joined} joined of {samples}: {u:#}"
    );
    // A chain joins only when a remembered chain of the thread holds its two outermost
    // frames; the rule guarantees no more. On a fresh machine under load 1 of 1,796 samples
    // found none (not yet understood), so this asks for at most 1% left cut, as the exact
    // chains below ask for 99%.
    let cut = u["truncated_by"]["stack_copy_ended"].as_u64().expect("cut");
    assert!(cut * 100 <= samples, "{cut} of {samples} cut: {u:#}");
    assert!(
        r["diagnostics"]
            .as_array()
            .expect("diagnostics")
            .iter()
            .any(|d| d["kind"] == "unwind-joined" && d["count"] == joined),
        "{:#}",
        r["diagnostics"]
    );
    let (user, exact, mean) = chains(&folded_stacks(&recording, &p.sysroot));
    assert!(user >= 500, "{user} samples in spin");
    assert!(exact * 100 >= user * 99, "{exact} of {user} exact chains");
    let expected = (DEPTH + 1.0) / 2.0;
    assert!(
        (mean - expected).abs() <= expected * 0.1,
        "mean depth {mean:.1}, expected {expected}"
    );

    // perf with rec's copy size on the same program.
    let mode = crossprof_format::Reader::new(&std::fs::read(&recording).expect("read"))
        .expect("a recording")
        .header()
        .call_graph
        .clone();
    let data = scratch().join("deep-descent.perf.data");
    run_ok(
        Command::new("perf")
            .args(["record", "-q", "--no-buildid", "-F", "999", "--call-graph"])
            .arg(mode.replacen('=', ",", 1))
            .arg("-o")
            .arg(&data)
            .arg("--")
            .arg(&p.board)
            .arg(CPU_SECONDS),
    );
    let perf = perf::script(&data, &p.sysroot);
    let in_spin: Vec<_> = perf
        .iter()
        .filter(|s| s.frames.iter().any(|f| f.name == "spin"))
        .collect();
    let perf_main = in_spin
        .iter()
        .filter(|s| s.frames.iter().any(|f| f.name == "main"))
        .count() as u64;
    let perf_user = in_spin.len() as u64;
    eprintln!(
        "deep_descent: crossprof {exact} of {user} samples exact to main ({joined} joined), mean depth {mean:.1}; perf --call-graph {mode}: {perf_main} of {perf_user} reach main"
    );
    assert!(perf_user > 0, "perf took no sample in spin");
    assert!(exact * perf_user >= perf_main * user, "fewer than perf");
}
