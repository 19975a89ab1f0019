//! `hostside diff --from/--to/--pid/--tid`: the filter applies to both recordings, so each
//! side's numbers are exactly those of `report` under the same filter (issue 15), on
//! `tests/programs/phases.c`, whose phases are known in time.

use std::process::Command;

use crossprof_tests::phases::*;
use crossprof_tests::*;
use serde_json::Value;

/// `diff --from/--to` compares like windows: each side's numbers are exactly those of
/// `report --from/--to` on that recording, CPU and heap; `--pid` applies to both recordings.
#[test]
fn diff_compares_like_windows() {
    let p = build("phases.c", "filter_diff", C_FP);
    add_system_libs(&p.sysroot, &p.board);
    let sr = p.sysroot.as_path();
    let run = |tag: &str| {
        let file = scratch().join(format!("{tag}.zst"));
        let f = file.to_str().unwrap();
        let args = ["--heap", "--call-graph", "fp", "--out", f, "--"];
        let o = run_rec(&[&args[..], &[p.board.to_str().unwrap(), "1000"]].concat());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let ph = phases(&o.stderr, raw(&file).0);
        (file, ph)
    };
    let (old, po) = run("filter_diff_old");
    let (new, pn) = run("filter_diff_new");
    let (o, n) = (old.to_str().unwrap(), new.to_str().unwrap());
    let diff = |extra: &[&str]| {
        let args = ["diff", "--json", "--top", "1000", "--sysroot"];
        json(&[&args[..], &[sr.to_str().unwrap(), o, n], extra].concat())
    };
    // Inside phase_a and inside phase_b on both runs: from phase_a's start as the programs
    // printed it, after their start-up's allocations however long a loaded machine made it
    // (heap events carry a clock that lags, never one that leads).
    let a_win = (po.start.max(pn.start), po.ab.min(pn.ab) - MARGIN_NS);
    let b_win = (po.ab.max(pn.ab) + MARGIN_NS, po.bc.min(pn.bc) - MARGIN_NS);
    assert!(
        b_win.0 < b_win.1,
        "the runs' phases are too far apart: {b_win:?}"
    );
    for (win, hot, cold, allocations) in [
        (a_win, "phase_a", "phase_b", 1000),
        (b_win, "phase_b", "phase_a", 550),
    ] {
        let (from, to) = (secs(win.0), secs(win.1));
        let window = ["--from", from.as_str(), "--to", to.as_str()];
        let d = diff(&window);
        let row = |name: &str| {
            d["functions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["function"] == name)
                .cloned()
        };
        for (side, file) in [("old", &old), ("new", &new)] {
            let r = report(file, sr, &window);
            let h = report(file, sr, &[&["--heap"][..], &window].concat());
            assert_eq!(d[side]["samples"], samples(&r), "{side} {from}..{to}");
            assert_eq!(d[side]["filter"], r["recording"]["filter"], "{side}");
            let hot_row = row(hot).unwrap_or_else(|| panic!("no {hot}: {d:#}"));
            for field in ["self", "total"] {
                // Shares of the same sample counts: back to the count exactly, and the share
                // to 1e-12 (serde_json may read a float one unit in the last place apart).
                let pct = hot_row[format!("{side}_{field}_pct")].as_f64().unwrap();
                let (k, n) = (count(&r, hot, field), samples(&r));
                assert_eq!((pct * n as f64 / 100.0).round() as u64, k, "{side} {field}");
                let want = 100.0 * k as f64 / n as f64;
                assert!(
                    (pct - want).abs() <= 1e-12 * want,
                    "{side} {field} {pct} {want}"
                );
            }
            if let Some(c) = row(cold) {
                assert_eq!(c[format!("{side}_total_pct")].as_f64(), Some(0.0), "{c}");
            }
            for field in ["allocations", "temporary", "peak_bytes", "leaked_bytes"] {
                assert_eq!(d["heap"][side][field], h["heap"][field], "{side} {field}");
            }
            assert_eq!(d["heap"][side]["allocations"], allocations, "{side}");
        }
    }
    // Unfiltered, each side holds both phases' allocations and the start-up's.
    let all = diff(&[]);
    assert_eq!(all["old"]["filter"], Value::Null);
    for (side, file) in [("old", &old), ("new", &new)] {
        let whole = heap_report_json(file, sr)["heap"]["allocations"].clone();
        assert_eq!(all["heap"][side]["allocations"], whole, "{side}");
        assert!(whole.as_u64().unwrap() >= 1550, "{side}: {whole}");
    }
    // --pid applies to both: the old run's process is not in the new one.
    let pid = report(&old, sr, &[])["cpu"]["threads"][0]["pid"].to_string();
    let args = [
        "diff",
        "--sysroot",
        sr.to_str().unwrap(),
        o,
        n,
        "--pid",
        &pid,
    ];
    let out = Command::new(hostside()).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{n} recorded no process {pid}")),
        "{err}"
    );
    // The text diff says what it compared.
    let (from, to) = (secs(a_win.0), secs(a_win.1));
    let args = [
        "diff",
        "--sysroot",
        sr.to_str().unwrap(),
        o,
        n,
        "--from",
        &from,
        "--to",
        &to,
    ];
    let text = hostside_ok(&args);
    let words = report(&old, sr, &["--from", &from, "--to", &to])["recording"]["filter"]
        ["description"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        text.contains(&format!("selected in both: {words}")),
        "{text}"
    );
}
