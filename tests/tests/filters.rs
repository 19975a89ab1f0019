//! Issue 14, "Time and thread filters": `--from/--to/--pid/--tid` on `report`, `flamegraph`,
//! `export` and `html`, against programs whose phases and threads are known.
//!
//! `phases.c` spins in phase_a, then in phase_b, then sleeps, and prints the monotonic times
//! (rec's clock) of each edge; a second thread sleeps through the whole run. Windows a margin
//! away from the edges must hold only their phase: CPU samples (counted exactly against the
//! raw records), page faults, heap allocations, and off-CPU waits cut to the window. The
//! outputs must agree under one filter: report, folded export, flame graph, Firefox export.
//! Threads and processes: `threads.c` and `forkexec.c`.

use std::process::Command;

use crossprof_format::Record;
use crossprof_tests::phases::*;
use crossprof_tests::*;
use serde_json::Value;

/// CPU samples (event 0) or samples of event `event` in `[lo, hi)` ns after `start`, of the
/// selected process and thread.
fn raw_count(
    records: &[Record],
    start: u64,
    event: u32,
    (lo, hi): (u64, u64),
    pid: Option<u32>,
    tid: Option<u32>,
) -> u64 {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Sample(s) if event == 0 => Some(s),
            Record::EventSample(e) if event > 0 && e.event == event => Some(&e.sample),
            _ => None,
        })
        .filter(|s| {
            let t = s.time.saturating_sub(start);
            lo <= t && t < hi && pid.is_none_or(|p| p == s.pid) && tid.is_none_or(|x| x == s.tid)
        })
        .count() as u64
}

fn site<'a>(r: &'a Value, name: &str) -> Vec<&'a Value> {
    r["heap"]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["function"] == name)
        .collect()
}

fn site_sum(r: &Value, name: &str, field: &str) -> u64 {
    site(r, name)
        .iter()
        .map(|s| s[field].as_u64().unwrap())
        .sum()
}

fn off_cpu_thread(r: &Value, tid: u32) -> Value {
    r["off_cpu"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"] == tid)
        .unwrap_or_else(|| panic!("no thread {tid}: {:#}", r["off_cpu"]["threads"]))
        .clone()
}

#[test]
fn phases_are_selected_by_time() {
    let p = build("phases.c", "filter_phases", C_FP);
    add_system_libs(&p.sysroot, &p.board);
    let file = scratch().join("filter_phases.zst");
    let o = run_rec(&[
        "--heap",
        "--off-cpu",
        "-e",
        "cpu-clock,minor-faults",
        "--call-graph",
        "fp",
        "--out",
        file.to_str().unwrap(),
        "--",
        p.board.to_str().unwrap(),
        "1000",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (start, records) = raw(&file);
    let ph = phases(&o.stderr, start);
    let sr = p.sysroot.as_path();
    let all = report(&file, sr, &[]);

    // CPU: before the a→b edge only phase_a, after it only phase_b; every sample counted.
    let a_win = (0, ph.ab - MARGIN_NS);
    let b_win = (ph.ab + MARGIN_NS, ph.bc - MARGIN_NS);
    for (win, hot, cold) in [(a_win, "phase_a", "phase_b"), (b_win, "phase_b", "phase_a")] {
        let (from, to) = (secs(win.0), secs(win.1));
        let r = report(&file, sr, &["--from", &from, "--to", &to]);
        let n = samples(&r);
        assert_eq!(
            n,
            raw_count(&records, start, 0, win, None, None),
            "{from}..{to}"
        );
        assert_eq!(count(&r, cold, "total"), 0, "{cold} in {from}..{to}: {r:#}");
        let hot_n = count(&r, hot, "total");
        assert!(
            hot_n * 100 >= n * 90,
            "{hot} {hot_n} of {n} samples in {from}..{to}"
        );
        assert_eq!(r["recording"]["filter"]["from_ns"], win.0);
        assert_eq!(r["recording"]["filter"]["to_ns"], win.1);
        let words = r["recording"]["filter"]["description"].as_str().unwrap();
        let args = [
            "report",
            "--sysroot",
            sr.to_str().unwrap(),
            file.to_str().unwrap(),
        ];
        let text = hostside_ok(&[&args[..], &["--from", &from, "--to", &to]].concat());
        assert!(text.contains(&format!("  selected  {words} (")), "{text}");
    }
    // Adjacent windows split the recording: nothing lost, nothing counted twice.
    let cut = secs(ph.ab);
    let before = samples(&report(&file, sr, &["--to", &cut]));
    let after = samples(&report(&file, sr, &["--from", &cut]));
    assert_eq!(before + after, samples(&all));

    // The same filter on the folded export, the flame graph and the Firefox export.
    let (from, to) = (secs(b_win.0), secs(b_win.1));
    let r = report(&file, sr, &["--from", &from, "--to", &to]);
    let folded = scratch().join("filter_phases.folded");
    let svg = scratch().join("filter_phases.svg");
    let firefox = scratch().join("filter_phases.json");
    let common = [
        "--sysroot",
        sr.to_str().unwrap(),
        file.to_str().unwrap(),
        "--from",
        &from,
        "--to",
        &to,
    ];
    for (cmd, fmt, out) in [
        ("export", Some("collapsed"), &folded),
        ("flamegraph", None, &svg),
        ("export", Some("firefox"), &firefox),
    ] {
        let mut args = vec![cmd];
        if let Some(f) = fmt {
            args.extend(["--format", f]);
        }
        args.extend(common);
        args.extend(["-o", out.to_str().unwrap()]);
        hostside_ok(&args);
    }
    let text = std::fs::read_to_string(&folded).unwrap();
    let mut folded_total = 0;
    let mut folded_b = 0;
    for l in text.lines() {
        let (stack, n) = l.rsplit_once(' ').unwrap();
        let n: u64 = n.parse().unwrap();
        folded_total += n;
        if stack.split(';').any(|f| f == "phase_b") {
            folded_b += n;
        }
    }
    assert_eq!(folded_total, samples(&r));
    assert_eq!(folded_b, count(&r, "phase_b", "total"));
    let svg = std::fs::read_to_string(&svg).unwrap();
    let words = r["recording"]["filter"]["description"].as_str().unwrap();
    assert!(svg.contains(words), "the title names the window ({words})");
    assert!(
        svg.contains(&format!("all ({} samples", samples(&r))),
        "the flame graph's root is not {} samples",
        samples(&r)
    );
    let ff: Value = serde_json::from_slice(&std::fs::read(&firefox).unwrap()).unwrap();
    let ff_samples: u64 = ff["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["samples"]["length"].as_u64().unwrap())
        .sum();
    assert_eq!(ff_samples, samples(&r));

    // Page faults: touch_b's 1024 in phase_b's window, none before it.
    let faults = |win: (u64, u64)| {
        report(
            &file,
            sr,
            &[
                "--event",
                "minor-faults",
                "--from",
                &secs(win.0),
                "--to",
                &secs(win.1),
            ],
        )
    };
    let fb = faults(b_win);
    assert_eq!(fb["recording"]["lost_samples"], 0);
    assert_eq!(
        samples(&fb),
        raw_count(&records, start, 1, b_win, None, None)
    );
    let touched = count(&fb, "touch_b", "self");
    assert!(
        touched.abs_diff(1024) <= 10,
        "touch_b took {touched} faults, not 1024"
    );
    assert_eq!(count(&faults(a_win), "touch_b", "total"), 0);

    // Heap: each window holds only its phase's allocations; blocks from before a window are
    // not its allocations, and their frees there are ignored.
    let heap = |win: (u64, u64)| {
        report(
            &file,
            sr,
            &["--heap", "--from", &secs(win.0), "--to", &secs(win.1)],
        )
    };
    let ha = heap(a_win);
    assert_eq!(
        site_sum(&ha, "alloc_a", "allocations"),
        1000,
        "{:#}",
        ha["heap"]["sites"]
    );
    assert_eq!(site_sum(&ha, "alloc_a", "leaked_bytes"), 100_000);
    assert!(site(&ha, "alloc_b").is_empty());
    let hb = heap(b_win);
    assert!(site(&hb, "alloc_a").is_empty(), "{:#}", hb["heap"]["sites"]);
    assert_eq!(site_sum(&hb, "alloc_b", "allocations"), 550);
    assert_eq!(site_sum(&hb, "alloc_b", "temporary"), 500);
    assert_eq!(site_sum(&hb, "alloc_b", "leaked_bytes"), 50 * 200);
    assert_eq!(hb["heap"]["frees_outside"], 1000);
    assert_eq!(hb["heap"]["anomalies"]["unknown_frees"], 0);
    let h_all = heap_report_json(&file, sr);
    assert_eq!(site_sum(&h_all, "alloc_a", "leaked_bytes"), 0);
    assert_eq!(site_sum(&h_all, "alloc_b", "leaked_bytes"), 50 * 200);

    // Off-CPU, cut to the window: the sleeper waited exactly the window's length in phase_a's
    // middle, and the main thread, asleep in phase_c, exactly its window there.
    let off = |win: (u64, u64), extra: &[&str]| {
        let (f, t) = (secs(win.0), secs(win.1));
        let mut args = vec!["--off-cpu", "--from", &f, "--to", &t];
        args.extend_from_slice(extra);
        report(&file, sr, &args)
    };
    let mid_a = (ph.ab / 4, ph.ab * 3 / 4);
    let w = off_cpu_thread(&off(mid_a, &[]), ph.sleeper);
    assert_eq!(w["blocked_ns"], mid_a.1 - mid_a.0, "{w}");
    assert_eq!(w["wall_ns"], mid_a.1 - mid_a.0, "{w}");
    let in_c = (ph.bc + MARGIN_NS, ph.end - MARGIN_NS);
    let pid = all["cpu"]["threads"][0]["pid"].as_u64().unwrap() as u32;
    let m = off_cpu_thread(&off(in_c, &[]), pid);
    assert_eq!(m["blocked_ns"], in_c.1 - in_c.0, "{m}");
    // The whole run: the sleeper waited far longer than the window.
    let whole = off_cpu_thread(&report(&file, sr, &["--off-cpu"]), ph.sleeper);
    assert!(whole["blocked_ns"].as_u64().unwrap() > ph.bc, "{whole}");
    // --tid keeps only the sleeper.
    let t = off(mid_a, &["--tid", &ph.sleeper.to_string()]);
    assert_eq!(
        t["off_cpu"]["threads"].as_array().unwrap().len(),
        1,
        "{:#}",
        t["off_cpu"]
    );
}

/// The samples of one thread, one process: exactly the raw records of that thread or process.
#[test]
fn threads_and_processes_are_selected_by_id() {
    let p = build("threads.c", "filter_threads", C_FP);
    let file = scratch().join("filter_threads.zst");
    record(&file, &[], &[p.board.to_str().unwrap(), "300"]);
    let (start, records) = raw(&file);
    let sr = p.sysroot.as_path();
    let all = report(&file, sr, &[]);
    let threads = all["cpu"]["threads"].as_array().unwrap();
    let worker3 = threads
        .iter()
        .find(|t| t["comm"] == "worker3")
        .unwrap_or_else(|| panic!("no worker3: {threads:?}"));
    let (pid, tid) = (
        worker3["pid"].as_u64().unwrap() as u32,
        worker3["tid"].as_u64().unwrap() as u32,
    );
    let r = report(&file, sr, &["--tid", &tid.to_string()]);
    let n = samples(&r);
    let everything = (0, u64::MAX);
    assert_eq!(
        n,
        raw_count(&records, start, 0, everything, None, Some(tid))
    );
    assert_eq!(n, worker3["samples"].as_u64().unwrap());
    let only: Vec<&Value> = r["cpu"]["threads"].as_array().unwrap().iter().collect();
    assert_eq!(only.len(), 1, "{only:?}");
    assert_eq!(only[0]["tid"], tid);
    assert_eq!(r["recording"]["filter"]["tid"], tid);
    assert!(count(&r, "spin", "total") * 100 >= n * 95, "{r:#}");
    // --pid with its own thread: the same samples.
    let both = report(
        &file,
        sr,
        &["--pid", &pid.to_string(), "--tid", &tid.to_string()],
    );
    assert_eq!(samples(&both), n);

    // A forked child that execs, and its parent.
    let child = build("cpu_split.c", "filter_child", C_FP);
    let parent = build("forkexec.c", "filter_parent", C_FP);
    let sysroot = parent.sysroot.clone();
    let dest = sysroot.join(child.board.strip_prefix("/").unwrap());
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(&child.unstripped, &dest).unwrap();
    let file = scratch().join("filter_forkexec.zst");
    let args = [
        parent.board.to_str().unwrap(),
        child.board.to_str().unwrap(),
        "300",
    ];
    record(&file, &[], &args);
    let (start, records) = raw(&file);
    let all = report(&file, &sysroot, &[]);
    let pids: std::collections::BTreeSet<u32> = all["cpu"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["pid"].as_u64().unwrap() as u32)
        .collect();
    assert_eq!(pids.len(), 2, "{pids:?}");
    let mut total = 0;
    for pid in pids {
        let r = report(&file, &sysroot, &["--pid", &pid.to_string()]);
        let n = samples(&r);
        assert_eq!(
            n,
            raw_count(&records, start, 0, everything, Some(pid), None)
        );
        total += n;
        // Each process holds its own work only.
        let (mine, theirs) = if count(&r, "parent_work", "total") > 0 {
            ("parent_work", "hot_a")
        } else {
            ("hot_a", "parent_work")
        };
        assert!(count(&r, mine, "total") > 0, "{r:#}");
        assert_eq!(count(&r, theirs, "total"), 0, "{theirs} in pid {pid}");
    }
    assert_eq!(total, samples(&all));
}

/// Bad filters exit 2 with one line that says what is wrong; nothing panics.
#[test]
fn bad_filters_are_clear_errors() {
    let p = build("cpu_split.c", "filter_bad", C_FP);
    let file = scratch().join("filter_bad.zst");
    record(&file, &[], &[p.board.to_str().unwrap(), "50"]);
    let f = file.to_str().unwrap();
    for (args, says) in [
        (
            vec!["report", f, "--from", "2", "--to", "1"],
            "is not before --to",
        ),
        (
            vec!["report", f, "--from", "1", "--to", "1"],
            "is not before --to",
        ),
        (vec!["report", f, "--from", "-1"], "negative"),
        (vec!["report", f, "--to", "soon"], "not a time in seconds"),
        (vec!["report", f, "--from", "1000"], "past the end"),
        (
            vec!["report", f, "--pid", "999999999"],
            "recorded no process 999999999",
        ),
        (
            vec!["report", f, "--tid", "999999999"],
            "recorded no thread 999999999",
        ),
        (
            vec!["flamegraph", f, "--from", "1000", "-o", "/dev/null"],
            "past the end",
        ),
        (
            vec![
                "export",
                f,
                "--format",
                "pprof",
                "--pid",
                "999999999",
                "-o",
                "/dev/null",
            ],
            "no process",
        ),
        (
            vec!["html", f, "--to", "-0.5", "-o", "/dev/null"],
            "negative",
        ),
    ] {
        let o = Command::new(hostside()).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
