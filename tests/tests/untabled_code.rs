//! Issue 24: code no unwind table covers. `asm_nocfi.c`'s two assembly functions have no CFI,
//! as libjpeg-turbo's SIMD routines and most hand-written assembly have none: stacks through
//! them complete by the return-address rule (the sampled leaf) and the frame-pointer rule,
//! each step counted, with the exact call chains the program makes and its exact 50/50 split.
//! `asm_scan.c`'s assembly keeps neither (registers pushed, `%rbp` holding data, and reached
//! through a tail jump as well): its stacks complete by stack scanning, counted apart.
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

/// `asm_scan.c` (x86_64): only stack scanning finds the caller of `spin_pushed`; every sample
/// there has one of its two exact chains (the tail-jumping `spin_tail` leaves no frame), the
/// two share the CPU 50/50, and each scanned frame is counted.
#[test]
fn assembly_without_frame_pointer_unwinds_by_stack_scanning() {
    let p = build("asm_scan.c", "asm-scan", &["-O2"]);
    add_system_libs(&p.sysroot, &p.board);
    add_host_debug_files(&p.sysroot);
    let recording = scratch().join("asm-scan.zst");
    record(&recording, &[], &[p.board.to_str().unwrap(), "60"]);
    let r = report_json(&recording, Some(&p.sysroot));
    let u = &r["cpu"]["stack_unwinding"];
    let scanned = u["scanned_frames"].as_u64().unwrap();
    let mut chains: std::collections::HashMap<String, u64> = Default::default();
    for (frames, n) in folded_stacks(&recording, &p.sysroot) {
        if let Some(leaf) = frames.iter().position(|f| f == "spin_pushed") {
            let own: Vec<&str> = frames[..=leaf]
                .iter()
                .map(String::as_str)
                .skip_while(|f| *f != "main")
                .collect();
            *chains.entry(own.join(";")).or_default() += n;
        }
    }
    let user: u64 = chains.values().sum();
    let direct = chains
        .get("main;run_direct;spin_pushed")
        .copied()
        .unwrap_or(0);
    let tail = chains
        .get("main;run_tail;spin_pushed")
        .copied()
        .unwrap_or(0);
    assert!(user >= 200, "{user} samples in spin_pushed: {chains:#?}");
    assert!(
        (direct + tail) * 100 >= user * 98,
        "{direct} + {tail} of {user} on the known chains: {chains:#?}"
    );
    let share = share(direct, tail);
    assert!(
        (42.0..=58.0).contains(&share),
        "run_direct's share {share:.1}%: {chains:#?}"
    );
    assert!(scanned >= direct + tail, "{scanned} scanned frames: {u:#}");
    assert!(
        r["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["kind"] == "unwind-stack-scanned" && d["count"] == scanned),
        "{:#}",
        r["diagnostics"]
    );
}
