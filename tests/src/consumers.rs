//! The real consumers of hostside's exports, driven from the tests: `go tool pprof`, and the
//! npm packages (speedscope, ajv, puppeteer-core) that `tests/browser/setup.sh` installs with
//! headless Chromium.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::root;

/// The npm directory that `scripts/test-setup.sh` filled (through `tests/browser/setup.sh`), found
/// once per test process with `setup.sh --check`, which installs nothing: a test never changes the
/// machine, so a missing piece fails here and names the setup command.
pub fn npm_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let o = Command::new(root().join("tests/browser/setup.sh"))
            .arg("--check")
            .output()
            .expect("run tests/browser/setup.sh");
        assert!(
            o.status.success(),
            "tests/browser/setup.sh failed:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        PathBuf::from(String::from_utf8(o.stdout).expect("utf-8").trim())
    })
}

/// Runs `go tool pprof ARGS... FILE` with symbolization off (the profile is symbolized
/// already; pprof must not look for the binaries) and returns its standard output.
pub fn go_pprof(args: &[&str], file: &Path) -> String {
    npm_dir(); // fails with the setup command when golang-go is missing
    let o = Command::new("go")
        .args(["tool", "pprof", "-symbolize=none"])
        .args(args)
        .arg(file)
        .env("PPROF_TMPDIR", crate::scratch())
        .output()
        .expect("run go tool pprof");
    assert!(
        o.status.success(),
        "go tool pprof {args:?} {} failed:\n{}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("utf-8")
}

/// `go tool pprof -raw`: the sample types and each sample's values, as pprof parsed them.
pub fn go_pprof_raw(file: &Path) -> (Vec<String>, Vec<Vec<i64>>) {
    let text = go_pprof(&["-raw"], file);
    let mut lines = text.lines().skip_while(|l| !l.starts_with("Samples:"));
    lines.next();
    let types: Vec<String> = lines
        .next()
        .unwrap_or_else(|| panic!("no sample types in:\n{text}"))
        .split_whitespace()
        .map(|t| t.trim_end_matches("[dflt]").to_string())
        .collect();
    let mut samples = Vec::new();
    for l in lines {
        if l.starts_with("Locations") {
            break;
        }
        let Some((values, _locations)) = l.split_once(':') else {
            continue;
        };
        let v: Option<Vec<i64>> = values.split_whitespace().map(|x| x.parse().ok()).collect();
        if let Some(v) = v.filter(|v| v.len() == types.len()) {
            samples.push(v);
        }
    }
    (types, samples)
}

/// `go tool pprof -top` rows: (flat, cum, name), values in the sample type's unit.
pub fn go_pprof_top(file: &Path, sample_index: &str) -> Vec<(f64, f64, String)> {
    let text = go_pprof(
        &[
            "-top",
            "-nodecount=1000",
            &format!("-sample_index={sample_index}"),
        ],
        file,
    );
    text.lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 6 {
                return None;
            }
            let num = |s: &str| -> Option<f64> {
                let digits = s.trim_end_matches(|c: char| c.is_ascii_alphabetic());
                digits.parse().ok()
            };
            Some((num(f[0])?, num(f[3])?, f[5..].join(" ")))
        })
        .collect()
}

/// Runs `tests/browser/speedscope.js` on a speedscope file: schema validation and the
/// sandwich view of speedscope's own build in headless Chromium.
pub fn speedscope_check(file: &Path) -> Value {
    let o = Command::new("node")
        .arg(root().join("tests/browser/speedscope.js"))
        .arg(npm_dir())
        .arg(file)
        .output()
        .expect("run node");
    assert!(
        o.status.success(),
        "speedscope.js failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("speedscope.js prints JSON")
}

/// A duration as speedscope prints it (`614.61ms`, `1.20s`, `3.00µs`, `0.00ns`), in ns.
pub fn speedscope_ns(text: &str) -> f64 {
    let v = text.split_whitespace().next().unwrap_or("");
    for (unit, scale) in [
        ("ns", 1.0),
        ("µs", 1e3),
        ("us", 1e3),
        ("ms", 1e6),
        ("s", 1e9),
    ] {
        if let Some(n) = v.strip_suffix(unit) {
            if let Ok(x) = n.parse::<f64>() {
                return x * scale;
            }
        }
    }
    panic!("not a speedscope duration: {text:?}")
}

/// Runs `tests/browser/report.js` on a `hostside html` report: the rendered DOM before and
/// after selecting the hottest function and dragging a time range, and a screenshot when
/// `screenshot` is given.
pub fn report_check(file: &Path, screenshot: Option<&Path>) -> Value {
    browser_check("report.js", file, screenshot, None)
}

/// [`report_check`] dragging from `from` to `to` (fractions of the timeline's width) instead
/// of from 20% to 60%.
pub fn report_check_range(file: &Path, (from, to): (f64, f64)) -> Value {
    browser_check(
        "report.js",
        file,
        None,
        Some(("CROSSPROF_DRAG", format!("{from},{to}"))),
    )
}

/// [`report_check`] after clicking thread `tid`'s label on the timeline (only that thread),
/// instead of selecting a function and a time range.
pub fn report_check_thread(file: &Path, tid: u32) -> Value {
    browser_check(
        "report.js",
        file,
        None,
        Some(("CROSSPROF_THREAD", tid.to_string())),
    )
}

/// Runs `tests/browser/diff.js` on a `hostside html OLD NEW` page: its tables with the
/// exact values of their cells, the differential flame graph's frames and changes.
pub fn diff_page_check(file: &Path) -> Value {
    browser_check("diff.js", file, None, None)
}

/// Runs the headless-Chromium driver `tests/browser/SCRIPT` on a page and parses the JSON it
/// prints; `env` is one variable to set for it (what to do on the page).
fn browser_check(
    script: &str,
    file: &Path,
    screenshot: Option<&Path>,
    env: Option<(&str, String)>,
) -> Value {
    let mut cmd = Command::new("node");
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    cmd.arg(root().join("tests/browser").join(script))
        .arg(npm_dir())
        .arg(file);
    if let Some(s) = screenshot {
        cmd.arg(s);
    }
    let o = cmd.output().expect("run node");
    assert!(
        o.status.success(),
        "{script} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("report.js prints JSON")
}

/// `hostside html --sysroot SYSROOT RECORDING -o TAG.html` in the scratch directory; the page.
pub fn html_page(recording: &Path, sysroot: &Path, tag: &str) -> PathBuf {
    let out = crate::scratch().join(format!("{tag}.html"));
    crate::hostside_ok(&[
        "html",
        "--sysroot",
        sysroot.to_str().unwrap(),
        recording.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    out
}

/// The row named `name` of a table [`report_check`] read.
pub fn page_row<'a>(rows: &'a Value, name: &str) -> &'a Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in the page's table: {rows:#}"))
}

/// The page's function table `rows` lists exactly the report's `funcs`, each with the report's
/// self and total cost (fields `self_key` and `total_key`: `self`/`total` for samples,
/// `self_ns`/`total_ns` for off-CPU time).
pub fn assert_same_rows(rows: &Value, funcs: &Value, self_key: &str, total_key: &str) {
    let list = rows.as_array().unwrap();
    let funcs = funcs.as_array().unwrap();
    assert_eq!(list.len(), funcs.len(), "page {list:#?} report {funcs:#?}");
    for f in funcs {
        let name = f["function"].as_str().unwrap();
        let r = page_row(rows, name);
        assert_eq!(
            page_num(&r["self"]),
            f[self_key].as_u64().unwrap(),
            "{name}: {r}"
        );
        assert_eq!(
            page_num(&r["total"]),
            f[total_key].as_u64().unwrap(),
            "{name}: {r}"
        );
    }
}

/// A table cell that shows a whole number.
pub fn page_num(v: &Value) -> u64 {
    v.as_str().unwrap().parse().unwrap()
}
