//! Issue 16, jitdump: a program that generates code at run time and logs it in a jitdump
//! (`tests/programs/jit_dump.c`, found through its marker mapping as perf finds it) is
//! recorded; `rec` carries the dump into the recording when the process exits; with the dump
//! deleted from this machine, hostside names the generated functions with exactly as many
//! samples as the raw recording has in each function's range *while it was live* (a region
//! reused by a second function, a function moved), with the source lines the dump gives.

use crossprof_format::{Arch, PerfRegs, Reader, Record, Sample};
use crossprof_tests::*;

/// One function the program logged: where and from when it lived.
struct Load {
    name: String,
    start: u64,
    end: u64,
    time: u64,
}

/// The program's log (`load|move NAME ADDR SIZE TIME` lines).
fn loads(stdout: &[u8]) -> Vec<Load> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| {
            let p: Vec<&str> = l.split_whitespace().collect();
            if p.len() != 5 || !(p[0] == "load" || p[0] == "move") {
                return None;
            }
            let start = u64::from_str_radix(p[2], 16).unwrap();
            Some(Load {
                name: p[1].to_string(),
                start,
                end: start + u64::from_str_radix(p[3], 16).unwrap(),
                time: p[4].parse().unwrap(),
            })
        })
        .collect()
}

/// The function live at `addr` at `time`: the latest load covering it at or before `time`.
fn live_at(loads: &[Load], addr: u64, time: u64) -> Option<&Load> {
    loads
        .iter()
        .filter(|l| l.start <= addr && addr < l.end && l.time <= time)
        .max_by_key(|l| l.time)
}

/// Builds and runs `jit_dump.c` under `rec` with `extra` options; returns the recording, the
/// program's log and the raw samples. The dump is deleted before anything reads the recording.
fn build_and_record(name: &str, extra: &[&str]) -> (std::path::PathBuf, Vec<Load>, Vec<Sample>) {
    let dir = scratch().join(name);
    let run = fixtures::built_in_place_and_recorded(
        "jit_dump",
        name,
        extra,
        &["300", dir.to_str().unwrap()],
    );
    let (recording, out) = (run.recording, run.output);
    // The dump must leave this machine before the report.
    let mut dumps = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if crossprof_format::is_jitdump(p.to_str().unwrap()) {
            std::fs::remove_file(&p).unwrap();
            dumps += 1;
        }
    }
    assert_eq!(dumps, 1, "the program wrote one jitdump");
    let bytes = std::fs::read(&recording).unwrap();
    let mut reader = Reader::new(&bytes).unwrap();
    let mut samples = Vec::new();
    let mut carried = 0;
    while let Some(r) = reader.next_record() {
        match r {
            Record::Sample(s) => samples.push(s),
            Record::JitMap(j) => {
                assert_eq!((j.kind.as_str(), j.truncated), ("jitdump", false));
                assert_eq!(j.offset + j.data.len() as u64, j.file_size);
                assert!(j.data.starts_with(b"DTiJ"));
                carried += 1;
            }
            _ => {}
        }
    }
    assert_eq!(carried, 1, "one jitdump carried, in one piece");
    (recording, loads(&out.stdout), samples)
}

#[test]
fn generated_functions_are_named_from_the_carried_jitdump_as_they_were_at_each_sample() {
    let (recording, loads, samples) = build_and_record("jitdump-fp", &["--call-graph", "fp"]);
    let names = [
        "jit_hot",
        "jit_cold",
        "jit_phase_a",
        "jit_phase_b",
        "jit_moved",
        "jit_outer",
    ];
    assert_eq!(loads.len(), 7, "six loads and a move");
    // Ground truth from the raw records: per function, samples whose leaf (no kernel frames)
    // lies in it while it was live, and samples with it anywhere on the user stack (return
    // addresses looked up at address-1, as hostside does); for jit_hot, per source line.
    let mut truth = vec![(0u64, 0u64); names.len()];
    let mut hot_lines = [0u64; 3];
    let index = |l: &Load| names.iter().position(|n| *n == l.name).unwrap();
    for s in &samples {
        let mut seen = vec![false; names.len()];
        for (i, &a) in s.user_chain.iter().enumerate() {
            let la = if i == 0 { a } else { a - 1 };
            if let Some(l) = live_at(&loads, la, s.time) {
                let k = index(l);
                if i == 0 && s.kernel_chain.is_empty() {
                    truth[k].0 += 1;
                    if l.name == "jit_hot" {
                        // Lines 10, 11, 12 start at offsets 0, 9, 14 (jit_dump.c).
                        let off = la - l.start;
                        hot_lines[usize::from(off >= 9) + usize::from(off >= 14)] += 1;
                    }
                }
                seen[k] = true;
            }
        }
        for (k, s) in seen.iter().enumerate() {
            truth[k].1 += u64::from(*s);
        }
    }
    let report = report_json(&recording, None);
    for (k, name) in names.iter().enumerate() {
        if truth[k].1 == 0 {
            // jit_outer only calls: a frame-pointer walk from native_spin skips it.
            assert!(function(&report, name).is_none(), "{name}: {report:#}");
            continue;
        }
        let f = function(&report, name).unwrap_or_else(|| panic!("{name} not named: {report:#}"));
        assert_eq!(f["module"], "[jit]");
        assert_eq!(f["self"].as_u64(), Some(truth[k].0), "{name} self");
        assert_eq!(f["total"].as_u64(), Some(truth[k].1), "{name} total");
    }
    // Nothing vacuous: every phase was sampled, and the reused region's two functions each
    // got their own share. jit_cold's own samples vary from run to run (14 to 129 seen; the
    // exact counts above are what is checked), so "sampled" is at least 5.
    for (k, name) in names.iter().enumerate().take(5) {
        assert!(truth[k].0 >= 5, "{name}: only {} samples", truth[k].0);
    }
    // jit_hot's representative location is its most sampled line, from the dump's lines.
    let hot = function(&report, "jit_hot").unwrap();
    let line = 10
        + hot_lines
            .iter()
            .enumerate()
            .max_by_key(|(_, &c)| c)
            .unwrap()
            .0 as u64;
    assert_eq!(hot["file"], "/jit/hot.src", "{hot:#}");
    assert_eq!(hot["line"].as_u64(), Some(line), "{hot:#} {hot_lines:?}");
}

/// Unwinding through JIT frames: with stack copies (`--call-graph dwarf`, the default), a
/// frame in generated code has no unwind tables; hostside falls back to the frame-pointer
/// rule there and carries on into native frames, so the native caller of JIT code (main) and
/// the native callee it calls back (native_spin) both appear on the stacks.
#[test]
fn stacks_unwind_through_jit_frames_into_native_callers() {
    let (recording, loads, samples) = build_and_record("jitdump-dwarf", &[]);
    // Ground truth: samples whose sampled instruction lies in jit_hot and in native_spin
    // (the registers' instruction pointer; no kernel frames).
    let hot = loads.iter().find(|l| l.name == "jit_hot").unwrap();
    let pcs: Vec<u64> = samples
        .iter()
        .filter(|s| s.kernel_chain.is_empty())
        .filter_map(|s| {
            let pc = PerfRegs::of(Arch::X86_64).pc;
            PerfRegs::get(s.regs_mask, &s.regs, pc)
        })
        .collect();
    let in_hot = pcs
        .iter()
        .filter(|&&pc| hot.start <= pc && pc < hot.end)
        .count() as u64;
    assert!(in_hot >= 100, "only {in_hot} samples in jit_hot");
    let folded = dir_of(&recording).join("stacks.folded");
    hostside_ok(&[
        "export",
        recording.to_str().unwrap(),
        "--format",
        "collapsed",
        "-o",
        folded.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&folded).unwrap();
    let count = |suffix: &str| -> u64 {
        text.lines()
            .filter_map(|l| l.rsplit_once(' '))
            .filter(|(stack, _)| stack.ends_with(suffix))
            .map(|(_, n)| n.parse::<u64>().unwrap())
            .sum()
    };
    // main → JIT: every jit_hot sample reaches main and the program's entry.
    let hot_leaf = count(";jit_hot");
    let hot_full = count(";_start;__libc_start_main_impl;__libc_start_call_main;main;jit_hot");
    assert!(
        hot_leaf >= in_hot * 9 / 10,
        "{hot_leaf} of {in_hot}:\n{text}"
    );
    assert!(
        hot_full * 100 >= hot_leaf * 95,
        "{hot_full} of {hot_leaf}:\n{text}"
    );
    // main → JIT → native: native_spin's caller is the generated jit_outer, and its caller
    // main.
    let spin_leaf = count(";native_spin");
    let spin_full = count(";main;jit_outer;native_spin");
    assert!(
        spin_leaf >= 20,
        "only {spin_leaf} samples in native_spin:\n{text}"
    );
    assert!(
        spin_full * 100 >= spin_leaf * 95,
        "{spin_full} of {spin_leaf}:\n{text}"
    );
    // The fallback is counted.
    let report = report_json(&recording, None);
    let u = &report["cpu"]["stack_unwinding"];
    assert!(
        u["jit_frame_pointer_frames"].as_u64().unwrap() >= hot_leaf + spin_leaf,
        "{u:#}"
    );
}

fn dir_of(p: &std::path::Path) -> std::path::PathBuf {
    p.parent().unwrap().to_path_buf()
}
