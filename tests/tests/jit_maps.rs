//! Issue 16, acceptance 3 (the C part): a program that generates code at run time and names it
//! in `/tmp/perf-PID.map` is recorded; `rec` carries the map into the recording when the
//! process exits; with the map file deleted from this machine, hostside names the generated
//! functions, with exactly as many samples as the raw recording has in their address ranges.

use crossprof_format::{Reader, Record};
use crossprof_tests::*;

#[test]
fn generated_functions_are_named_from_the_carried_perf_map() {
    let (recording, out) = build_and_record("jit", &[]);
    // The program printed its map's path; the map must leave this machine before the report.
    let map_path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let map = std::fs::read_to_string(&map_path).expect("the program wrote its perf map");
    std::fs::remove_file(&map_path).unwrap();
    let ranges: Vec<(String, u64, u64)> = map
        .lines()
        .map(|l| {
            let p: Vec<&str> = l.split_whitespace().collect();
            let start = u64::from_str_radix(p[0], 16).unwrap();
            let size = u64::from_str_radix(p[1], 16).unwrap();
            (p[2].to_string(), start, start + size)
        })
        .collect();

    // Ground truth from the raw records: samples whose leaf (no kernel frames) lies in each
    // function, and samples with the function anywhere on the user stack (return addresses
    // looked up at address-1, as hostside does).
    let bytes = std::fs::read(&recording).unwrap();
    let mut reader = Reader::new(&bytes).unwrap();
    let mut carried = 0;
    let mut truth = vec![(0u64, 0u64); ranges.len()];
    while let Some(r) = reader.next_record() {
        match r {
            Record::JitMap(j) => {
                assert_eq!(String::from_utf8_lossy(&j.data), map);
                carried += 1;
            }
            Record::Sample(s) => {
                for (k, (_, lo, hi)) in ranges.iter().enumerate() {
                    let inside = |a: u64| *lo <= a && a < *hi;
                    if s.kernel_chain.is_empty() && s.user_chain.first().is_some_and(|&a| inside(a))
                    {
                        truth[k].0 += 1;
                    }
                    let any = s
                        .user_chain
                        .iter()
                        .enumerate()
                        .any(|(i, &a)| inside(if i == 0 { a } else { a - 1 }));
                    truth[k].1 += u64::from(any);
                }
            }
            _ => {}
        }
    }
    assert_eq!(carried, 1, "one perf map carried");
    let report = report_json(&recording, None);
    for (k, (name, _, _)) in ranges.iter().enumerate() {
        let f = function(&report, name).unwrap_or_else(|| panic!("{name} not named: {report:#}"));
        assert_eq!(f["module"], "[jit]");
        assert_eq!(f["self"].as_u64(), Some(truth[k].0), "{name} self");
        assert_eq!(f["total"].as_u64(), Some(truth[k].1), "{name} total");
    }
    // With the map, no frame in the generated code is missing a name: whatever
    // `jit-map-missing` still counts are stray frames from the walk, outside the map's ranges.
    let known: Vec<(u64, u64)> = ranges.iter().map(|&(_, lo, hi)| (lo, hi)).collect();
    let missing = jit_map_missing(&report);
    let stray = stray_frames(&recording, &known);
    assert!(
        missing <= stray,
        "{missing} unnamed frames, {stray} stray: {report:#}"
    );
    // jit_hot runs three times as long as jit_cold (±5 points: the rounds vary in length, so
    // the samples cannot lock onto them).
    let (hot, cold) = (truth[0].0, truth[1].0);
    assert!(hot + cold > 200, "too few samples: {hot} + {cold}");
    let pct = share(hot, cold);
    assert!((pct - 75.0).abs() <= 5.0, "jit_hot share {pct:.1}%");
}

#[test]
fn generated_code_without_a_map_is_a_diagnostic_with_its_frame_count() {
    let (recording, out) = build_and_record("jit-nomap", &["nomap"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let p: Vec<u64> = text
        .split_whitespace()
        .map(|x| u64::from_str_radix(x, 16).unwrap())
        .collect();
    let (lo, hi) = (p[0], p[0] + p[1]);
    // Ground truth: user frames (per sample) in the generated code, looked up as hostside
    // does (return addresses at address-1).
    let bytes = std::fs::read(&recording).unwrap();
    let mut reader = Reader::new(&bytes).unwrap();
    let mut frames = 0u64;
    while let Some(r) = reader.next_record() {
        match r {
            Record::Sample(s) => {
                frames += s
                    .user_chain
                    .iter()
                    .enumerate()
                    .filter(|&(i, &a)| {
                        let la = if i == 0 { a } else { a - 1 };
                        lo <= la && la < hi
                    })
                    .count() as u64;
            }
            Record::JitMap(_) => panic!("no map was written"),
            _ => {}
        }
    }
    assert!(
        frames > 100,
        "too few samples in the generated code: {frames}"
    );
    let report = report_json(&recording, None);
    // Every frame in the generated code is counted; a frame-pointer walk through it can add
    // stray frames from the stack, which are counted too.
    let missing = jit_map_missing(&report);
    let stray = stray_frames(&recording, &[(lo, hi)]);
    assert!(
        frames <= missing && missing <= frames + stray,
        "{missing} unnamed frames, {frames} in the generated code, {stray} stray: {report:#}"
    );
}

/// `jit_map.c` built in scratch directory `name` and recorded running 1200 rounds with
/// `extra` arguments, in frame-pointer mode; returns the recording and rec's output (the
/// program prints where its code or map went).
fn build_and_record(name: &str, extra: &[&str]) -> (std::path::PathBuf, std::process::Output) {
    // 1200 rounds, about 1.7 s of CPU: 75:25 to 5 points is then four standard deviations.
    // At 300 rounds the split once read 62:38, when the rounds were all of one length: 1.4 ms
    // here, near 4/3 of the 1 ms sampling period, where the samples fall on four points of
    // the round.
    let mut args = vec!["1200"];
    args.extend_from_slice(extra);
    let run =
        fixtures::built_in_place_and_recorded("jit_map", name, &["--call-graph", "fp"], &args);
    (run.recording, run.output)
}

/// User frames (per sample, looked up as hostside does: return addresses at address-1) that
/// lie outside every file the process mapped and outside `known`: what a frame-pointer walk
/// through generated code (which keeps no frame pointer) picks up from the stack. hostside
/// counts those as `jit-map-missing` too ("or a damaged stack"), so they bound the count.
fn stray_frames(recording: &std::path::Path, known: &[(u64, u64)]) -> u64 {
    let bytes = std::fs::read(recording).unwrap();
    let mut reader = Reader::new(&bytes).unwrap();
    let mut files: Vec<(u64, u64)> = Vec::new();
    let mut chains: Vec<Vec<u64>> = Vec::new();
    while let Some(r) = reader.next_record() {
        match r {
            Record::Mmap(m) if m.path.starts_with('/') => files.push((m.start, m.start + m.len)),
            Record::Sample(s) => chains.push(s.user_chain),
            _ => {}
        }
    }
    let inside = |a: u64, r: &[(u64, u64)]| r.iter().any(|&(lo, hi)| lo <= a && a < hi);
    chains
        .iter()
        .flat_map(|c| {
            c.iter()
                .enumerate()
                .map(|(i, &a)| if i == 0 { a } else { a.wrapping_sub(1) })
        })
        .filter(|&a| !inside(a, &files) && !inside(a, known))
        .count() as u64
}

/// The `jit-map-missing` diagnostic's count, 0 when the report has none.
fn jit_map_missing(report: &serde_json::Value) -> u64 {
    report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == "jit-map-missing")
        .and_then(|d| d["count"].as_u64())
        .unwrap_or(0)
}
