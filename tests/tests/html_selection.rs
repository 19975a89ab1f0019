//! Issue 15: the HTML report's timeline selection filters the off-CPU and heap views too,
//! checked in headless Chromium (tests/browser/report.js) against `hostside report
//! --off-cpu/--heap --from/--to` of the dragged range, to the nanosecond and the byte. For
//! an off-CPU recording (mutex_split.c) the timeline shows each thread's running and waiting
//! time from its context switches; for a heap recording (phases.c) the heap chart is the
//! report's series, and a `--from/--to` window's chart ends with the window; clicking a
//! thread (heap_threads.c) keeps its allocations as `report --heap --tid` does.

use crossprof_tests::consumers::*;
use crossprof_tests::*;
use serde_json::Value;

/// The page's off-CPU table lists exactly the report's functions with their nanoseconds, and
/// its timeline each thread's running and waiting nanoseconds as the report's timeline has
/// them.
fn assert_same_waits(rows: &Value, activity: &Value, report: &Value) {
    assert_same_rows(rows, &report["off_cpu"]["functions"], "self_ns", "total_ns");
    let threads = report["timeline"]["threads"].as_array().unwrap();
    // The page keeps a row for every thread; the report only those alive in its window.
    let activity: Vec<&Value> = activity
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["running"].as_u64().unwrap() + a["waiting"].as_u64().unwrap() > 0)
        .collect();
    assert_eq!(activity.len(), threads.len(), "{activity:?} {threads:#?}");
    for t in threads {
        let a = activity
            .iter()
            .find(|a| a["tid"] == t["tid"])
            .unwrap_or_else(|| panic!("thread {} not on the page's timeline", t["tid"]));
        assert_eq!(a["running"], t["running_ns"], "{a} {t}");
        assert_eq!(a["waiting"], t["waiting_ns"], "{a} {t}");
    }
}

/// The middle half of the time every thread of the report's timeline was alive, as fractions
/// of the recording's length.
fn middle_of_common_life(report: &Value) -> (f64, f64) {
    let tl = &report["timeline"];
    let (t0, w) = (
        tl["start_ns"].as_u64().unwrap(),
        tl["slice_ns"].as_u64().unwrap(),
    );
    let (mut lo, mut hi) = (0u64, u64::MAX);
    for t in tl["threads"].as_array().unwrap() {
        let alive: Vec<usize> = (0..t["running"].as_array().unwrap().len())
            .filter(|&i| t["running"][i].as_u64().unwrap() + t["waiting"][i].as_u64().unwrap() > 0)
            .collect();
        let (first, last) = (alive[0] as u64, *alive.last().unwrap() as u64);
        lo = lo.max(t0 + (first + 1) * w);
        hi = hi.min(t0 + last * w);
    }
    assert!(lo < hi, "the threads never lived at the same time: {tl:#}");
    let length = report["recording"]["duration_ns"].as_u64().unwrap() as f64;
    let span = hi - lo;
    (
        (lo + span / 4) as f64 / length,
        (lo + span * 3 / 4) as f64 / length,
    )
}

#[test]
fn off_cpu_report_shows_where_and_when_threads_waited() {
    // The contender waits about 3x longer for the lock than it sleeps between turns.
    let m = fixtures::recorded_mutex_split("html_offcpu");
    let (p, recording) = (&m.program, &m.recording);
    let report = off_cpu_report(recording, &p.sysroot, &[]);
    let page = html_page(recording, &p.sysroot, "html_offcpu");
    // Dragged over the middle half of the time all of the program's threads lived (from the
    // report's timeline: they start after rec and the program have, and end before rec has
    // written its last frame), as fractions of the recording's length.
    let r = report_check_range(&page, middle_of_common_life(&report));
    assert_eq!(r["errors"].as_array().unwrap().len(), 0, "{r:#}");
    // The whole recording: the report's waits, and its timeline from the same switches.
    assert_same_waits(&r["offcpu_functions"], &r["activity"], &report);
    let rows = &r["offcpu_functions"];
    let s = share(
        page_num(&page_row(rows, "take_lock")["total"]),
        page_num(&page_row(rows, "wait_turn")["total"]),
    );
    let truth = m.measured_share("take_lock", "wait_turn");
    assert!(
        (s - truth).abs() <= 2.0,
        "take_lock's share on the page is {s:.1}%, the program measured {truth:.1}%"
    );
    // Three threads (main, holder, contender), each of which waited.
    let activity = r["activity"].as_array().unwrap();
    assert_eq!(activity.len(), 3, "{activity:?}");
    assert!(activity.iter().all(|a| a["waiting"].as_u64().unwrap() > 0));

    // The dragged range: every off-CPU number is the waits clipped to it, as
    // `hostside report --off-cpu --from/--to` of that range (seconds from the recording's
    // start, end exclusive) computes them.
    let start = r["start_ns"].as_u64().unwrap();
    let (from, to) = (
        r["range_ns"][0].as_u64().unwrap() - start,
        r["range_ns"][1].as_u64().unwrap() - start,
    );
    let secs = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
    let windowed = off_cpu_report(
        recording,
        &p.sysroot,
        &["--from", &secs(from), "--to", &secs(to)],
    );
    assert_same_waits(
        &r["offcpu_functions_in_range"],
        &r["activity_in_range"],
        &windowed,
    );
    // The selection narrowed the waits, and every thread was alive in it for exactly its
    // length.
    let ranged = &r["offcpu_functions_in_range"];
    let (a, b) = (
        page_num(&page_row(ranged, "take_lock")["total"]),
        page_num(&page_row(ranged, "wait_turn")["total"]),
    );
    assert!(
        a < page_num(&page_row(rows, "take_lock")["total"]),
        "{ranged:#}"
    );
    assert!(
        b < page_num(&page_row(rows, "wait_turn")["total"]),
        "{ranged:#}"
    );
    let contender = r["activity_in_range"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["running"].as_u64().unwrap() + t["waiting"].as_u64().unwrap())
        .max()
        .unwrap();
    assert_eq!(contender, to - from, "{:#}", r["activity_in_range"]);
}

/// The page's heap chart is the report's heap series: the same slices from the same start,
/// its highest point the peak, its end the bytes still live (leaked) at the end.
fn assert_same_heap_chart(chart: &Value, report: &Value) {
    let h = &report["heap"];
    let t = &h["timeline"];
    let series = t["heap_bytes"].as_array().unwrap();
    assert_eq!(chart["startNs"], t["start_ns"], "{chart} {t}");
    assert_eq!(chart["points"], series.len(), "{chart} {t}");
    let end =
        t["start_ns"].as_u64().unwrap() + series.len() as u64 * t["interval_ns"].as_u64().unwrap();
    assert_eq!(chart["endNs"], end, "{chart}");
    assert_eq!(chart["maxBytes"], h["peak_bytes"], "{chart}");
    assert_eq!(
        chart["maxBytes"].as_u64(),
        series.iter().filter_map(Value::as_u64).max()
    );
    assert_eq!(chart["lastBytes"], h["leaked_bytes"], "{chart}");
}

#[test]
fn heap_views_follow_the_selection_and_a_windows_chart_ends_with_it() {
    // phases.c: alloc_a keeps 1000 blocks of 100 bytes halfway through phase_a; alloc_b frees
    // them halfway through phase_b. A window that ends at the a→b edge holds them live at its
    // end, and its chart must end there too (it used to run on, flat, to the recording's end).
    let p = build("phases.c", "html_heap_window", C_FP);
    add_system_libs(&p.sysroot, &p.board);
    let recording = scratch().join("html_heap_window.zst");
    let o = run_rec(&[
        "--heap",
        "--out",
        recording.to_str().unwrap(),
        "--",
        p.board.to_str().unwrap(),
        "400",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bytes = std::fs::read(&recording).unwrap();
    let start = crossprof_format::Reader::new(&bytes)
        .expect("a recording")
        .header()
        .start_clock_ns;
    let stderr = String::from_utf8_lossy(&o.stderr);
    let edges: Vec<u64> = stderr
        .lines()
        .find(|l| l.starts_with("phases "))
        .unwrap_or_else(|| panic!("no phases line in {stderr}"))
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    let (a_start, ab) = (edges[0] - start, edges[1] - start);
    let to = format!("{}.{:09}", ab / 1_000_000_000, ab % 1_000_000_000);

    let whole = heap_report(&recording, &p.sysroot, &[]);
    let windowed = heap_report(&recording, &p.sysroot, &["--from", "0", "--to", &to]);
    let site = |r: &Value, field: &str| -> u64 {
        r["heap"]["sites"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["function"] == "alloc_a")
            .map(|s| s[field].as_u64().unwrap())
            .sum()
    };
    assert_eq!(site(&windowed, "allocations"), 1000);
    assert_eq!(site(&windowed, "leaked_bytes"), 100_000);
    assert_eq!(site(&whole, "leaked_bytes"), 0);

    // The whole recording's page, dragged over phase_a from 100 ms after its start to 100 ms
    // before its end, as the program printed them (alloc_a runs 200 ms after the start; on a
    // loaded machine the phase can end late, so its end alone does not place alloc_a), as
    // fractions of the recording's length: its heap views follow the selection, the
    // allocations made in it and the bytes still live at its end as report --heap --from/--to
    // of the dragged range says.
    let page = html_page(&recording, &p.sysroot, "html_heap_whole");
    let length = whole["recording"]["duration_ns"].as_u64().unwrap() as f64;
    let drag = (
        (a_start + 100_000_000) as f64 / length,
        ab.saturating_sub(100_000_000) as f64 / length,
    );
    let r = report_check_range(&page, drag);
    assert_eq!(r["errors"].as_array().unwrap().len(), 0, "{r:#}");
    assert_same_heap_chart(&r["heap_chart"], &whole);
    let start = r["start_ns"].as_u64().unwrap();
    let secs = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
    let (from, until) = (
        r["range_ns"][0].as_u64().unwrap() - start,
        r["range_ns"][1].as_u64().unwrap() - start,
    );
    assert!(
        until < ab,
        "the selection reaches phase_b: {from}..{until}, a→b at {ab}"
    );
    let ranged = heap_report(
        &recording,
        &p.sysroot,
        &["--from", &secs(from), "--to", &secs(until)],
    );
    let h = &ranged["heap"];
    let totals = &r["heap_totals_in_range"];
    for (i, field) in [
        "allocations",
        "temporary",
        "allocated_bytes",
        "",
        "leaked_bytes",
    ]
    .iter()
    .enumerate()
    {
        match *field {
            "" => assert!(totals[i].is_null(), "{totals}"),
            f => assert_eq!(totals[i], h[f], "{f}: page {totals} report {h:#}"),
        }
    }
    let page_sites = r["heap_sites_in_range"].as_array().unwrap();
    let by_name = |name: &str, key: &str| -> u64 {
        page_sites
            .iter()
            .filter(|s| s["name"] == name)
            .map(|s| s[key].as_u64().unwrap())
            .sum()
    };
    for s in h["sites"].as_array().unwrap() {
        let name = s["function"].as_str().unwrap();
        for (key, field) in [
            ("c0_n", "allocations"),
            ("c1_n", "temporary"),
            ("c2_n", "allocated_bytes"),
            ("c4_n", "leaked_bytes"),
        ] {
            let want: u64 = h["sites"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|x| x["function"] == name)
                .map(|x| x[field].as_u64().unwrap())
                .sum();
            assert_eq!(by_name(name, key), want, "{name} {field}: {page_sites:#?}");
        }
    }
    // alloc_a's 1000 blocks of 100 bytes were made in the selection and freed after it.
    assert_eq!(by_name("alloc_a", "c0_n"), 1000, "{page_sites:#?}");
    assert_eq!(by_name("alloc_a", "c4_n"), 100_000, "{page_sites:#?}");

    let out = scratch().join("html_heap_window.html");
    let sr = p.sysroot.to_str().unwrap();
    let file = recording.to_str().unwrap();
    let o = out.to_str().unwrap();
    hostside_ok(&[
        "html",
        "--sysroot",
        sr,
        file,
        "--from",
        "0",
        "--to",
        &to,
        "-o",
        o,
    ]);
    let w = report_check(&out, None);
    assert_eq!(w["errors"].as_array().unwrap().len(), 0, "{w:#}");
    let chart = &w["heap_chart"];
    assert_same_heap_chart(chart, &windowed);
    // The chart ends in the slice that holds the window's end, not at the recording's.
    let step = windowed["heap"]["timeline"]["interval_ns"]
        .as_u64()
        .unwrap();
    let end = chart["endNs"].as_u64().unwrap();
    assert!(
        end >= ab && end - step < ab,
        "{chart} ends at {end}, window at {ab}"
    );
    assert!(chart["lastBytes"].as_u64().unwrap() >= 100_000, "{chart}");
    // The totals: "allocations: N" then the next figure.
    let totals = w["heap_totals"].as_str().unwrap();
    let n = windowed["heap"]["allocations"].to_string();
    assert!(
        totals.contains(&format!("allocations: {n}temporary: ")),
        "{totals}, not {n} allocations"
    );
}

#[test]
fn heap_views_follow_a_selected_thread() {
    // heap_threads.c: 8 worker threads allocate at the same time, each leaking one block of
    // 1000 + its index bytes. Clicking one worker on the timeline keeps its allocations:
    // the same counts, bytes and leaks as report --heap --tid of that thread.
    let p = build("heap_threads.c", "html_heap_threads", &["-O2", "-pthread"]);
    add_system_libs(&p.sysroot, &p.board);
    let recording = scratch().join("html_heap_threads.zst");
    record(
        &recording,
        &["--heap"],
        &[p.board.to_str().unwrap(), "20000"],
    );
    let page = html_page(&recording, &p.sysroot, "html_heap_threads");
    let threads = report_check(&page, None)["threads"].clone();
    let worker = threads
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"] != t["pid"])
        .unwrap_or_else(|| panic!("no worker thread on the page: {threads:#}"));
    let tid = worker["tid"].as_u64().unwrap() as u32;
    let r = report_check_thread(&page, tid);
    assert_eq!(r["errors"].as_array().unwrap().len(), 0, "{r:#}");
    let report = heap_report(&recording, &p.sysroot, &["--tid", &tid.to_string()]);
    let h = &report["heap"];
    let totals = &r["heap_totals_thread"];
    // Allocations, temporary (unknown for one thread), bytes, peak (unknown), leaked.
    assert_eq!(totals[0], h["allocations"], "{totals} {h:#}");
    assert!(totals[1].is_null() && totals[3].is_null(), "{totals}");
    assert_eq!(totals[2], h["allocated_bytes"], "{totals} {h:#}");
    assert_eq!(totals[4], h["leaked_bytes"], "{totals} {h:#}");
    // Ground truth: 20,000 rounds of malloc, malloc, realloc, and the leaked block.
    let sites = r["heap_sites_thread"].as_array().unwrap();
    let worker_allocs: u64 = sites
        .iter()
        .filter(|s| s["name"] == "worker")
        .map(|s| s["c0_n"].as_u64().unwrap())
        .sum();
    assert_eq!(worker_allocs, 3 * 20_000 + 1, "{sites:#?}");
    let leaked = totals[4].as_u64().unwrap();
    assert!(
        (1000..1008).contains(&leaked),
        "thread {tid} leaked {leaked} B"
    );
}
