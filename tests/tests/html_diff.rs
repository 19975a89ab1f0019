//! Issue 15: `hostside html OLD NEW`, the comparison page, rendered in headless Chromium
//! (tests/browser/diff.js over the DevTools protocol). Its numbers must be exactly those of
//! `hostside diff OLD NEW --json`, in the same order; on `split_ab.c` run 3:1 then 1:1 hot_a's
//! share falls by 25 points and hot_b's rises by 25 (±5), coloured blue and red, in the table
//! and in the differential flame graph; on `heap_truth.c` with half the churn, the churn site
//! lost exactly the allocations it no longer makes.

use std::path::{Path, PathBuf};

use crossprof_tests::consumers::diff_page_check;
use crossprof_tests::*;
use serde_json::Value;

fn diff_json(old: &Path, new: &Path, sysroot: &Path) -> Value {
    serde_json::from_str(&hostside_ok(&[
        "diff",
        "--json",
        "--top",
        "1000",
        "--sysroot",
        sysroot.to_str().unwrap(),
        old.to_str().unwrap(),
        new.to_str().unwrap(),
    ]))
    .unwrap()
}

fn page(old: &Path, new: &Path, sysroot: &Path, tag: &str) -> Value {
    let out = scratch().join(format!("{tag}.html"));
    hostside_ok(&[
        "html",
        "--sysroot",
        sysroot.to_str().unwrap(),
        old.to_str().unwrap(),
        new.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let r = diff_page_check(&out);
    assert_eq!(r["errors"].as_array().unwrap().len(), 0, "{r:#}");
    assert_eq!(r["requests"].as_array().unwrap().len(), 0, "{r:#}");
    r
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The page carries the shares `diff --json` prints, to the last bit; serde_json's float
/// parser (without its float_roundtrip feature) may read them one unit in the last place
/// apart, so compare to 1e-12 of the value.
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
}

fn recorded(p: &Program, tag: &str, args: &[&str], extra: &[&str]) -> PathBuf {
    let out = scratch().join(format!("{tag}.zst"));
    let mut cmd = vec![p.board.to_str().unwrap()];
    cmd.extend_from_slice(args);
    record(&out, extra, &cmd);
    out
}

#[test]
fn cpu_comparison_matches_diff_json() {
    let p = build("split_ab.c", "html_diff_cpu", C_FP);
    // About 3000 samples each (3 s of CPU): split_ab's rounds vary in length, so each sample
    // falls in hot_a or hot_b as by a coin toss, and the difference of two shares of N samples
    // has a standard deviation of about 65/sqrt(N) points (1.2 here, 2.4 at 770 samples).
    let old = recorded(&p, "html_diff_old", &["3", "1", "2800"], &[]);
    let new = recorded(&p, "html_diff_new", &["1", "1", "5600"], &[]);
    let d = diff_json(&old, &new, &p.sysroot);
    let r = page(&old, &new, &p.sysroot, "html_diff_cpu");
    let title = r["title"].as_str().unwrap();
    assert!(title.contains("html_diff_old.zst") && title.contains("html_diff_new.zst"));

    // Every function, in diff's order, with diff's exact shares.
    let rows = r["functions"].as_array().unwrap();
    let funcs = d["functions"].as_array().unwrap();
    assert_eq!(rows.len(), funcs.len(), "{rows:#?}\n{funcs:#?}");
    for (row, fun) in rows.iter().zip(funcs) {
        assert_eq!(row["name"], fun["function"], "order differs: {rows:#?}");
        for (col, field) in [
            ("old_self", "old_self_pct"),
            ("new_self", "new_self_pct"),
            ("old_total", "old_total_pct"),
            ("new_total", "new_total_pct"),
        ] {
            let (page, json) = (f(&row[col]), f(&fun[field]));
            assert!(
                same(page, json),
                "{col} of {}: {page} {json}",
                fun["function"]
            );
        }
        let delta = f(&fun["new_self_pct"]) - f(&fun["old_self_pct"]);
        assert!(same(f(&row["delta_self"]), delta), "{row} {fun}");
        // Issue 28: absolute cost and the significance mark, as diff --json has them.
        for (col, field) in [
            ("old_samples", "old_self_samples"),
            ("new_samples", "new_self_samples"),
            ("old_ns", "old_self_ns"),
            ("new_ns", "new_self_ns"),
        ] {
            assert_eq!(row[col].as_u64(), fun[field].as_u64(), "{col}: {row} {fun}");
        }
        assert!(same(f(&row["p_value"]), f(&fun["p_value"])), "{row} {fun}");
        let mark = if fun["significant"] == true { "*" } else { "" };
        assert_eq!(row["significant"], mark, "{row} {fun}");
    }
    // 75:25 to 50:50 with hot_a's work a third less: both hot rows changed beyond noise.
    for name in ["hot_a", "hot_b"] {
        let fun = funcs.iter().find(|x| x["function"] == name).unwrap();
        assert_eq!(fun["significant"], true, "{fun}");
    }
    let legend = r["legend"].as_str().unwrap_or("");
    assert!(legend.contains("Benjamini-Hochberg"), "{legend}");
    // The ground truth: 75:25 became 50:50.
    let row = |name: &str| {
        rows.iter()
            .find(|x| x["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {rows:#?}"))
    };
    let (a, b) = (row("hot_a"), row("hot_b"));
    assert!((f(&a["delta_self"]) + 25.0).abs() <= 5.0, "{a}");
    assert!((f(&b["delta_self"]) - 25.0).abs() <= 5.0, "{b}");
    assert!(
        a["delta_self_colour"]
            .as_str()
            .unwrap()
            .starts_with("rgba(40, 90, 214"),
        "{a}"
    );
    assert!(
        b["delta_self_colour"]
            .as_str()
            .unwrap()
            .starts_with("rgba(214, 40, 40"),
        "{b}"
    );
    // The differential flame graph: the same changes on the frames.
    let flame = r["flame"].as_array().unwrap();
    let delta = |name: &str| {
        flame
            .iter()
            .find(|x| x[0] == name)
            .map(|x| f(&x[1]))
            .unwrap_or_else(|| panic!("{name} not in the flame graph: {flame:?}"))
    };
    assert!((delta("hot_a") + 25.0).abs() <= 5.0);
    assert!((delta("hot_b") - 25.0).abs() <= 5.0);
    assert!(delta("main").abs() <= 5.0);
    // Sorting by the change of total share puts the grown function first.
    assert_eq!(r["by_delta_total"][0], "hot_b", "{r:#}");

    // --pid applies to both recordings, as in `diff`: one neither recording saw is refused
    // with a reason.
    let o = std::process::Command::new(hostside())
        .args([
            "html",
            old.to_str().unwrap(),
            new.to_str().unwrap(),
            "--pid",
            "1",
            "-o",
            "/dev/null",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("recorded no process 1;"), "{err}");
}

#[test]
fn heap_comparison_matches_diff_json() {
    let p = build("heap_truth.c", "html_diff_heap", &["-O2"]);
    add_system_libs(&p.sysroot, &p.board);
    let old = recorded(&p, "html_diff_heap_old", &["20000"], &["--heap"]);
    let new = recorded(&p, "html_diff_heap_new", &["10000"], &["--heap"]);
    let d = diff_json(&old, &new, &p.sysroot);
    let r = page(&old, &new, &p.sysroot, "html_diff_heap");
    let h = &d["heap"];
    for pair in r["heap_delta"].as_array().unwrap() {
        let key = pair[0].as_str().unwrap();
        assert_eq!(pair[1].as_i64(), h["delta"][key].as_i64(), "{key}");
    }
    let rows = r["heap_sites"].as_array().unwrap();
    let sites = h["sites"].as_array().unwrap();
    assert_eq!(rows.len(), sites.len(), "{rows:#?}\n{sites:#?}");
    for (row, site) in rows.iter().zip(sites) {
        assert_eq!(row["name"], site["function"]);
        for k in ["allocations", "temporary", "peak_bytes", "leaked_bytes"] {
            for side in ["old", "new", "delta"] {
                assert_eq!(
                    row[format!("{side}_{k}")].as_i64(),
                    site[side][k].as_i64(),
                    "{side} {k} of {}",
                    site["function"]
                );
            }
        }
    }
    // Half the churn: 10,000 fewer (temporary) allocations there, nothing else changed.
    let churn = rows.iter().find(|x| x["name"] == "churn").unwrap();
    assert_eq!(churn["delta_allocations"].as_i64(), Some(-10_000));
    assert_eq!(churn["delta_temporary"].as_i64(), Some(-10_000));
    assert!(rows.iter().all(|x| x["name"] != "leak_some"), "{rows:#?}");
}
