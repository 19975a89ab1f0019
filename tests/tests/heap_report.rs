//! Issue 3, acceptance 1: heap numbers from `rec --heap` + `hostside report --heap` equal
//! `heaptrack_print`'s on the same binaries, per site and in total, and the sites carry the
//! right file:line although the board ran a stripped copy (symbols come from the sysroot).
//!
//! heaptrack runs the unstripped copy (it symbolizes on the target, so it needs the debug info
//! there); both copies have the same code and build-id. heaptrack's own preload library links
//! libstdc++, whose start-up allocation (the exception emergency pool) heaptrack records even in
//! a C program: sites in modules the program does not load are heaptrack's, not the program's,
//! and are left out of the comparison.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crossprof_tests::*;
use serde_json::Value;

/// A site as `heaptrack_print` lists it (templates not shortened).
#[derive(Debug, Default, Clone)]
struct HtSite {
    function: String,
    file: Option<String>,
    line: Option<u32>,
    module: String,
    allocations: u64,
    temporary: u64,
    /// Leaked bytes as heaptrack prints them ("2.00M", "0B").
    leaked: String,
}

/// What heaptrack says about one run.
#[derive(Debug, Default)]
struct Heaptrack {
    allocations: u64,
    temporary: u64,
    peak: String,
    leaked: String,
    /// Exact leaked bytes: the sum of heaptrack_print's leaked flame graph.
    leaked_bytes: u64,
    /// `heaptrack` record-time stats: blocks never freed.
    leaked_allocations: u64,
    sites: Vec<HtSite>,
    /// `stack value` lines of the leaked flame graph.
    leaked_flame: Vec<(String, u64)>,
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// `libstdc++.so.6.0.30` and `libstdc++.so.6` name the same library.
fn same_module(a: &str, b: &str) -> bool {
    let stem = |m: &str| basename(m).split(".so").next().unwrap_or("").to_string();
    stem(a) == stem(b)
}

/// heaptrack_print 1.4's byte format: integers below 1000, else two decimals and the first
/// letter of the (power of 1000) unit.
fn ht_bytes(n: u64) -> String {
    if n < 1000 {
        return format!("{n}B");
    }
    let mut v = n as f64;
    let mut unit = 0;
    while v.abs() > 1000.0 && unit < 4 {
        v /= 1000.0;
        unit += 1;
    }
    format!("{v:.2}{}", ["B", "K", "M", "G", "T"][unit])
}

fn number_after(text: &str, key: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(key))
        .unwrap_or_else(|| panic!("no {key:?} in:\n{text}"));
    line.trim_start()[key.len()..]
        .split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no number in {line:?}"))
}

fn text_after(text: &str, key: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key:?} in:\n{text}"))
        .trim()
        .to_string()
}

/// Runs `program args` under heaptrack and reads the result with heaptrack_print.
fn heaptrack(program: &Path, args: &[&str], out: &Path) -> Heaptrack {
    let o = Command::new("heaptrack")
        .arg("-o")
        .arg(out)
        .arg(program)
        .args(args)
        .output()
        .expect("heaptrack must be installed (apt-get install heaptrack)");
    // The "heaptrack stats" block goes to standard error.
    let stdout = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "heaptrack failed:\n{stdout}");
    let data = ["zst", "gz"]
        .iter()
        .map(|e| PathBuf::from(format!("{}.{e}", out.display())))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no heaptrack data for {}:\n{stdout}", out.display()));
    let flame = PathBuf::from(format!("{}.leaked.txt", out.display()));
    let o = Command::new("heaptrack_print")
        .arg("--file")
        .arg(&data)
        .args([
            "--shorten-templates=0",
            "--peak-limit=1000000",
            "--sub-peak-limit=0",
            "--print-allocators=1",
            "--print-peaks=0",
            "--print-leaks=1",
            "--print-temporary=1",
            "--flamegraph-cost-type=leaked",
        ])
        .arg("--print-flamegraph")
        .arg(&flame)
        .output()
        .expect("run heaptrack_print");
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "heaptrack_print failed:\n{text}");

    let mut sites: BTreeMap<(String, Option<String>, Option<u32>, String), HtSite> =
        BTreeMap::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        let words: Vec<&str> = l.split_whitespace().collect();
        let entry = if !l.starts_with(' ') && l.ends_with(" from") {
            if l.contains(" calls to allocation functions with ") {
                Some(("allocations", words[0].to_string()))
            } else if l.contains(" temporary allocations of ") {
                Some(("temporary", words[0].to_string()))
            } else if l.contains(" leaked over ") {
                Some(("leaked", words[0].to_string()))
            } else {
                None
            }
        } else {
            None
        };
        i += 1;
        let Some((what, value)) = entry else { continue };
        let function = lines.get(i).copied().unwrap_or("").to_string();
        i += 1;
        let (mut file, mut line, mut module) = (None, None, String::new());
        while let Some(l) = lines.get(i) {
            if let Some(at) = l.strip_prefix("  at ") {
                let (f, n) = at.rsplit_once(':').unwrap_or((at, "0"));
                file = Some(f.to_string());
                line = n.parse().ok();
                i += 1;
            } else if let Some(m) = l.strip_prefix("  in ") {
                module = m.to_string();
                i += 1;
                break;
            } else {
                break;
            }
        }
        let key = (function.clone(), file.clone(), line, module.clone());
        let s = sites.entry(key).or_insert_with(|| HtSite {
            function,
            file,
            line,
            module,
            leaked: "0B".into(),
            ..HtSite::default()
        });
        match what {
            "allocations" => s.allocations = value.parse().expect("count"),
            "temporary" => s.temporary = value.parse().expect("count"),
            _ => s.leaked = value,
        }
    }
    let leaked_flame: Vec<(String, u64)> = std::fs::read_to_string(&flame)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (stack, v) = l.rsplit_once(' ')?;
            Some((stack.to_string(), v.parse().ok()?))
        })
        .collect();
    Heaptrack {
        allocations: number_after(&text, "calls to allocation functions:"),
        temporary: number_after(&text, "temporary memory allocations:"),
        peak: text_after(&text, "peak heap memory consumption:"),
        leaked: text_after(&text, "total memory leaked:"),
        leaked_bytes: leaked_flame.iter().map(|(_, v)| v).sum(),
        leaked_allocations: number_after(&stdout, "leaked allocations:"),
        sites: sites.into_values().collect(),
        leaked_flame,
    }
}

/// Basenames of the program and every library it loads here (by `ldd`).
fn loaded_modules(program: &Path) -> Vec<String> {
    let out = Command::new("ldd").arg(program).output().expect("run ldd");
    let mut v = vec![basename(program.to_str().unwrap()).to_string()];
    for w in String::from_utf8_lossy(&out.stdout).split_whitespace() {
        if w.starts_with('/') {
            v.push(basename(w).to_string());
        }
    }
    v
}

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

/// The dynamic loader's per-thread TLS vectors (`allocate_dtv`) are sized by the number of
/// loaded modules, which includes the profiler's own preloaded library: their number matches
/// heaptrack's, their size cannot.
fn sized_by_the_profiler(module: &str) -> bool {
    basename(module).starts_with("ld-linux")
}

/// A program run both ways.
struct Compared {
    program: Program,
    report: Value,
    ht: Heaptrack,
    /// heaptrack's sites that belong to the program (not to heaptrack's own libraries).
    own: Vec<HtSite>,
    /// heaptrack's sites in modules the program does not load.
    artifacts: Vec<HtSite>,
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
    let loaded = loaded_modules(&program.unstripped);
    let (own, artifacts): (Vec<HtSite>, Vec<HtSite>) = ht
        .sites
        .iter()
        .cloned()
        .partition(|s| loaded.iter().any(|m| same_module(m, &s.module)));
    Compared {
        program,
        report,
        ht,
        own,
        artifacts,
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

/// The offset in `module+0xOFFSET`, the name hostside gives a frame without a symbol.
fn unsymbolized_offset(function: &str) -> Option<u64> {
    let (_, hex) = function.rsplit_once("+0x")?;
    u64::from_str_radix(hex, 16).ok()
}

/// Our site matching a heaptrack site: same function, file name, line and module. A site
/// heaptrack could not symbolize (no symbol in a stripped system library, such as libstdc++'s
/// start-up pool) is named by its absolute address in heaptrack's run, and ours by its offset
/// in the module: they match when the module is the same and the address and offset agree
/// within the page (modules are mapped page-aligned), if exactly one of our sites does.
fn our_site<'a>(c: &'a Compared, s: &HtSite) -> Option<&'a Value> {
    let sites = heap(c)["sites"].as_array()?;
    if let (Some(hex), None) = (s.function.strip_prefix("0x"), &s.file) {
        let addr = u64::from_str_radix(hex, 16).ok()?;
        let mut same = sites.iter().filter(|o| {
            same_module(o["module"].as_str().unwrap_or(""), &s.module)
                && o["function"]
                    .as_str()
                    .and_then(unsymbolized_offset)
                    .is_some_and(|off| off & 0xfff == addr & 0xfff)
        });
        let first = same.next();
        return first.filter(|_| same.next().is_none());
    }
    sites.iter().find(|o| {
        o["function"].as_str() == Some(s.function.as_str())
            && o["file"].as_str().map(basename) == s.file.as_deref().map(basename)
            && o["line"].as_u64().map(|l| l as u32) == s.line.filter(|&l| l != 0)
            && same_module(o["module"].as_str().unwrap_or(""), &s.module)
    })
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

/// Totals and every site of the program equal heaptrack_print's. Collects every difference
/// before failing, so one run shows the whole picture.
fn assert_equal_to_heaptrack(c: &Compared, exact_temporary: bool) {
    let h = heap(c);
    let ht = &c.ht;
    let art = |f: fn(&HtSite) -> u64| c.artifacts.iter().map(f).sum::<u64>();
    let mut diffs: Vec<String> = Vec::new();
    let mut check = |what: String, ours: String, theirs: String| {
        if ours != theirs {
            diffs.push(format!("{what}: ours {ours}, heaptrack {theirs}"));
        }
    };
    for a in &c.artifacts {
        check(
            format!("leak of heaptrack-only site {a:?}"),
            "0B".into(),
            a.leaked.clone(),
        );
    }
    check(
        "allocations".into(),
        u(h, "allocations").to_string(),
        (ht.allocations - art(|s| s.allocations)).to_string(),
    );
    if exact_temporary {
        check(
            "temporary".into(),
            u(h, "temporary").to_string(),
            (ht.temporary - art(|s| s.temporary)).to_string(),
        );
    }
    let our_loader_leak: u64 = h["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| sized_by_the_profiler(s["module"].as_str().unwrap_or("")))
        .map(|s| u(s, "leaked_bytes"))
        .sum();
    let their_loader_leak: u64 = ht
        .leaked_flame
        .iter()
        .filter(|(stack, _)| stack.contains("(dl-tls.c)"))
        .map(|(_, v)| v)
        .sum();
    check(
        "leaked bytes outside the loader".into(),
        (u(h, "leaked_bytes") - our_loader_leak).to_string(),
        (ht.leaked_bytes - their_loader_leak).to_string(),
    );
    if their_loader_leak == 0 {
        check(
            "printed leak".into(),
            ht_bytes(u(h, "leaked_bytes")),
            ht.leaked.clone(),
        );
    }
    check(
        "leaked blocks".into(),
        (u(h, "leaked_allocations") + u(h, "suppressed_leaked_allocations")).to_string(),
        ht.leaked_allocations.to_string(),
    );
    for s in &c.own {
        let Some(o) = our_site(c, s) else {
            check(format!("site {s:?}"), "missing".into(), "present".into());
            continue;
        };
        let name = format!("{} {:?}:{:?}", s.function, s.file, s.line);
        check(
            format!("{name} allocations"),
            u(o, "allocations").to_string(),
            s.allocations.to_string(),
        );
        if exact_temporary {
            check(
                format!("{name} temporary"),
                u(o, "temporary").to_string(),
                s.temporary.to_string(),
            );
        }
        if !sized_by_the_profiler(&s.module) {
            check(
                format!("{name} leaked"),
                ht_bytes(u(o, "leaked_bytes")),
                s.leaked.clone(),
            );
        }
    }
    assert!(
        diffs.is_empty(),
        "differences from heaptrack_print:\n  {}\nour sites: {:#}",
        diffs.join("\n  "),
        h["sites"]
    );
}

fn c_program() -> &'static Compared {
    static C: OnceLock<Compared> = OnceLock::new();
    C.get_or_init(|| compare("heap_truth.c", "heap_c", &[]))
}

#[test]
fn c_program_equals_heaptrack_per_site_and_in_total() {
    let c = c_program();
    assert!(c.report["recording"]["complete"].as_bool().unwrap());
    assert_equal_to_heaptrack(c, true);
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
    // The peak holds the leaks plus the largest realloc'd buffer (heaptrack's peak also holds
    // its own libstdc++'s pool, so it is not compared).
    let h = heap(c);
    let peak = u(h, "peak_bytes");
    assert!((2_064_000..2_064_000 + 4096).contains(&peak), "{h}");
    assert!(!c.ht.peak.is_empty());
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
    assert_equal_to_heaptrack(&c, true);
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
    assert_equal_to_heaptrack(&c, false);
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
