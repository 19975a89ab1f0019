//! Issue 3, acceptance 1: heap numbers from `rec --heap` + `hostside report --heap` equal
//! `heaptrack_print`'s on the same binaries, per site and in total, and the sites carry the
//! right file:line although the board ran a stripped copy (symbols come from the sysroot).
//!
//! heaptrack runs the unstripped copy (it symbolizes on the target, so it needs the debug info
//! there); both copies have the same code and build-id. heaptrack's own preload library links
//! libstdc++, whose start-up allocation (the exception emergency pool) heaptrack records even in
//! a C program: sites in modules the program does not load are heaptrack's, not the program's,
//! and are left out of the comparison.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crossprof_tests::heap_parity::{differences, Strictness};
use crossprof_tests::heaptrack::{basename, heaptrack, loaded_modules, Extra, Heaptrack, HtSite};
use crossprof_tests::*;
use serde_json::Value;

/// `report --heap --json`, with the host's detached C library debug info (libc6-dbg) when it is
/// installed, as heaptrack uses it: then the C library's frames have file:line on both sides.
fn report_with_debug_dir(recording: &Path, sysroot: &Path) -> Value {
    let mut args = vec![
        "report",
        "--heap",
        "--json",
        "--top",
        "100000",
        "--sysroot",
        sysroot.to_str().unwrap(),
    ];
    if Path::new("/usr/lib/debug/.build-id").is_dir() {
        args.extend(["--debug-dir", "/usr/lib/debug"]);
    }
    args.push(recording.to_str().unwrap());
    serde_json::from_str(&hostside_ok(&args)).expect("valid JSON")
}

/// A program run both ways.
struct Compared {
    program: Program,
    report: Value,
    ht: Heaptrack,
    /// heaptrack's sites that belong to the program (not to heaptrack's own libraries).
    own: Vec<HtSite>,
    /// What heaptrack counted in modules the program does not load.
    extra: Extra,
    recording: PathBuf,
}

fn compare(src: &str, tag: &str, args: &[&str]) -> Compared {
    let program = build(src, tag, &["-O2"]);
    add_system_libs(&program.sysroot, &program.board);
    let recording = scratch().join(format!("{tag}.zst"));
    let mut cmd = vec![program.board.to_str().unwrap()];
    cmd.extend_from_slice(args);
    record(&recording, &["--heap"], &cmd);
    let report = report_with_debug_dir(&recording, &program.sysroot);
    let ht = heaptrack(
        &program.unstripped,
        args,
        &scratch().join(format!("{tag}.heaptrack")),
    );
    let (own, extra) = ht.split(&loaded_modules(&program.unstripped));
    Compared {
        program,
        report,
        ht,
        own,
        extra,
        recording,
    }
}

fn heap(c: &Compared) -> &Value {
    let h = &c.report["heap"];
    assert!(h.is_object(), "no heap section: {:#}", c.report);
    h
}

fn u(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no {field} in {v}"))
}

/// Our site whose function is `function`, at the marker line in the program's source.
fn site_at<'a>(c: &'a Compared, function: &str, marker: &str) -> &'a Value {
    let line = marker_line(&c.program.source, marker) as u64;
    heap(c)["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["function"].as_str() == Some(function))
        .inspect(|&s| {
            assert_eq!(s["line"].as_u64(), Some(line), "{s}");
            assert_eq!(
                s["file"].as_str().map(basename),
                c.program.source.file_name().and_then(|f| f.to_str()),
                "{s}"
            );
            assert_eq!(s["module"].as_str(), c.program.board.to_str(), "{s}");
        })
        .unwrap_or_else(|| panic!("no site {function}: {:#}", heap(c)["sites"]))
}

/// Totals and every site of the program equal heaptrack_print's, heaptrack's own extra sites
/// taken out. Collects every difference before failing, so one run shows the whole picture.
fn assert_equal_to_heaptrack(c: &Compared, strict: Strictness) {
    let h = heap(c);
    let diffs = differences(h, &c.ht, &c.own, &c.extra, strict);
    assert!(
        diffs.is_empty(),
        "differences from heaptrack_print:\n  {}\nheaptrack's extra sites: {:?}\nour sites: {:#}",
        diffs.join("\n  "),
        c.extra,
        h["sites"]
    );
}

/// Everything compared: single-threaded programs.
const EXACT: Strictness = Strictness {
    temporary: true,
    peak: true,
};

fn c_program() -> &'static Compared {
    static C: OnceLock<Compared> = OnceLock::new();
    C.get_or_init(|| compare("heap_truth.c", "heap_c", &[]))
}

#[test]
fn c_program_equals_heaptrack_per_site_and_in_total() {
    let c = c_program();
    assert!(c.report["recording"]["complete"].as_bool().unwrap());
    assert_equal_to_heaptrack(c, EXACT);
    // The ground truth itself, named from the sysroot.
    let churn = site_at(c, "churn", "churn");
    assert_eq!(u(churn, "allocations"), 2_000_000);
    assert_eq!(u(churn, "temporary"), 2_000_000);
    assert_eq!(u(churn, "leaked_allocations"), 0);
    assert!((16..80).contains(&u(churn, "peak_bytes")), "{churn}");
    let leak = site_at(c, "leak_some", "leak");
    assert_eq!(u(leak, "allocations"), 20_000);
    assert_eq!(u(leak, "leaked_bytes"), 2_000_000);
    assert_eq!(u(leak, "leaked_allocations"), 20_000);
    assert_eq!(u(leak, "peak_bytes"), 2_000_000);
    let exact: u64 =
        c.ht.leaked_flame
            .iter()
            .filter(|(stack, _)| stack.contains("leak_some"))
            .map(|(_, v)| v)
            .sum();
    assert_eq!(exact, 2_000_000);
    let grow = site_at(c, "grow", "grow");
    assert_eq!(u(grow, "allocations"), 1000);
    // Each resize frees the block allocated just before it, and the final free follows the
    // last resize: heaptrack counts all 1000 as temporary.
    assert_eq!(u(grow, "temporary"), 1000);
    assert_eq!(u(grow, "peak_bytes"), 64_000);
    let stack: Vec<&str> = leak["stack"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    assert_eq!(stack, ["leak_some", "main"]);
    // The peak holds the leaks plus the largest realloc'd buffer and stdio's buffer; it
    // equals heaptrack's exactly once heaptrack's own libstdc++ pool is taken out.
    let h = heap(c);
    let peak = u(h, "peak_bytes");
    assert!((2_064_000..2_064_000 + 4096).contains(&peak), "{h}");
    assert_eq!(peak, c.ht.peak_bytes - c.extra.peak_bytes);
    // heaptrack's extra: the emergency pool of the libstdc++ its preload library links, one
    // allocation live from start-up to exit, which this C program never makes.
    assert_eq!(c.extra.allocations, 1, "{:?}", c.extra);
    assert!(c.extra.peak_bytes > 0, "{:?}", c.extra);
    assert!(
        c.extra.sites.iter().all(|s| s.module.contains("libstdc++")),
        "{:?}",
        c.extra
    );
}

/// `report --fail-on-leak`: exit status 0 up to the limit, 1 above it with the leak sites on
/// standard error (and the report, text or JSON, still on standard output).
#[test]
fn fail_on_leak_exits_1_above_the_limit_and_names_the_sites() {
    let c = c_program();
    let leaked = u(heap(c), "leaked_bytes");
    assert_eq!(leaked, 2_000_000, "{:#}", heap(c));
    let sysroot = c.program.sysroot.to_str().unwrap();
    let rec = c.recording.to_str().unwrap();
    let run = |extra: &[&str]| {
        let o = Command::new(hostside())
            .args(["report", "--sysroot", sysroot])
            .args(extra)
            .arg(rec)
            .output()
            .expect("run hostside");
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        (o.status.code(), out, err)
    };
    // At the limit, and with a limit in units above it: no failure, no message.
    for limit in ["2000000", "2M", "2MiB"] {
        let (code, out, err) = run(&["--fail-on-leak", limit]);
        assert_eq!(code, Some(0), "{limit}: {err}");
        assert!(err.is_empty(), "{limit}: {err}");
        assert!(out.contains("total memory leaked            2.00 MB in 20000 blocks"));
    }
    let line = marker_line(&c.program.source, "leak");
    let main_line = marker_line(&c.program.source, "main_leak");
    for extra in [
        &["--fail-on-leak", "1999999"][..],
        &["--fail-on-leak", "1MiB", "--json"],
    ] {
        let (code, out, err) = run(extra);
        assert_eq!(code, Some(1), "{extra:?}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert!(
            lines[0].starts_with("hostside: 2.00 MB (2000000 B) leaked in 20000 blocks"),
            "{err}"
        );
        assert_eq!(lines[1], "top leak sites (1 of 1):", "{err}");
        let site: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(
            site,
            [
                "2.00",
                "MB",
                "20000",
                "leak_some",
                &format!("heap_truth.c:{line}"),
                "(heap_c)"
            ],
            "{err}"
        );
        assert_eq!(
            lines[4].trim(),
            format!("<- main (heap_truth.c:{main_line})"),
            "{err}"
        );
        // The report itself is unchanged.
        if extra.contains(&"--json") {
            let v: Value = serde_json::from_str(&out).expect("JSON report");
            assert_eq!(v["heap"]["leaked_bytes"].as_u64(), Some(2_000_000));
        } else {
            assert!(out.contains("Memory leaked"), "{out}");
        }
    }
    // A limit that is not a byte count is a usage error.
    let (code, _, err) = run(&["--fail-on-leak", "lots"]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn cpp_program_equals_heaptrack_through_operator_new() {
    let c = compare("heap_truth.cpp", "heap_cpp", &[]);
    assert_equal_to_heaptrack(&c, EXACT);
    // operator new is skipped: the site is the code that called it.
    let news = site_at(&c, "news(int)", "new");
    assert_eq!(
        (u(news, "allocations"), u(news, "temporary")),
        (100_000, 100_000)
    );
    let arrays = site_at(&c, "arrays(int)", "array");
    assert_eq!(u(arrays, "allocations"), 100_000);
    let leaks = site_at(&c, "leaks(int)", "leak");
    assert_eq!(u(leaks, "leaked_allocations"), 1000);
    assert_eq!(u(leaks, "leaked_bytes"), 32_000);
    // std::string, std::vector and std::map sites exist and are not operator new.
    let sites = heap(&c)["sites"].as_array().unwrap();
    // libstdc++ allocates its exception pool while it initializes, before the interposer's
    // own initializer runs: that allocation still gets its stack, and the pool is freed at
    // exit through __gnu_cxx::__freeres as heaptrack does, so it is no leak.
    assert!(
        sites.iter().all(|s| s["function"] != "[unknown stack]"),
        "{sites:#?}"
    );
    assert_eq!(u(heap(&c), "leaked_bytes"), 32_000, "{:#}", heap(&c));
    assert!(sites
        .iter()
        .all(|s| !s["function"].as_str().unwrap().starts_with("operator new")));
    assert!(
        sites
            .iter()
            .any(|s| s["function"].as_str().unwrap().contains("basic_string")),
        "{sites:#?}"
    );
}

#[test]
fn threads_allocating_concurrently_lose_nothing() {
    let rounds = 50_000u64;
    let c = compare("heap_threads.c", "heap_threads", &["50000"]);
    // Which free follows which allocation depends on how the threads interleave, which differs
    // between the heaptrack run and ours: temporary counts are compared per run below, not
    // between the runs.
    assert_equal_to_heaptrack(
        &c,
        Strictness {
            temporary: false,
            peak: false,
        },
    );
    let h = heap(&c);
    for (marker, n) in [
        ("a", 8 * rounds),
        ("b", 8 * rounds),
        ("realloc", 8 * rounds),
        ("leak", 8),
    ] {
        let line = marker_line(&c.program.source, marker) as u64;
        let site = h["sites"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["line"].as_u64() == Some(line))
            .unwrap_or_else(|| panic!("no site at line {line}: {h}"));
        assert_eq!(u(site, "allocations"), n, "{site}");
    }
    assert_eq!(h["anomalies"]["unknown_frees"].as_u64(), Some(0), "{h}");
    assert_eq!(h["lost_events"].as_u64(), Some(0), "{h}");
    // Single-threaded, each round has one temporary (the realloc'd block freed right after its
    // allocation); interleaving can only lower that.
    assert!(u(h, "temporary") <= 8 * rounds + 8, "{h}");
    assert!(u(h, "temporary") > 8 * rounds / 2, "{h}");
}

#[test]
fn text_report_flame_graphs_and_diff() {
    let c = c_program();
    let sysroot = c.program.sysroot.to_str().unwrap();
    let rec = c.recording.to_str().unwrap();
    let text = hostside_ok(&["report", "--heap", "--sysroot", sysroot, rec]);
    for needle in [
        "calls to allocation functions",
        "temporary memory allocations",
        "peak heap memory consumption",
        "total memory leaked            2.00 MB in 20000 blocks",
        "Heap over time",
        "leak_some",
        "heap_truth.c:",
        "Largest single allocations",
    ] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }
    for what in ["peak", "leaked", "allocations", "temporary"] {
        let svg = scratch().join(format!("heap_{what}.svg"));
        hostside_ok(&[
            "flamegraph",
            "--heap",
            what,
            "--sysroot",
            sysroot,
            rec,
            "-o",
            svg.to_str().unwrap(),
        ]);
        let s = std::fs::read_to_string(&svg).unwrap();
        let expect = match what {
            "leaked" => "leak_some",
            "temporary" => "churn",
            _ => "main",
        };
        assert!(s.contains(expect), "{what} graph lacks {expect}");
    }
    // A second run with half the churn: diff shows exactly that change.
    let half = scratch().join("heap_c_half.zst");
    record(
        &half,
        &["--heap"],
        &[c.program.board.to_str().unwrap(), "1000000"],
    );
    let d: Value = serde_json::from_str(&hostside_ok(&[
        "diff",
        "--json",
        "--sysroot",
        sysroot,
        rec,
        half.to_str().unwrap(),
    ]))
    .unwrap();
    let hd = &d["heap"];
    assert_eq!(
        hd["delta"]["allocations"].as_i64(),
        Some(-1_000_000),
        "{hd}"
    );
    assert_eq!(hd["delta"]["leaked_bytes"].as_i64(), Some(0), "{hd}");
    let churn = hd["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["function"] == "churn")
        .unwrap_or_else(|| panic!("{hd}"));
    assert_eq!(churn["delta"]["allocations"].as_i64(), Some(-1_000_000));
    assert!(hd["sites"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["function"] != "leak_some"));
    let text = hostside_ok(&["diff", "--sysroot", sysroot, rec, half.to_str().unwrap()]);
    assert!(
        text.contains("-1000000") && text.contains("churn"),
        "{text}"
    );
}
