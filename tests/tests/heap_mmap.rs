//! Issue 25, acceptance 4: memory beyond malloc. A program that maps 64 MiB of anonymous
//! memory in a known function, touches it, holds it and unmaps it, and writes its own VmRSS
//! (`/proc/self/status`) at known moments (`tests/programs/mmap_rss.c`): `report --heap` shows
//! the mapping at that function with its exact size and the lifetime the program measured,
//! the RSS split puts it under anonymous memory, and every RSS tick taken while the program's
//! memory stood still is within 5% of what the program read itself. The same program's
//! partial unmap and mremap, the 1 MiB block glibc's malloc maps internally and a file mapping
//! check what is and is not a mapping of the program's.

use std::collections::HashMap;
use std::path::Path;

use crossprof_format::{MapOp, Record};
use crossprof_tests::consumers::{html_page, page_row, report_check};
use crossprof_tests::*;
use serde_json::Value;

const MIB: u64 = 1 << 20;
const BLOCK: u64 = 64 * MIB;
/// Ticks this close to a change of the program's memory are not compared (the interposer's
/// coarse clock and the tick's own read take a few milliseconds).
const MARGIN_NS: u64 = 60_000_000;

/// What the program wrote: its RSS readings (time, bytes) and the times after map and unmap.
struct Truth {
    rss: Vec<(u64, u64)>,
    map: u64,
    unmap: u64,
}

fn truth(path: &Path) -> Truth {
    let text = std::fs::read_to_string(path).expect("the program's readings");
    let mut t = Truth {
        rss: Vec::new(),
        map: 0,
        unmap: 0,
    };
    for line in text.lines() {
        let f: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|x| x.parse().expect("a number"))
            .collect();
        match line.split_whitespace().next() {
            Some("rss") => t.rss.push((f[0], f[1] * 1024)),
            Some("map") => t.map = f[0],
            Some("unmap") => t.unmap = f[0],
            _ => panic!("unexpected line {line:?}"),
        }
    }
    assert_eq!(t.rss.len(), 5, "{text}");
    t
}

fn site<'a>(report: &'a Value, function: &str) -> &'a Value {
    report["heap"]["mmap"]["sites"]
        .as_array()
        .expect("heap.mmap.sites")
        .iter()
        .find(|s| s["function"] == function)
        .unwrap_or_else(|| panic!("no mmap site {function} in {}", report["heap"]["mmap"]))
}

#[test]
fn anonymous_mapping_site_size_lifetime_and_rss_split() {
    let program = build("mmap_rss.c", "mmap_rss", &["-O2"]);
    add_system_libs(&program.sysroot, &program.board);
    let recording = scratch().join("mmap_rss.zst");
    let readings = scratch().join("mmap_rss.txt");
    // The block held for 2.5 s, and as long after the unmap: rec reads smaps at most once per
    // 400 times what a read took, about a second apart with 64 MiB resident on a loaded
    // machine, and each phase needs split ticks.
    record(
        &recording,
        &["--heap", "--no-cpu"],
        &[
            program.board.to_str().unwrap(),
            readings.to_str().unwrap(),
            "2500",
        ],
    );
    let t = truth(&readings);
    let report = heap_report_json(&recording, &program.sysroot);
    let (records, _) = read_records(&recording);
    let bytes = std::fs::read(&recording).expect("read the recording");
    let start = crossprof_format::Reader::new(&bytes)
        .expect("a recording")
        .header()
        .start_clock_ns;

    // The 64 MiB mapping: its function and line, exact size, one mapping, unmapped once.
    let big = site(&report, "map_block");
    assert_eq!(big["line"], marker_line(&program.source, "map_block"));
    assert_eq!(big["stack"][1], "main", "{big}");
    assert_eq!((number(big, "mappings"), number(big, "bytes")), (1, BLOCK));
    assert_eq!(number(big, "peak_bytes"), BLOCK);
    assert_eq!(
        (number(big, "leaked_bytes"), number(big, "unmapped")),
        (0, 1)
    );
    let measured = t.unmap - t.map;
    let lifetime = number(big, "lifetime_max_ns");
    assert_eq!(lifetime, number(big, "lifetime_min_ns"));
    assert!(
        lifetime.abs_diff(measured) <= 20_000_000,
        "lifetime {lifetime} ns, the program measured {measured} ns"
    );
    let mapped_at = start + number(big, "first_time_ns");
    assert!(mapped_at.abs_diff(t.map) <= 20_000_000);

    // mremap grows (or moves) map_small's 256 KiB into grow_block's 512 KiB mapping; the
    // partial unmap of its first 128 KiB leaves 384 KiB mapped to the end.
    let small = site(&report, "map_small");
    assert_eq!(
        (
            number(small, "bytes"),
            number(small, "unmapped"),
            number(small, "leaked_bytes")
        ),
        (256 << 10, 1, 0)
    );
    let grown = site(&report, "grow_block");
    assert_eq!(
        (
            number(grown, "mappings"),
            number(grown, "bytes"),
            number(grown, "peak_bytes")
        ),
        (1, 512 << 10, 512 << 10)
    );
    assert_eq!(
        (
            number(grown, "leaked_bytes"),
            number(grown, "leaked_mappings")
        ),
        (384 << 10, 1)
    );
    // Nothing else is a mapping of the program's: not glibc's 1 MiB block for malloc, not the
    // file mapping (whose unmap is counted as memory no recorded mapping held).
    let mmap = &report["heap"]["mmap"];
    assert_eq!(
        mmap["sites"].as_array().unwrap().len(),
        3,
        "only the program's own anonymous mappings: {mmap}"
    );
    assert_eq!(number(mmap, "peak_bytes"), BLOCK + (384 << 10));
    assert!(number(mmap, "unmapped_elsewhere_bytes") >= 4096);
    let malloc_site = report["heap"]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["function"] == "big_malloc")
        .expect("big_malloc is a malloc site");
    assert_eq!(number(malloc_site, "allocated_bytes"), MIB);

    // The raw records say the same: one map and one unmap of 64 MiB.
    let big_ops: Vec<MapOp> = records
        .iter()
        .filter_map(|r| match r {
            Record::AnonMap(m) if m.len == BLOCK => Some(m.op),
            _ => None,
        })
        .collect();
    assert_eq!(big_ops, [MapOp::Map, MapOp::Unmap]);

    // RSS: every tick taken while the program's memory stood still is within 5% of its own
    // VmRSS readings around it; while the block was held, the split has it under anonymous.
    let phases = [
        (t.rss[0].0 - 600_000_000, t.map, (t.rss[0].1, t.rss[0].1)),
        (t.rss[1].0, t.rss[2].0, (t.rss[1].1, t.rss[2].1)),
        (t.rss[3].0, t.rss[4].0, (t.rss[3].1, t.rss[4].1)),
    ];
    let phase_of = |time: u64| {
        phases
            .iter()
            .position(|&(a, b, _)| time >= a + MARGIN_NS && time + MARGIN_NS <= b)
    };
    let check = |what: &str, time: u64, bytes: u64| -> Option<usize> {
        let i = phase_of(time)?;
        let (lo, hi) = phases[i].2;
        let (lo, hi) = (lo.min(hi) as f64 * 0.95, lo.max(hi) as f64 * 1.05);
        assert!(
            (lo..=hi).contains(&(bytes as f64)),
            "{what} at {time}: {bytes} bytes, the program read {:?}",
            phases[i].2
        );
        Some(i)
    };
    let mut ticks = [0; 3];
    for r in &records {
        if let Record::Rss(r) = r {
            if let Some(i) = check("Rss tick", r.time, r.bytes) {
                ticks[i] += 1;
            }
        }
    }
    assert!(
        ticks.iter().all(|&n| n >= 2),
        "RSS ticks per phase: {ticks:?}"
    );
    let splits = report["heap"]["rss_split"].as_array().expect("rss_split");
    let mut anon: HashMap<usize, Vec<u64>> = HashMap::new();
    for s in splits {
        let time = start + number(s, "time_ns");
        let parts: u64 = ["heap_bytes", "stack_bytes", "anonymous_bytes", "file_bytes"]
            .iter()
            .map(|k| number(s, k))
            .sum();
        assert_eq!(parts, number(s, "rss_bytes"), "{s}");
        if let Some(i) = check("split tick", time, number(s, "rss_bytes")) {
            anon.entry(i)
                .or_default()
                .push(number(s, "anonymous_bytes"));
        }
    }
    assert!(
        (0..3).all(|i| anon.contains_key(&i)),
        "split ticks in each phase: {anon:?}"
    );
    let (before, held, after) = (&anon[&0], &anon[&1], &anon[&2]);
    for (&b, &h) in before.iter().zip(held) {
        assert!(
            h >= b + BLOCK * 95 / 100 && h <= b + BLOCK * 105 / 100,
            "anonymous {h} while held, {b} before"
        );
    }
    assert!(after.iter().all(|&a| a < BLOCK / 2), "{after:?}");
    let text = hostside_ok(&[
        "report",
        "--heap",
        "--sysroot",
        program.sysroot.to_str().unwrap(),
        recording.to_str().unwrap(),
    ]);
    assert!(text.contains("Memory beyond malloc"), "{text}");
    assert!(text.contains("RSS by kind of mapping"), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("map_block"))
        .expect("a row for map_block");
    assert!(line.contains("67.11 MB"), "{line}");

    // The HTML page shows the same mappings and the split.
    let page = html_page(&recording, &program.sysroot, "mmap_rss");
    let r = report_check(&page, None);
    assert_eq!(r["errors"].as_array().unwrap().len(), 0, "{r:#}");
    let row = page_row(&r["heap_mmap"], "map_block");
    assert_eq!(row["bytes"], "67.11 MB", "{row}");
    assert_eq!(
        row["loc"],
        format!("mmap_rss.c:{}", marker_line(&program.source, "map_block"))
    );
    assert_eq!(
        page_row(&r["heap_mmap"], "grow_block")["leaked_bytes"],
        "393.22 kB"
    );
    let chart = &r["rss_split_chart"];
    assert_eq!(number(chart, "points"), splits.len() as u64, "{chart}");
    let max_anon = splits.iter().map(|s| number(s, "anonymous_bytes")).max();
    assert_eq!(Some(number(chart, "maxAnonymousBytes")), max_anon);
}

/// The 1 MiB mappings of a Python run (obmalloc's arenas since 3.10) and what remains of
/// them under `PYTHONMALLOC=malloc`.
fn python_arenas(tag: &str, pymalloc: bool) -> (u64, Value) {
    let recording = scratch().join(format!("{tag}.zst"));
    let script = "x = [object() for _ in range(300000)]\ndel x\n";
    let mut cmd = std::process::Command::new(rec());
    if !pymalloc {
        cmd.env("PYTHONMALLOC", "malloc");
    }
    run_ok(
        cmd.args(["--heap", "--no-cpu", "--out"])
            .arg(&recording)
            .args(["--", "python3", "-c", script]),
    );
    let report: Value = serde_json::from_str(&hostside_ok(&[
        "report",
        "--heap",
        "--json",
        recording.to_str().unwrap(),
    ]))
    .expect("valid JSON");
    let mmap = report["heap"]["mmap"].clone();
    let arenas = mmap["sites"]
        .as_array()
        .expect("heap.mmap.sites")
        .iter()
        .filter(|s| number(s, "bytes") == number(s, "mappings") * MIB)
        .map(|s| number(s, "mappings"))
        .sum();
    (arenas, mmap)
}

/// A real program nobody here wrote that maps anonymous memory itself: CPython's object
/// allocator takes its arenas with `mmap` (1 MiB each), which `malloc` never sees. 300,000
/// objects of 16 bytes need at least 4 arenas; with `PYTHONMALLOC=malloc` every object goes
/// through malloc and no arena is mapped.
#[test]
fn python_arenas_are_mappings_unless_pythonmalloc_is_malloc() {
    let (arenas, mmap) = python_arenas("mmap_python", true);
    assert!(arenas >= 4, "{mmap}");
    assert!(number(&mmap, "peak_bytes") >= 4 * MIB, "{mmap}");
    let (arenas, mmap) = python_arenas("mmap_python_malloc", false);
    assert_eq!(arenas, 0, "{mmap}");
}

/// `rec --heap -p PID`: the attach rewrites the program's `mmap` and `munmap` call slots too,
/// so a mapping made after the attach is recorded with its site, size and lifetime.
#[test]
fn an_attach_records_the_mappings_made_after_it() {
    let program = build("mmap_rss.c", "mmap_rss_attach", &["-O2"]);
    let recording = scratch().join("mmap_rss_attach.zst");
    let readings = scratch().join("mmap_rss_attach.txt");
    let mut child = std::process::Command::new(&program.board)
        .arg(&readings)
        .arg("1500")
        .spawn()
        .expect("start the program");
    // The program stands still for 700 ms before it maps the 64 MiB block.
    std::thread::sleep(std::time::Duration::from_millis(150));
    let pid = child.id().to_string();
    let out = run_rec(&["--heap", "-p", &pid, "--out", recording.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(child.wait().expect("wait").success());
    let t = truth(&readings);
    let report = heap_report_json(&recording, &program.sysroot);
    let big = site(&report, "map_block");
    assert_eq!(
        (
            number(big, "mappings"),
            number(big, "bytes"),
            number(big, "unmapped")
        ),
        (1, BLOCK, 1)
    );
    let lifetime = number(big, "lifetime_max_ns");
    assert!(lifetime.abs_diff(t.unmap - t.map) <= 20_000_000, "{big}");
}
