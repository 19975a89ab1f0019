//! Issue 15, acceptance 2: `hostside html` of the CPU and heap ground-truth programs, rendered
//! by headless Chromium (driven through the DevTools protocol by tests/browser/report.js),
//! shows the right names, file:line and shares; selecting a function lists its callers with
//! the call's line; dragging a time range on the timeline re-filters the tables to exactly
//! the samples of that range (counted independently from the Firefox export's sample times),
//! the same functions and counts as `hostside report --from/--to` of that range gives, and
//! as `hostside html --from/--to` shows. The off-CPU and heap views under a selection:
//! tests/tests/html_selection.rs.

use std::path::Path;

use crossprof_tests::consumers::*;
use crossprof_tests::*;
use serde_json::Value;

/// Board times (ns, from the recording's start) and leaf names of every sample, from the
/// Firefox export: sample → stack → frame → function name.
fn sample_leaves(recording: &Path, sysroot: &Path) -> Vec<(f64, String)> {
    let out = scratch().join("html_cpu.firefox.json");
    hostside_ok(&[
        "export",
        "--format",
        "firefox",
        "--sysroot",
        sysroot.to_str().unwrap(),
        recording.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let p: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let mut v = Vec::new();
    for t in p["threads"].as_array().unwrap() {
        let strings = t["stringArray"].as_array().unwrap();
        let mut time_ms = 0.0;
        let s = &t["samples"];
        for i in 0..s["length"].as_u64().unwrap() as usize {
            time_ms += s["timeDeltas"][i].as_f64().unwrap();
            let stack = s["stack"][i].as_u64().unwrap() as usize;
            let frame = t["stackTable"]["frame"][stack].as_u64().unwrap() as usize;
            let func = t["frameTable"]["func"][frame].as_u64().unwrap() as usize;
            let name = t["funcTable"]["name"][func].as_u64().unwrap() as usize;
            v.push((time_ms * 1e6, strings[name].as_str().unwrap().to_string()));
        }
    }
    v
}

#[test]
fn cpu_report_renders_the_split_and_filters_by_time() {
    let p = build("cpu_split.c", "html_cpu", C_FP);
    add_system_libs(&p.sysroot, &p.board);
    let recording = scratch().join("html_cpu.zst");
    // 3000 rounds, about 3000 samples: the dragged 40% of them must still hold the 75:25
    // split to 5 points (a share of N samples varies by sqrt(1875/N) points: 1.2 at 1300).
    record(&recording, &[], &[p.board.to_str().unwrap(), "3000"]);
    let report = report_json(&recording, Some(&p.sysroot));
    let page = html_page(&recording, &p.sysroot, "html_cpu");
    let shot = scratch().join("html_cpu.png");
    let r = report_check(&page, Some(&shot));
    assert_eq!(r["errors"].as_array().unwrap().len(), 0, "{r:#}");
    assert_eq!(
        r["requests"].as_array().unwrap().len(),
        0,
        "the page fetched: {r:#}"
    );
    assert!(
        r["title"].as_str().unwrap().contains("html_cpu"),
        "{}",
        r["title"]
    );

    // Names, file:line and counts as `hostside report` has them.
    let funcs = &r["functions"];
    for (name, marker) in [("hot_a", "hot_a"), ("hot_b", "hot_b")] {
        let row = page_row(funcs, name);
        assert_eq!(
            page_num(&row["self"]),
            count(&report, name, "self"),
            "{row}"
        );
        assert_eq!(
            page_num(&row["total"]),
            count(&report, name, "total"),
            "{row}"
        );
        assert_eq!(
            row["loc"],
            format!("cpu_split.c:{}", marker_line(&p.source, marker)),
            "{row}"
        );
    }
    let (a, b) = (
        page_num(&page_row(funcs, "hot_a")["self"]),
        page_num(&page_row(funcs, "hot_b")["self"]),
    );
    let s = share(a, b);
    assert!(
        is_three_to_one(a, b),
        "hot_a's share on the page is {s:.1}%"
    );
    // The page's percentages are of the selected samples.
    let all = report["cpu"]["samples"].as_u64().unwrap();
    assert_eq!(
        page_row(funcs, "hot_a")["selfp"],
        format!("{:.1}%", 100.0 * a as f64 / all as f64)
    );
    for name in ["hot_a", "hot_b", "main"] {
        assert!(
            r["flame_names"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n == name),
            "{name} not in the flame graph"
        );
    }

    // Selecting hot_a lists main as its caller, at the line of the call.
    assert_eq!(r["selected"], "hot_a");
    let callers = r["callers"].as_array().unwrap();
    assert_eq!(callers[0][2], "main", "{callers:?}");
    assert_eq!(
        callers[0][3],
        format!("cpu_split.c:{}", marker_line(&p.source, "call_a"))
    );

    // The dragged range filters the table to exactly the samples taken in it.
    let start = r["start_ns"].as_f64().unwrap();
    let (from, to) = (
        r["range_ns"][0].as_f64().unwrap() - start,
        r["range_ns"][1].as_f64().unwrap() - start,
    );
    let leaves = sample_leaves(&recording, &p.sysroot);
    let in_range = |name: &str| {
        leaves
            .iter()
            .filter(|(t, n)| *t >= from && *t < to && n == name)
            .count() as u64
    };
    let ranged = &r["functions_in_range"];
    let (ra, rb) = (
        page_num(&page_row(ranged, "hot_a")["self"]),
        page_num(&page_row(ranged, "hot_b")["self"]),
    );
    assert_eq!(ra, in_range("hot_a"), "range {from}..{to} ns");
    assert_eq!(rb, in_range("hot_b"), "range {from}..{to} ns");
    assert!(ra < a && rb < b, "the selection did not narrow the table");
    let s = share(ra, rb);
    assert!(
        is_three_to_one(ra, rb),
        "hot_a's share in the range is {s:.1}%"
    );

    // The same range on `hostside report --from/--to` (seconds from the recording's start,
    // end exclusive, as the page's selection): the same functions with the same counts.
    let secs = |ns: f64| {
        let ns = ns as u64;
        format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
    };
    let (from_s, to_s) = (secs(from), secs(to));
    let sr = p.sysroot.to_str().unwrap();
    let file = recording.to_str().unwrap();
    let args = ["report", "--json", "--top", "1000", "--sysroot", sr, file];
    let windowed: Value = serde_json::from_str(&hostside_ok(
        &[&args[..], &["--from", &from_s, "--to", &to_s]].concat(),
    ))
    .unwrap();
    assert_same_functions(ranged, &windowed);

    // `hostside html --from/--to` of that range: the page shows that range only.
    let out = scratch().join("html_cpu_window.html");
    let o = out.to_str().unwrap();
    hostside_ok(&[
        "html",
        "--sysroot",
        sr,
        file,
        "--from",
        &from_s,
        "--to",
        &to_s,
        "-o",
        o,
    ]);
    let w = report_check(&out, None);
    assert_eq!(w["errors"].as_array().unwrap().len(), 0, "{w:#}");
    assert_same_functions(&w["functions"], &windowed);
    let words = windowed["recording"]["filter"]["description"]
        .as_str()
        .unwrap();
    assert!(
        w["summary"].as_str().unwrap().contains(words),
        "{}",
        w["summary"]
    );
}

/// The page's function table lists exactly the report's functions, with its self and total
/// counts.
fn assert_same_functions(page: &Value, report: &Value) {
    assert_same_rows(page, &report["cpu"]["functions"], "self", "total");
}

#[test]
fn heap_report_renders_the_sites_and_totals() {
    let p = build("heap_truth.c", "html_heap", &["-O2"]);
    add_system_libs(&p.sysroot, &p.board);
    let recording = scratch().join("html_heap.zst");
    record(
        &recording,
        &["--heap"],
        &[p.board.to_str().unwrap(), "20000"],
    );
    let page = html_page(&recording, &p.sysroot, "html_heap");
    let r = report_check(&page, None);
    assert_eq!(r["errors"].as_array().unwrap().len(), 0, "{r:#}");
    // churn: 20,000 temporary allocations; leak_some: 20,000 x 100 bytes leaked; grow: 1,000
    // reallocs, each temporary, nothing left.
    let totals = r["heap_totals"].as_str().unwrap();
    assert!(totals.contains("allocations: 41000"), "{totals}");
    assert!(totals.contains("temporary: 21000"), "{totals}");
    assert!(totals.contains("leaked bytes: 2.00 MB"), "{totals}");
    let sites = &r["heap_sites"];
    for (name, marker, allocs, temporary, leaked) in [
        ("churn", "churn", "20000", "20000", "0 B"),
        ("leak_some", "leak", "20000", "0", "2.00 MB"),
        ("grow", "grow", "1000", "1000", "0 B"),
    ] {
        let s = page_row(sites, name);
        assert_eq!(s["c0"], allocs, "{s}");
        assert_eq!(s["c1"], temporary, "{s}");
        assert_eq!(s["c4"], leaked, "{s}");
        assert_eq!(
            s["loc"],
            format!("heap_truth.c:{}", marker_line(&p.source, marker)),
            "{s}"
        );
    }
}

#[test]
fn annotate_shows_the_hot_line_with_its_samples() {
    let p = build("cpu_split.c", "annotate_cpu", C_FP);
    let recording = scratch().join("annotate_cpu.zst");
    record(&recording, &[], &[p.board.to_str().unwrap(), "500"]);
    let report = report_json(&recording, Some(&p.sysroot));
    // The sources moved: --source-dir finds them by name.
    let sources = scratch().join("annotate_sources");
    std::fs::create_dir_all(&sources).unwrap();
    std::fs::copy(&p.source, sources.join("cpu_split.c")).unwrap();
    let text = hostside_ok(&[
        "annotate",
        "--sysroot",
        p.sysroot.to_str().unwrap(),
        recording.to_str().unwrap(),
        "hot_a",
        "--source-dir",
        sources.to_str().unwrap(),
    ]);
    assert!(
        text.contains(&format!(
            "source: {}",
            sources.join("cpu_split.c").display()
        )),
        "{text}"
    );
    // Each sampled line: self, total, line number, the source text. The self counts add up
    // to the report's, and the hot line is the loop marked LINE:hot_a.
    let hot = marker_line(&p.source, "hot_a");
    let mut self_sum = 0;
    let mut best = (0u64, 0u32);
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if let [s, _t, n, ..] = f.as_slice() {
            if let (Ok(s), Ok(n)) = (s.parse::<u64>(), n.parse::<u32>()) {
                self_sum += s;
                best = best.max((s, n));
                if n == hot {
                    assert!(l.contains("LINE:hot_a"), "{l}");
                }
            }
        }
    }
    assert_eq!(self_sum, count(&report, "hot_a", "self"), "{text}");
    assert_eq!(best.1, hot, "{text}");
}
