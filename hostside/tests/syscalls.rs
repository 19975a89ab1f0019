//! `report --syscalls`, its JSON section and its flame graph, end to end: a synthetic
//! recording of the raw_syscalls tracepoints, as `rec -e syscalls` writes it, read by the
//! hostside binary. The counts and times are known exactly.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crossprof_format::{Comm, End, EventSample, FrameWriter, Header, Mmap, Record, Sample};
use serde_json::Value;

const START: u64 = 1_000_000_000;
const PID: u32 = 100;
const ENTER: u32 = 1;
const EXIT: u32 = 2;
/// x86_64 numbers.
const GETPID: u64 = 39;
const WRITE: u64 = 1;
const NANOSLEEP: u64 = 35;
/// Kernel frames of the tracepoint: left out of the stacks the report shows.
const KERNEL: [u64; 2] = [0xffff_ffff_8100_1000, 0xffff_ffff_8100_2000];

fn header(events: &[&str]) -> Header {
    Header {
        format_version: crossprof_format::FORMAT_VERSION,
        arch: "x86_64".into(),
        pointer_size: 8,
        page_size: 4096,
        command: vec!["app".into()],
        clock: "monotonic".into(),
        start_clock_ns: START,
        sample_freq: 99,
        call_graph: "fp".into(),
        event: "cpu-clock".into(),
        events: events.iter().map(|e| e.to_string()).collect(),
        ..Default::default()
    }
}

fn event(event: u32, tid: u32, cpu: u32, time: u64, addr: u64, user: &[u64]) -> Record {
    Record::EventSample(EventSample {
        event,
        sample: Sample {
            time,
            pid: PID,
            tid,
            cpu,
            period: 1,
            kernel_chain: if user.is_empty() {
                vec![]
            } else {
                KERNEL.to_vec()
            },
            user_chain: user.to_vec(),
            addr,
            ..Default::default()
        },
    })
}

/// The process, its program's mapping and its two threads.
fn preamble() -> Vec<Record> {
    let comm = |tid| {
        Record::Comm(Comm {
            time: START,
            pid: PID,
            tid,
            comm: if tid == PID { "app" } else { "worker" }.into(),
            exec: false,
        })
    };
    vec![
        comm(PID),
        comm(PID + 1),
        Record::Mmap(Mmap {
            time: START,
            pid: PID,
            tid: PID,
            start: 0x40_0000,
            len: 0x1_0000,
            prot: 5,
            path: "/opt/app/bin/app".into(),
            ..Default::default()
        }),
    ]
}

/// 1000 getpid of 500 ns on the main thread; on the worker 500 write of 2 µs, 100 of them
/// failing with EBADF from a stack of their own, and 200 nanosleep of 1 ms. Entries are on
/// CPU 0, the worker's exits on CPU 1, whose ring reaches the file first: every exit of the
/// worker comes before its entry in the file.
fn recording() -> Vec<u8> {
    let mut w = FrameWriter::new(
        Vec::new(),
        &header(&[
            "cpu-clock",
            "raw_syscalls:sys_enter",
            "raw_syscalls:sys_exit",
        ]),
    )
    .unwrap();
    let (mut cpu0, mut cpu1) = (preamble(), Vec::new());
    let main = PID;
    let mut t = START + 1_000;
    for _ in 0..1000 {
        cpu0.push(event(ENTER, main, 0, t, GETPID, &[0x40_1000, 0x40_2000]));
        cpu0.push(event(EXIT, main, 0, t + 500, u64::from(PID), &[]));
        t += 1_000;
    }
    let worker = PID + 1;
    let mut t = START + 10_000;
    for i in 0..500 {
        let (user, ret) = if i % 5 == 0 {
            ([0x40_1200, 0x40_2200], (-9i64) as u64)
        } else {
            ([0x40_1100, 0x40_2100], 4096)
        };
        cpu0.push(event(ENTER, worker, 0, t, WRITE, &user));
        cpu1.push(event(EXIT, worker, 1, t + 2_000, ret, &[]));
        t += 10_000;
    }
    for _ in 0..200 {
        cpu0.push(event(
            ENTER,
            worker,
            0,
            t,
            NANOSLEEP,
            &[0x40_1300, 0x40_2300],
        ));
        cpu1.push(event(EXIT, worker, 1, t + 1_000_000, 0, &[]));
        t += 2_000_000;
    }
    for r in cpu1.iter().chain(&cpu0) {
        w.push(r).unwrap();
    }
    let end = End {
        time: t + 1_000,
        ..Default::default()
    };
    w.finish(end).unwrap()
}

/// A plain CPU recording: no system calls.
fn cpu_only() -> Vec<u8> {
    let mut w = FrameWriter::new(Vec::new(), &header(&["cpu-clock"])).unwrap();
    for r in preamble() {
        w.push(&r).unwrap();
    }
    w.push(&Record::Sample(Sample {
        time: START + 1_000,
        pid: PID,
        tid: PID,
        period: 10_000_000,
        user_chain: vec![0x40_1000],
        ..Default::default()
    }))
    .unwrap();
    w.finish(End {
        time: START + 2_000,
        ..Default::default()
    })
    .unwrap()
}

fn write(name: &str, bytes: Vec<u8>) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("syscalls");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn hostside(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hostside"))
        .args(args)
        .env_remove("DEBUGINFOD_URLS")
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "hostside failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn call<'a>(calls: &'a [Value], name: &str) -> &'a Value {
    calls
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {calls:?}"))
}

#[test]
fn the_json_report_counts_every_call_and_its_time() {
    let path = write("calls.zst", recording());
    let j: Value =
        serde_json::from_str(&stdout(&hostside(&["report", "--json", path_str(&path)]))).unwrap();
    let calls = j["syscalls"].as_array().unwrap();
    assert_eq!(calls.len(), 3);
    // Most time first.
    let names: Vec<&str> = calls.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["nanosleep", "write", "getpid"]);

    let getpid = call(calls, "getpid");
    assert_eq!(getpid["nr"], 39);
    assert_eq!(getpid["count"], 1000);
    assert_eq!(getpid["errors"], 0);
    assert_eq!(getpid["total_ns"], 500_000);
    assert_eq!(getpid["max_ns"], 500);
    assert_eq!(getpid["mean_ns"], 500);
    assert_eq!(getpid["unfinished"], 0);
    assert_eq!(getpid["errnos"], serde_json::json!({}));

    let write = call(calls, "write");
    assert_eq!(write["count"], 500);
    assert_eq!(write["errors"], 100);
    assert_eq!(write["errnos"], serde_json::json!({"EBADF": 100}));
    assert_eq!(write["total_ns"], 1_000_000);
    assert_eq!(write["max_ns"], 2_000);
    // Two calling stacks, the successful one first (more time), user frames only.
    let stacks = write["stacks"].as_array().unwrap();
    assert_eq!(stacks.len(), 2);
    assert_eq!(stacks[0]["count"], 400);
    assert_eq!(stacks[0]["total_ns"], 800_000);
    assert_eq!(stacks[1]["count"], 100);
    assert_eq!(stacks[1]["total_ns"], 200_000);
    for s in stacks {
        assert_eq!(s["stack"].as_array().unwrap().len(), 2, "{s}");
    }

    let sleep = call(calls, "nanosleep");
    assert_eq!(sleep["count"], 200);
    assert_eq!(sleep["errors"], 0);
    assert_eq!(sleep["total_ns"], 200_000_000);
    assert_eq!(sleep["max_ns"], 1_000_000);
    assert_eq!(sleep["stacks"][0]["count"], 200);
    assert_eq!(sleep["stacks"][0]["total_ns"], 200_000_000);

    let threads = j["syscall_threads"].as_array().unwrap();
    assert_eq!(threads.len(), 2);
    assert_eq!(threads[0]["tid"], PID + 1);
    assert_eq!(threads[0]["count"], 700);
    assert_eq!(threads[0]["total_ns"], 201_000_000);
    assert_eq!(threads[1]["tid"], PID);
    assert_eq!(threads[1]["count"], 1000);
}

#[test]
fn the_time_window_selects_calls_by_their_entry() {
    let path = write("window.zst", recording());
    // The first 5 ms: every getpid (1..1001 µs) and the 500 writes (10 µs..5.01 ms), less
    // the last one, which starts at 5.000 ms.
    let o = hostside(&["report", "--json", "--to", "0.005", path_str(&path)]);
    let j: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let calls = j["syscalls"].as_array().unwrap();
    assert_eq!(call(calls, "getpid")["count"], 1000);
    assert_eq!(call(calls, "write")["count"], 499);
    assert!(calls.iter().all(|c| c["name"] != "nanosleep"));
}

#[test]
fn the_text_report_is_a_table_like_strace_with_stacks_and_errnos() {
    let path = write("text.zst", recording());
    let out = stdout(&hostside(&["report", "--syscalls", path_str(&path)]));
    assert!(
        out.contains("% time     seconds  usecs/call     calls    errors syscall"),
        "{out}"
    );
    let row = |name: &str| {
        out.lines()
            .find(|l| l.split_whitespace().last() == Some(name))
            .unwrap_or_else(|| panic!("no {name} row in {out}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        row("nanosleep"),
        ["99.26", "0.200000", "1000", "200", "nanosleep"]
    );
    assert_eq!(
        row("write"),
        ["0.50", "0.001000", "2", "500", "100", "write"]
    );
    assert_eq!(row("getpid"), ["0.25", "0.000500", "0", "1000", "getpid"]);
    assert_eq!(
        row("total"),
        ["100.00", "0.201500", "118", "1700", "100", "total"]
    );
    assert!(out.contains("errors: 100 (EBADF 100)"), "{out}");
    assert!(out.contains("pid 100 tid 101 worker"), "{out}");
}

#[test]
fn the_flame_graph_and_folded_stacks_weigh_calls_by_time() {
    let path = write("flame.zst", recording());
    let svg = path.with_extension("svg");
    stdout(&hostside(&[
        "flamegraph",
        "--syscalls",
        path_str(&path),
        "-o",
        path_str(&svg),
    ]));
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("nanosleep"));
    assert!(svg.contains("time in system calls"));

    let folded = stdout(&hostside(&[
        "export",
        "--format",
        "collapsed",
        "--syscalls",
        path_str(&path),
        "-o",
        "-",
    ]));
    let mut total = 0u64;
    for line in folded.lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap();
        assert!(stack.starts_with("app;"), "{line}");
        // Process, two user frames, the call: no kernel frames.
        assert_eq!(stack.split(';').count(), 4, "{line}");
        total += n.parse::<u64>().unwrap();
    }
    assert_eq!(folded.lines().count(), 4);
    assert_eq!(total, 201_500_000);
}

#[test]
fn a_recording_without_system_calls_says_how_to_record_them() {
    let path = write("cpu.zst", cpu_only());
    for args in [
        &["report", "--syscalls"][..],
        &["flamegraph", "--syscalls", "-o", "unused.svg"][..],
    ] {
        let mut args = args.to_vec();
        args.insert(1, path_str(&path));
        let o = hostside(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("no system call events"), "{err}");
        assert!(err.contains("rec -e syscalls"), "{err}");
    }
    // The JSON report has the section, null.
    let j: Value =
        serde_json::from_str(&stdout(&hostside(&["report", "--json", path_str(&path)]))).unwrap();
    assert!(j["syscalls"].is_null());
    assert!(j["syscall_threads"].is_null());
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}
