//! Issue 24: code no unwind table covers. `asm_nocfi.c`'s two assembly functions have no CFI,
//! as libjpeg-turbo's SIMD routines and most hand-written assembly have none: stacks through
//! them complete by the return-address rule (the sampled leaf) and the frame-pointer rule,
//! each step counted, with the exact call chains the program makes and its exact 50/50 split.
//! perf, on the same binary in the same test, is the reference: its `--call-graph dwarf`
//! stops at the first frame without CFI.

use std::process::Command;

use crossprof_tests::*;

#[test]
fn assembly_without_cfi_unwinds_by_return_address_and_frame_pointer() {
    let p = build("asm_nocfi.c", "asm-nocfi", &["-O2"]);
    add_system_libs(&p.sysroot, &p.board);
    add_host_debug_files(&p.sysroot);
    let recording = scratch().join("asm-nocfi.zst");
    record(
        &recording,
        &["--call-graph", "dwarf"],
        &[p.board.to_str().unwrap(), "60"],
    );
    let r = report_json(&recording, Some(&p.sysroot));
    let samples = r["cpu"]["samples"].as_u64().unwrap();
    assert!(samples >= 200, "{samples} samples");
    let u = &r["cpu"]["stack_unwinding"];
    // Every sample's leaf is in spin_leaf (or spin_framed) and its stack reaches the C
    // library's start code, as with tables; kernel-only samples aside.
    let complete = u["complete"].as_u64().unwrap();
    assert!(
        complete * 100 >= samples * 99,
        "{complete} of {samples} complete: {u:#}"
    );
    assert_eq!(u["truncated_by"]["no_unwind_info"], 0, "{u:#}");
    // One fallback step per sample (the leaf), one more through spin_framed's frame pointer.
    let untabled = u["untabled_frames"].as_u64().unwrap();
    assert!(
        untabled >= samples && untabled <= samples * 2,
        "{untabled} steps for {samples} samples: {u:#}"
    );
    let diags = &r["diagnostics"];
    assert!(
        diags
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["kind"] == "unwind-without-tables" && d["count"] == untabled),
        "{diags:#}"
    );

    // The exact chains, and the split the program's equal loops make.
    let (known, user) =
        untabled::assert_asm_nocfi_ground_truth(&folded_stacks(&recording, &p.sysroot));

    // perf on the same binary: its DWARF unwinding stops in the assembly (the reference this
    // fallback goes beyond), so it never reaches run_leaf or run_framed from a sample there.
    let data = scratch().join("asm-nocfi.perf.data");
    let o = Command::new("perf")
        .args(["record", "-q", "--call-graph", "dwarf", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&p.unstripped)
        .arg("20")
        .output()
        .expect("run perf");
    if !o.status.success() {
        eprintln!(
            "perf record unavailable here: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        return;
    }
    let script = Command::new("perf")
        .args(["script", "-F", "ip,sym", "-i"])
        .arg(&data)
        .output()
        .expect("perf script");
    let text = String::from_utf8_lossy(&script.stdout);
    let perf_samples = text.split("\n\n").filter(|s| s.contains("spin_")).count();
    let perf_complete = text
        .split("\n\n")
        .filter(|s| s.contains("spin_") && s.contains("main"))
        .count();
    eprintln!(
        "perf --call-graph dwarf: {perf_complete} of {perf_samples} samples in the assembly reach main; crossprof: {} of {user}",
        known
    );
    assert!(perf_samples > 0, "perf script: {text}");
    assert!(
        known * perf_samples as u64 >= perf_complete as u64 * user,
        "crossprof completes fewer than perf"
    );
}
