//! Issue 15, acceptance 1: every export read back by its real consumer. The ground-truth CPU
//! program (hot_a does 3x hot_b's work) must show its 75:25 split in `go tool pprof`, in
//! speedscope's own build running in headless Chromium, in inferno's collapse of the
//! `perf script` text and in the Firefox Profiler's processed format; the heap ground truth's
//! totals must come out of `go tool pprof` exactly.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crossprof_tests::consumers::*;
use crossprof_tests::*;
use serde_json::Value;

struct Fixture {
    program: Program,
    recording: PathBuf,
    report: Value,
}

fn cpu() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let program = build("cpu_split.c", "exports", C_FP);
        add_system_libs(&program.sysroot, &program.board);
        let recording = scratch().join("exports.zst");
        // About 2000 samples: 75:25 to 5 points is then four standard deviations.
        record(&recording, &[], &[program.board.to_str().unwrap(), "2000"]);
        let report = report_json(&recording, Some(&program.sysroot));
        Fixture {
            program,
            recording,
            report,
        }
    })
}

/// heap_truth.c with N = 20,000: churn() makes 20,000 temporary allocations of 16..79 bytes,
/// leak_some() 20,000 calloc(1, 100) never freed, grow() 1,000 reallocs of 64..64,000 bytes.
const HEAP_N: u64 = 20_000;

fn heap() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let program = build("heap_truth.c", "exports_heap", &["-O2"]);
        add_system_libs(&program.sysroot, &program.board);
        let recording = scratch().join("exports_heap.zst");
        record(
            &recording,
            &["--heap"],
            &[program.board.to_str().unwrap(), &HEAP_N.to_string()],
        );
        let report = heap_report_json(&recording, &program.sysroot);
        Fixture {
            program,
            recording,
            report,
        }
    })
}

fn export(f: &Fixture, format: &str, heap: bool, ext: &str) -> PathBuf {
    let tag = f.recording.file_stem().unwrap().to_str().unwrap();
    let out = scratch().join(format!("{tag}.{ext}"));
    let mut args = vec![
        "export",
        "--format",
        format,
        "--sysroot",
        f.program.sysroot.to_str().unwrap(),
        f.recording.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    if heap {
        args.push("--heap");
    }
    hostside_ok(&args);
    out
}

fn self_samples(report: &Value, name: &str) -> u64 {
    report["cpu"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["function"] == name)
        .and_then(|f| f["self"].as_u64())
        .unwrap_or_else(|| panic!("{name} not in the report"))
}

fn assert_75_25(what: &str, a: f64, b: f64) {
    let s = 100.0 * a / (a + b);
    assert!(
        (70.0..=80.0).contains(&s),
        "{what}: hot_a's share is {s:.1}% ({a} vs {b})"
    );
}

#[test]
fn pprof_cpu_profile_read_by_go_tool_pprof() {
    let f = cpu();
    let pb = export(f, "pprof", false, "pb.gz");
    let top = go_pprof_top(&pb, "samples");
    let flat = |name: &str| {
        top.iter()
            .find(|r| r.2 == name)
            .unwrap_or_else(|| panic!("{name} missing from pprof -top: {top:?}"))
            .0
    };
    let (a, b) = (flat("hot_a"), flat("hot_b"));
    // pprof counts exactly the samples the report counts.
    assert_eq!(a as u64, self_samples(&f.report, "hot_a"));
    assert_eq!(b as u64, self_samples(&f.report, "hot_b"));
    assert_75_25("go tool pprof -top", a, b);

    // CPU time, the second value: the periods (1,001,001 ns at 999 Hz) add up per sample.
    let (types, samples) = go_pprof_raw(&pb);
    assert_eq!(types, ["samples/count", "cpu/nanoseconds"]);
    let total: i64 = samples.iter().map(|v| v[0]).sum();
    assert_eq!(total as u64, f.report["cpu"]["samples"].as_u64().unwrap());
    assert!(
        samples.iter().all(|v| v[1] >= v[0] * 1_000_000),
        "{samples:?}"
    );

    // The program's mapping carries its path and build-id, for Pyroscope/Parca to re-symbolize.
    let raw = go_pprof(&["-raw"], &pb);
    let module = f.report["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["path"].as_str() == f.program.board.to_str())
        .unwrap();
    let mappings = raw.split("Mappings").nth(1).expect("a Mappings section");
    let line = mappings
        .lines()
        .find(|l| l.contains(f.program.board.to_str().unwrap()))
        .unwrap_or_else(|| panic!("no mapping of the program:\n{mappings}"));
    assert!(
        line.contains(module["build_id"].as_str().unwrap()),
        "{line}"
    );
    // The program's mapping is mapping 1, the main binary, as pprof expects.
    assert!(line.trim_start().starts_with("1: "), "{mappings}");
}

#[test]
fn pprof_heap_profile_totals_read_by_go_tool_pprof() {
    let f = heap();
    let pb = export(f, "pprof", true, "pb.gz");
    let (types, samples) = go_pprof_raw(&pb);
    assert_eq!(
        types,
        [
            "alloc_objects/count",
            "alloc_space/bytes",
            "inuse_objects/count",
            "inuse_space/bytes",
            "temp_objects/count",
            "peak_space/bytes"
        ]
    );
    let sum = |i: usize| -> u64 { samples.iter().map(|v| v[i] as u64).sum() };
    // Ground truth: churn's sizes 16 + i % 64 for i < N, 20,000 x 100 bytes leaked, grow's
    // reallocs of 64, 128, ..., 64,000 bytes.
    let churn_bytes: u64 = (0..HEAP_N).map(|i| 16 + i % 64).sum();
    let grow_bytes: u64 = (1..=1000).map(|k| 64 * k).sum();
    assert_eq!(sum(0), HEAP_N + 20_000 + 1_000, "alloc_objects");
    assert_eq!(sum(1), churn_bytes + 2_000_000 + grow_bytes, "alloc_space");
    assert_eq!(sum(2), 20_000, "inuse_objects");
    assert_eq!(sum(3), 2_000_000, "inuse_space");
    // And the same numbers as `hostside report --heap`.
    let h = &f.report["heap"];
    assert_eq!(sum(0), h["allocations"].as_u64().unwrap());
    assert_eq!(sum(2), h["leaked_allocations"].as_u64().unwrap());
    assert_eq!(sum(3), h["leaked_bytes"].as_u64().unwrap());
    assert_eq!(sum(4), h["temporary"].as_u64().unwrap());
    assert_eq!(sum(5), h["peak_bytes"].as_u64().unwrap());
    // pprof's own view: all live bytes at leak_some.
    let top = go_pprof_top(&pb, "inuse_objects");
    let leak = top.iter().find(|r| r.2 == "leak_some").expect("leak_some");
    assert_eq!(leak.0 as u64, 20_000, "{top:?}");

    // Each site's location keeps its address in the program's mapping (path, build-id): what
    // Pyroscope or Parca need to re-symbolize. Turned into a file address with the mapping's
    // start and offset, addr2line on the unstripped binary names the same function.
    let raw = go_pprof(&["-raw"], &pb);
    let mappings = raw.split("Mappings").nth(1).expect("a Mappings section");
    let m1 = mappings
        .lines()
        .find(|l| l.trim_start().starts_with("1: "))
        .unwrap_or_else(|| panic!("no mapping 1:\n{mappings}"));
    let board = f.program.board.to_str().unwrap();
    assert!(m1.contains(board), "mapping 1 is not the program: {m1}");
    let range: Vec<u64> = m1
        .split_whitespace()
        .nth(1)
        .unwrap()
        .split('/')
        .map(|x| u64::from_str_radix(x.trim_start_matches("0x"), 16).unwrap())
        .collect();
    let locations = raw
        .split("Locations")
        .nth(1)
        .unwrap()
        .split("Mappings")
        .next()
        .unwrap();
    for site in ["churn", "leak_some", "grow"] {
        let line = locations
            .lines()
            .find(|l| l.contains(&format!(" {site} ")))
            .unwrap_or_else(|| panic!("no location of {site}:\n{locations}"));
        let w: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(w[2], "M=1", "{line}");
        let addr = u64::from_str_radix(w[1].trim_start_matches("0x"), 16).unwrap();
        assert!(range[0] <= addr && addr < range[1], "{line} outside {m1}");
        let file_addr = addr - range[0] + range[2];
        let o = std::process::Command::new("addr2line")
            .args(["-f", "-e"])
            .arg(&f.program.unstripped)
            .arg(format!("{file_addr:#x}"))
            .output()
            .unwrap();
        let named = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            named.lines().next(),
            Some(site),
            "{line}: addr2line says {named}"
        );
    }
}

#[test]
fn speedscope_files_validate_and_load_in_speedscope() {
    let f = cpu();
    let file = export(f, "speedscope", false, "speedscope.json");
    let r = speedscope_check(&file);
    assert_eq!(r["valid"], true, "schema errors: {:#}", r["schemaErrors"]);
    assert_eq!(r["pageErrors"].as_array().unwrap().len(), 0, "{r:#}");
    assert!(
        r["title"].as_str().unwrap().starts_with("CPU: "),
        "{}",
        r["title"]
    );
    let rows = r["rows"].as_array().unwrap();
    let self_ns = |name: &str| {
        let row = rows
            .iter()
            .find(|row| row["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in speedscope's sandwich view: {r:#}"));
        speedscope_ns(row["self"].as_str().unwrap())
    };
    assert_75_25("speedscope sandwich", self_ns("hot_a"), self_ns("hot_b"));

    let heap_file = export(heap(), "speedscope", true, "speedscope.json");
    let r = speedscope_check(&heap_file);
    assert_eq!(r["valid"], true, "schema errors: {:#}", r["schemaErrors"]);
    assert!(r["title"].as_str().unwrap().starts_with("heap: "), "{r:#}");

    // The validator rejects what speedscope's schema forbids: the check can fail.
    let mut bad: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    bad["profiles"][0]["unit"] = "parsecs".into();
    let bad_file = scratch().join("bad.speedscope.json");
    std::fs::write(&bad_file, serde_json::to_vec(&bad).unwrap()).unwrap();
    assert_eq!(speedscope_check(&bad_file)["valid"], false);
}

#[test]
fn perf_script_round_trips_through_inferno_to_the_collapsed_export() {
    use inferno::collapse::perf::{Folder, Options};
    use inferno::collapse::Collapse;
    let f = cpu();
    let script = export(f, "perf-script", false, "perf-script.txt");
    let collapsed = export(f, "collapsed", false, "folded");
    let mut folded = Vec::new();
    Folder::from(Options::default())
        .collapse(
            std::io::BufReader::new(std::fs::File::open(&script).unwrap()),
            &mut folded,
        )
        .expect("inferno reads the perf script text");
    let parse = |text: &str| -> HashMap<String, u64> {
        let mut m = HashMap::new();
        for l in text.lines() {
            let (stack, n) = l.rsplit_once(' ').unwrap();
            *m.entry(stack.to_string()).or_default() += n.parse::<u64>().unwrap();
        }
        m
    };
    // perf prints a frame no symbol covers as `[unknown] (module)`, which the collapsers turn
    // into `[module]`; hostside names it `module+0xOFFSET`, like perf report. That is the one
    // difference the round trip may show.
    let perf_name = |frame: &str| -> String {
        match frame.rsplit_once("+0x") {
            Some((module, off)) if u64::from_str_radix(off, 16).is_ok() => format!("[{module}]"),
            _ => frame.to_string(),
        }
    };
    let mut ours: HashMap<String, u64> = HashMap::new();
    for (stack, n) in parse(&std::fs::read_to_string(&collapsed).unwrap()) {
        let stack: Vec<String> = stack.split(';').map(perf_name).collect();
        *ours.entry(stack.join(";")).or_default() += n;
    }
    let theirs = parse(&String::from_utf8(folded).unwrap());
    // inferno weighs each sample by its period, which is the same for every sample here
    // (cpu-clock at a fixed frequency): its counts are ours times that period.
    let script_text = std::fs::read_to_string(&script).unwrap();
    let periods: std::collections::HashSet<u64> = script_text
        .lines()
        .filter(|l| l.ends_with("cpu-clock: "))
        .map(|l| l.split_whitespace().rev().nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(periods.len(), 1, "{periods:?}");
    let period = *periods.iter().next().unwrap();
    let ours: HashMap<String, u64> = ours.into_iter().map(|(k, v)| (k, v * period)).collect();
    assert_eq!(theirs, ours);
    let leaf = |m: &HashMap<String, u64>, name: &str| -> u64 {
        m.iter()
            .filter(|(k, _)| k.ends_with(&format!(";main;{name}")))
            .map(|(_, v)| v)
            .sum()
    };
    assert_75_25(
        "inferno's collapse",
        leaf(&theirs, "hot_a") as f64,
        leaf(&theirs, "hot_b") as f64,
    );
}

/// Self weight per function name in a processed Firefox profile, read the way the profiler
/// reads it: sample → stackTable.frame → frameTable.func → funcTable.name → stringArray.
fn firefox_self(thread: &Value, table: &str) -> HashMap<String, i64> {
    let strings = thread["stringArray"].as_array().unwrap();
    let t = &thread[table];
    let n = t["length"].as_u64().unwrap() as usize;
    let mut out = HashMap::new();
    for i in 0..n {
        let Some(stack) = t["stack"][i].as_u64() else {
            continue;
        };
        let weight = match table {
            "nativeAllocations" => t["weight"][i].as_i64().unwrap(),
            _ => t["weight"]
                .as_array()
                .and_then(|w| w[i].as_i64())
                .unwrap_or(1),
        };
        let frame = thread["stackTable"]["frame"][stack as usize]
            .as_u64()
            .unwrap();
        let func = thread["frameTable"]["func"][frame as usize]
            .as_u64()
            .unwrap();
        let name_idx = thread["funcTable"]["name"][func as usize].as_u64().unwrap();
        let name = strings[name_idx as usize].as_str().unwrap().to_string();
        *out.entry(name).or_default() += weight;
    }
    out
}

#[test]
fn firefox_profile_in_the_processed_format() {
    let f = cpu();
    let file = export(f, "firefox", false, "firefox.json");
    let p: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    // The processed format as fxprof-processed-profile 0.8.1 writes it.
    assert_eq!(p["meta"]["version"], 24);
    assert_eq!(p["meta"]["preprocessedProfileVersion"], 55);
    assert_eq!(p["meta"]["symbolicated"], true);
    let threads = p["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 1, "one thread sampled");
    let t = &threads[0];
    assert_eq!(t["name"], "exports");
    assert_eq!(t["isMainThread"], true);
    let selfs = firefox_self(t, "samples");
    assert_eq!(selfs["hot_a"] as u64, self_samples(&f.report, "hot_a"));
    assert_eq!(selfs["hot_b"] as u64, self_samples(&f.report, "hot_b"));
    assert_75_25(
        "Firefox profile",
        selfs["hot_a"] as f64,
        selfs["hot_b"] as f64,
    );
    assert_eq!(
        t["samples"]["length"].as_u64(),
        f.report["cpu"]["samples"].as_u64()
    );

    // The heap recording's allocation track: bytes allocated per stack, and retained (never
    // freed) bytes at leak_some.
    let h = heap();
    let file = export(h, "firefox", true, "firefox.json");
    let p: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let t = p["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["nativeAllocations"]["length"].as_u64().unwrap_or(0) > 0)
        .expect("a thread with allocations");
    let allocs = firefox_self(t, "nativeAllocations");
    let churn_bytes: i64 = (0..HEAP_N as i64).map(|i| 16 + i % 64).sum();
    // Each allocation is added with its free: the net bytes per stack are what stayed live.
    assert_eq!(allocs["churn"], 0, "{allocs:?}");
    assert_eq!(allocs["leak_some"], 2_000_000, "{allocs:?}");
    assert_eq!(allocs["grow"], 0, "{allocs:?}");
    let positive: i64 = t["nativeAllocations"]["weight"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_i64())
        .filter(|&w| w > 0)
        .sum();
    let grow_bytes: i64 = (1..=1000).map(|k| 64 * k).sum();
    assert_eq!(positive, churn_bytes + 2_000_000 + grow_bytes);
    assert!(
        p["counters"].as_array().is_some_and(|c| !c.is_empty()),
        "no memory counter"
    );
}

#[test]
fn perf_script_refuses_a_heap_export_with_a_reason() {
    let h = heap();
    let out = scratch().join("heap.perf-script");
    let o = std::process::Command::new(hostside())
        .args(["export", "--heap", "--format", "perf-script", "-o"])
        .arg(&out)
        .arg(&h.recording)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--format pprof"), "{err}");
    let _ = Path::new(&out);
}

#[test]
fn off_cpu_waits_read_by_go_tool_pprof_and_speedscope() {
    // The contender waits about 3x longer for the lock than it sleeps between turns.
    let m = fixtures::recorded_mutex_split("exports_offcpu");
    let truth = m.measured_share("take_lock", "wait_turn");
    let (program, recording) = (m.program, m.recording);
    let report = off_cpu_report(&recording, &program.sysroot, &[]);
    let f = Fixture {
        program,
        recording,
        report,
    };
    let export_off = |format: &str, ext: &str| {
        let out = scratch().join(format!("exports_offcpu.{ext}"));
        hostside_ok(&[
            "export",
            "--off-cpu",
            "--format",
            format,
            "--sysroot",
            f.program.sysroot.to_str().unwrap(),
            f.recording.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        out
    };
    let pb = export_off("pprof", "pb.gz");
    let text = go_pprof(
        &[
            "-top",
            "-nodecount=1000",
            "-unit=ns",
            "-sample_index=off_cpu",
        ],
        &pb,
    );
    let cum = |name: &str| -> u64 {
        let row = text
            .lines()
            .find(|l| l.split_whitespace().nth(5) == Some(name))
            .unwrap_or_else(|| panic!("{name} missing from pprof -top:\n{text}"));
        let c = row.split_whitespace().nth(3).unwrap();
        c.trim_end_matches("ns").parse().unwrap()
    };
    let total_ns = |name: &str| -> u64 {
        f.report["off_cpu"]["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["function"] == name)
            .and_then(|r| r["total_ns"].as_u64())
            .unwrap_or_else(|| panic!("{name} not in the off-CPU report"))
    };
    for name in ["take_lock", "wait_turn"] {
        assert_eq!(cum(name), total_ns(name), "{name}:\n{text}");
    }
    // The split the program measured (within 2 points: a wait is all of its function's time
    // but a few microseconds on a CPU).
    let s = share(cum("take_lock"), cum("wait_turn"));
    assert!(
        (s - truth).abs() <= 2.0,
        "go tool pprof off_cpu: take_lock's share is {s:.1}%, the program measured {truth:.1}%"
    );
    // The program is mapping 1, pprof's main binary, though libc holds most waits.
    assert!(text.starts_with("File: exports_offcpu"), "{text}");

    let ss = export_off("speedscope", "speedscope.json");
    let r = speedscope_check(&ss);
    assert_eq!(r["valid"], true, "schema errors: {:#}", r["schemaErrors"]);
    assert!(
        r["title"].as_str().unwrap().starts_with("off-CPU: "),
        "{r:#}"
    );
}
