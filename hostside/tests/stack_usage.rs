//! `report --stack-usage`, end to end, on a synthetic stack-copy recording: which sample's
//! depth and which sample's chain a thread's row shows.
//!
//! A thread's deepest point is where it touches stack pages for the first time, and a sample
//! taken while such a page is being faulted in carries registers but no stack copy (the kernel
//! copies the user stack without faulting pages in). Its depth counts; its chain, the sampled
//! instruction alone, is not shown as the thread's deepest chain when a sample with a copy
//! exists (a run of tests/tests/stack_usage.rs once showed `ld-linux-x86-64.so.2+0x12290` alone
//! as a thread's deepest stack that way).

use std::path::{Path, PathBuf};
use std::process::Command;

use crossprof_format::{Comm, End, FrameWriter, Header, Mmap, Record, Sample};
use serde_json::Value;

const START: u64 = 1_000_000_000;
const PID: u32 = 100;
/// The thread's stack mapping: 64 KiB of anonymous memory.
const STACK_TOP: u64 = 0x7f00_0001_0000;
const STACK_LEN: u64 = 0x1_0000;
/// The program's code; the module is not on this host, so each chain is its sampled
/// instruction alone, named by its address, which tells the samples apart.
const CODE: u64 = 0x40_0000;

fn header() -> Header {
    Header {
        format_version: crossprof_format::FORMAT_VERSION,
        arch: "x86_64".into(),
        pointer_size: 8,
        page_size: 4096,
        command: vec!["app".into()],
        clock: "monotonic".into(),
        start_clock_ns: START,
        sample_freq: 99,
        call_graph: "dwarf=8192".into(),
        event: "cpu-clock".into(),
        events: vec!["cpu-clock".into()],
        ..Default::default()
    }
}

/// A CPU sample at `pc` with its stack pointer `depth` bytes below the stack's top, with a
/// stack copy of `copy` bytes.
fn sample(time: u64, pc: u64, depth: u64, copy: usize) -> Record {
    let sp = STACK_TOP - depth;
    Record::Sample(Sample {
        time: START + time,
        pid: PID,
        tid: PID,
        period: 10_000_000,
        // x86_64's bp, sp and ip (perf registers 6, 7, 8), in mask order.
        regs_mask: 0x1c0,
        regs: vec![sp + 0x40, sp, pc],
        stack: vec![0; copy],
        ..Default::default()
    })
}

fn recording(samples: &[Record]) -> Vec<u8> {
    let mut w = FrameWriter::new(Vec::new(), &header()).unwrap();
    let preamble = [
        Record::Comm(Comm {
            time: START,
            pid: PID,
            tid: PID,
            comm: "app".into(),
            exec: false,
        }),
        Record::Mmap(Mmap {
            time: START,
            pid: PID,
            tid: PID,
            start: CODE,
            len: 0x1_0000,
            prot: 5,
            path: "/opt/app/bin/app".into(),
            ..Default::default()
        }),
        Record::Mmap(Mmap {
            time: START,
            pid: PID,
            tid: PID,
            start: STACK_TOP - STACK_LEN,
            len: STACK_LEN,
            prot: 3,
            path: "//anon".into(),
            ..Default::default()
        }),
    ];
    for r in preamble.iter().chain(samples) {
        w.push(r).unwrap();
    }
    w.finish(End {
        time: START + 1_000_000,
        ..Default::default()
    })
    .unwrap()
}

fn report(name: &str, samples: &[Record]) -> Value {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("stack_usage");
    std::fs::create_dir_all(&dir).unwrap();
    let path: PathBuf = dir.join(name);
    std::fs::write(&path, recording(samples)).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_hostside"))
        .args(["report", "--json", "--stack-usage"])
        .arg(&path)
        .env_remove("DEBUGINFOD_URLS")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    j["stack_usage"][0].clone()
}

/// The leaf frame's name in a row's chain.
fn leaf(row: &Value) -> String {
    row["stack"][0].as_str().unwrap_or_default().to_string()
}

#[test]
fn a_deepest_sample_without_a_stack_copy_counts_for_depth_not_for_the_chain() {
    let row = report(
        "fault.zst",
        &[
            sample(1_000, CODE + 0x100, 0x2000, 4096),
            // The deepest, caught faulting a stack page in: no copy.
            sample(2_000, CODE + 0x300, 0x3800, 0),
            sample(3_000, CODE + 0x200, 0x3000, 4096),
            // As deep as the one with a copy, but without one: changes nothing.
            sample(4_000, CODE + 0x400, 0x3000, 0),
        ],
    );
    assert_eq!(row["max_bytes"], 0x3800, "{row}");
    assert_eq!(row["stack_bytes"], 0x3000, "{row}");
    assert!(leaf(&row).ends_with("+0x200"), "{row}");
}

#[test]
fn the_deepest_sample_shows_its_own_chain_when_it_has_a_copy() {
    let row = report(
        "copied.zst",
        &[
            sample(1_000, CODE + 0x100, 0x1000, 0),
            sample(2_000, CODE + 0x200, 0x3000, 4096),
            sample(3_000, CODE + 0x300, 0x2000, 4096),
        ],
    );
    assert_eq!(row["max_bytes"], 0x3000, "{row}");
    assert_eq!(row["stack_bytes"], 0x3000, "{row}");
    assert!(leaf(&row).ends_with("+0x200"), "{row}");
}

#[test]
fn a_thread_whose_samples_have_no_copy_shows_its_deepest_anyway() {
    let row = report(
        "bare.zst",
        &[
            sample(1_000, CODE + 0x100, 0x1000, 0),
            sample(2_000, CODE + 0x200, 0x2000, 0),
        ],
    );
    assert_eq!(row["max_bytes"], 0x2000, "{row}");
    assert_eq!(row["stack_bytes"], 0x2000, "{row}");
    assert!(leaf(&row).ends_with("+0x200"), "{row}");
}
