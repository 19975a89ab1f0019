//! Issue 15: the Firefox export places each allocation and free of a heap recording at its own
//! board time. `heap_times.c` makes blocks of 1000, 1001, ... bytes 10 ms apart, then frees
//! them newest first, keeping the first, after another thread took the first CPU samples (the
//! allocations' track is then not the main thread's, and their stacks must still be right);
//! the export's native-allocation table must hold
//! exactly the raw records' allocations and releasing frees, at their times to the
//! nanosecond, with their sizes, in time order, each free paired with its allocation. On a
//! recording with more allocations than the export shows, it keeps one in N, N the smallest
//! power of two that fits (the stated rule of `hostside/src/analysis/heap/events.rs`), exactly
//! those with their frees, and says so.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use crossprof_format::Record;
use crossprof_tests::*;
use serde_json::Value;

/// The export shows at most this many allocations (`EventSampling::MAX_SHOWN`).
const MAX_SHOWN: u64 = 500_000;

/// (time since the recording's start in ns, signed size) of every counted allocation and
/// releasing free, in time order (stable), keeping one allocation in `every` with its free.
fn expected(file: &Path, every: u64) -> Vec<(u64, i64)> {
    let (records, _) = read_records(file);
    let bytes = std::fs::read(file).unwrap();
    let start = crossprof_format::Reader::new(&bytes)
        .unwrap()
        .header()
        .start_clock_ns;
    let mut live: HashMap<(u32, u64), (u64, bool)> = HashMap::new();
    let mut seen = 0u64;
    let mut out = Vec::new();
    for r in records {
        match r {
            Record::Alloc(a) if a.addr != 0 => {
                let kept = seen.is_multiple_of(every);
                seen += 1;
                live.insert((a.pid, a.addr), (a.size, kept));
                if kept {
                    out.push((a.time.saturating_sub(start), a.size as i64));
                }
            }
            Record::Free(f) if f.addr != 0 => {
                if let Some((size, true)) = live.remove(&(f.pid, f.addr)) {
                    out.push((f.time.saturating_sub(start), -(size as i64)));
                }
            }
            _ => {}
        }
    }
    out.sort_by_key(|e| e.0);
    out
}

/// Exports `file` to the Firefox format; the profile and hostside's standard error.
fn export(file: &Path, sysroot: &Path, tag: &str) -> (Value, String) {
    let out = scratch().join(format!("{tag}.json"));
    let o = Command::new(hostside())
        .args(["export", "--heap", "--format", "firefox", "--sysroot"])
        .arg(sysroot)
        .arg(file)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{err}");
    (
        serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap(),
        err,
    )
}

/// The one thread holding allocations, and its (ns, weight, address, function) rows.
fn allocations_of(p: &Value) -> (Value, Vec<(u64, i64, u64, String)>) {
    let threads = p["threads"].as_array().unwrap();
    let with: Vec<&Value> = threads
        .iter()
        .filter(|t| t["nativeAllocations"]["length"].as_u64().unwrap_or(0) > 0)
        .collect();
    assert_eq!(with.len(), 1, "one process allocates");
    let t = with[0];
    let a = &t["nativeAllocations"];
    let n = a["length"].as_u64().unwrap() as usize;
    let strings = t["stringArray"].as_array().unwrap();
    let rows = (0..n)
        .map(|i| {
            let ms = a["time"][i].as_f64().unwrap();
            // Milliseconds as the crate writes them (ns / 1e6): back to ns exactly (below
            // 2^53 ns the nearest integer is the original).
            let ns = (ms * 1e6).round() as u64;
            let func = a["stack"][i]
                .as_u64()
                .map(|s| {
                    let frame = t["stackTable"]["frame"][s as usize].as_u64().unwrap();
                    let f = t["frameTable"]["func"][frame as usize].as_u64().unwrap();
                    let name = t["funcTable"]["name"][f as usize].as_u64().unwrap();
                    strings[name as usize].as_str().unwrap().to_string()
                })
                .unwrap_or_default();
            (
                ns,
                a["weight"][i].as_i64().unwrap(),
                a["memoryAddress"][i].as_u64().unwrap(),
                func,
            )
        })
        .collect();
    (t.clone(), rows)
}

/// Each free pairs with an earlier allocation of the same size (its first row with that
/// address), at most once; returns the number of allocations.
fn assert_paired(rows: &[(u64, i64, u64, String)]) -> u64 {
    let mut seen: HashMap<u64, (i64, bool)> = HashMap::new();
    for (i, &(_, w, addr, _)) in rows.iter().enumerate() {
        match seen.get_mut(&addr) {
            None => {
                assert!(w >= 0, "row {i}: a free before its allocation");
                seen.insert(addr, (w, false));
            }
            Some((size, freed)) => {
                assert!(
                    !*freed && w == -*size,
                    "row {i}: {w} frees {addr} of {size}"
                );
                *freed = true;
            }
        }
    }
    seen.len() as u64
}

#[test]
fn allocations_sit_at_their_times() {
    let p = build("heap_times.c", "ff_heap_times", &["-O2"]);
    add_system_libs(&p.sysroot, &p.board);
    let file = scratch().join("ff_heap_times.zst");
    // At 50 Hz of CPU time the main thread's start-up (a few ms) takes no sample and the
    // spinner's 300 ms of CPU time about 15, however busy the machine: its track is the
    // process's first.
    record(
        &file,
        &["--heap", "--freq", "50"],
        &[p.board.to_str().unwrap(), "30", "0", "300"],
    );
    let (profile, err) = export(&file, &p.sysroot, "ff_heap_times");
    assert!(!err.contains("note:"), "nothing sampled: {err}");
    let (thread, rows) = allocations_of(&profile);
    // The process's allocations go to its first track (the crate's rule), the spinner's here.
    assert_eq!(thread["name"], "spinner");
    let got: Vec<(u64, i64)> = rows.iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(got, expected(&file, 1));
    assert_paired(&rows);

    // The ground truth: 1000..1029 bytes in spaced(), in that order, on distinct ticks; the
    // frees newest first, 1000 bytes never freed.
    let spaced: Vec<&(u64, i64, u64, String)> = rows.iter().filter(|r| r.1.abs() >= 1000).collect();
    let sizes: Vec<i64> = spaced.iter().map(|r| r.1).collect();
    let want: Vec<i64> = (0..30)
        .map(|i| 1000 + i)
        .chain((1..30).rev().map(|i| -(1000 + i)))
        .collect();
    assert_eq!(sizes, want);
    assert!(spaced.iter().all(|r| r.3 == "spaced"), "{spaced:?}");
    assert!(
        spaced.windows(2).all(|w| w[0].0 < w[1].0),
        "10 ms apart, each on its own tick: {spaced:?}"
    );
    // Spread over the run, not piled at its end: 59 events 10 ms apart span 0.58 s at least.
    assert!(rows.last().unwrap().0 - rows.first().unwrap().0 >= 580_000_000);
}

#[test]
fn huge_recordings_show_one_allocation_in_n_and_say_so() {
    let p = build("heap_times.c", "ff_heap_bulk", &["-O2"]);
    add_system_libs(&p.sysroot, &p.board);
    let file = scratch().join("ff_heap_bulk.zst");
    record(
        &file,
        &["--heap"],
        &[p.board.to_str().unwrap(), "2", "600000"],
    );
    let report = heap_report_json(&file, &p.sysroot);
    let allocations = report["heap"]["allocations"].as_u64().unwrap();
    let mut every = 1;
    while allocations.div_ceil(every) > MAX_SHOWN {
        every *= 2;
    }
    assert_eq!(every, 2, "{allocations} allocations");
    let (profile, err) = export(&file, &p.sysroot, "ff_heap_bulk");
    let (thread, rows) = allocations_of(&profile);
    let got: Vec<(u64, i64)> = rows.iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(got, expected(&file, every));
    let shown = assert_paired(&rows);
    assert_eq!(shown, allocations.div_ceil(every));
    let says = format!("{shown} of {allocations} allocations shown at their times (one in {every}");
    assert!(
        err.contains("note:") && err.contains(&format!("one in {every}")),
        "{err}"
    );
    let markers = &thread["markers"];
    let strings = thread["stringArray"].as_array().unwrap();
    let texts: Vec<&str> = (0..markers["length"].as_u64().unwrap() as usize)
        .filter_map(|i| {
            let text = markers["data"][i]["text"].as_u64()?;
            strings[text as usize].as_str()
        })
        .collect();
    assert!(
        texts.iter().any(|t| t.starts_with(&says)),
        "{says}: {texts:?}"
    );
}
