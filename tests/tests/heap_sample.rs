//! Issue 27: sampled heap mode (`rec --heap --heap-sample BYTES`). The reports' estimates,
//! with their standard errors, against what is known: a program of known allocations, and
//! exact mode's numbers on the real-world corpus (Lua, SQLite, Ninja).
//!
//! The sampling is random (the interposer seeds each thread from the clock), so these checks
//! are statistical: an estimate outside 3 standard errors happens 0.3% of the time per
//! comparison when the estimate is close to normal. The ground-truth test makes seven such
//! comparisons; the corpus test asks that no more of the sites a sample hit lie outside 3
//! standard errors than a stated 1% chance per site explains (a binomial tail at 1e-4; it
//! says how many did), that no site of 8 means or more goes unsampled, and that the ten
//! largest sites lie within 10% where that is a safe promise: a site of small blocks has a
//! relative standard error of about sqrt(mean / its bytes), 9% for Ninja's 64 MB site at
//! 512 KiB, so 10% holds there only about three times in four; such sites are checked at 4
//! standard errors and named in the output.

use std::path::Path;

use crossprof_tests::realworld;
use crossprof_tests::*;
use serde_json::Value;

const MEAN: &str = "65536";

fn f(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no {key} in {v:#}"))
}

fn heap_json(recording: &Path, sysroot: &Path) -> Value {
    let v: Value = serde_json::from_str(&hostside_ok(&[
        "report",
        "--heap",
        "--json",
        "--top",
        "1000000",
        "--sysroot",
        sysroot.to_str().expect("utf-8"),
        recording.to_str().expect("utf-8"),
    ]))
    .expect("valid JSON");
    v["heap"].clone()
}

fn site<'a>(heap: &'a Value, function: &str) -> &'a Value {
    heap["sites"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["function"] == function))
        .unwrap_or_else(|| panic!("no site {function} in {heap:#}"))
}

/// `estimate` within `k` standard errors of `truth`.
fn within(what: &str, truth: f64, estimate: f64, se: f64, k: f64) {
    let z = (estimate - truth).abs() / se.max(1e-9);
    eprintln!("{what}: truth {truth}, estimate {estimate} \u{b1} {se:.1} (z = {z:.2})");
    assert!(
        z <= k,
        "{what}: {estimate} is {z:.2} standard errors from {truth}"
    );
}

#[test]
fn known_allocations_are_estimated_within_three_standard_errors() {
    let program = build("heap_sample_truth.c", "heap_sample_truth", &["-O2"]);
    add_system_libs(&program.sysroot, &program.board);
    let recording = scratch().join("heap_sample_truth.zst");
    let board = program.board.to_str().expect("utf-8");
    record(
        &recording,
        &["--heap", "--no-cpu", "--heap-sample", MEAN],
        &[board],
    );
    let heap = heap_json(&recording, &program.sysroot);
    assert_eq!(heap["sampled"]["mean_bytes"], 65536, "{heap:#}");
    let samples = heap["sampled"]["samples"].as_u64().expect("samples");
    // About 12.8 MB / 64 KiB + 1,200 + 200 samples, far fewer than the 420,200 calls.
    assert!((1000..5000).contains(&samples), "{samples} samples");
    for (function, calls, size) in [
        ("small", 400_000.0, 32.0),
        ("medium", 20_000.0, 4096.0),
        ("large", 200.0, 1048576.0),
    ] {
        let s = site(&heap, function);
        within(
            &format!("{function} calls"),
            calls,
            f(s, "allocations"),
            f(s, "allocations_stderr"),
            3.0,
        );
        within(
            &format!("{function} bytes"),
            calls * size,
            f(s, "allocated_bytes"),
            f(s, "allocated_bytes_stderr"),
            3.0,
        );
    }
    let m = site(&heap, "medium");
    within(
        "medium leaked bytes",
        20_000.0 * 4096.0,
        f(m, "leaked_bytes"),
        f(m, "leaked_bytes_stderr"),
        3.0,
    );
    // Blocks of 1 MiB are all but certain to be sampled, and stand for themselves.
    let l = site(&heap, "large");
    assert!(f(l, "allocations_stderr") < 5.0, "{l:#}");
    assert_eq!(f(l, "leaked_bytes"), 0.0);
    // An exact recording carries none of this.
    let exact = scratch().join("heap_sample_truth_exact.zst");
    record(&exact, &["--heap", "--no-cpu"], &[board]);
    let heap = heap_json(&exact, &program.sysroot);
    assert!(heap.get("sampled").is_none(), "{heap:#}");
    assert!(site(&heap, "small").get("allocations_stderr").is_none());
    assert_eq!(site(&heap, "small")["allocations"], 400_000);
}

/// Records `program` (with `args`) exactly and sampled at 512 KiB; per site, the exact
/// allocated bytes against the estimate.
fn compare_with_exact(name: &str, extra_args: &[&str]) {
    let program = realworld::build(name, "bfd-O2-pie");
    let mut args: Vec<String> = extra_args.iter().map(|a| a.to_string()).collect();
    args.extend(program.args.iter().cloned());
    let run = |out: &Path, sample: &[&str]| {
        let mut rec_args = vec!["--out", out.to_str().expect("utf-8"), "--heap", "--no-cpu"];
        rec_args.extend_from_slice(sample);
        rec_args.push("--");
        let mut c = std::process::Command::new(rec());
        c.args(&rec_args)
            .arg(&program.board)
            .args(&args)
            .current_dir(&program.workdir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null());
        let o = c.output().expect("run rec");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        heap_json(out, &program.sysroot)
    };
    let exact = run(&scratch().join(format!("{name}-exact.zst")), &[]);
    let sampled = run(
        &scratch().join(format!("{name}-sampled.zst")),
        &["--heap-sample", "512KiB"],
    );
    assert_eq!(sampled["sampled"]["mean_bytes"], 524288);
    let key = |s: &Value| {
        format!(
            "{} {} {} {}",
            s["function"], s["file"], s["line"], s["module"]
        )
    };
    let est: std::collections::HashMap<String, &Value> = sampled["sites"]
        .as_array()
        .expect("sites")
        .iter()
        .map(|s| (key(s), s))
        .collect();
    let mut sites: Vec<&Value> = exact["sites"].as_array().expect("sites").iter().collect();
    sites.sort_by_key(|s| std::cmp::Reverse(s["allocated_bytes"].as_u64().unwrap_or(0)));
    let mut c = Coverage::default();
    for (rank, s) in sites.iter().enumerate() {
        let truth = f(s, "allocated_bytes");
        let Some(e) = est.get(&key(s)) else {
            // Never sampled: a site of B bytes in small blocks escapes every sampling
            // point with probability exp(-B/mean), under 3.4e-4 from 8 means on.
            c.missed_bytes += truth;
            assert!(
                truth < UNSAMPLED_MEANS * MEAN_CORPUS,
                "{name}: site {} of {truth} bytes never sampled",
                key(s)
            );
            continue;
        };
        c.hit += 1;
        let (x, se) = (f(e, "allocated_bytes"), f(e, "allocated_bytes_stderr"));
        let z = (x - truth).abs() / se.max(1.0);
        if z <= 3.0 {
            c.inside += 1;
        }
        if rank < 10 {
            // Within 10% is only a safe promise (3 standard errors) for a site whose
            // relative standard error is at most 10%/3; one of small blocks has about
            // sqrt(mean / its bytes), over 3.3% below 470 MB at 512 KiB. For those the
            // check is the 3 standard errors, and the output says so.
            let (rel, rse) = ((x - truth).abs() / truth, se / truth);
            let reachable = rse <= 0.10 / 3.0;
            eprintln!(
                "{name} #{rank} {}: exact {truth}, estimate {x} \u{b1} {se:.0} (off {:.1}%, \
                 relative SE {:.1}%, z = {z:.2}){}",
                s["function"],
                rel * 100.0,
                rse * 100.0,
                if reachable {
                    ""
                } else {
                    "; 10% not reachable at this rate"
                }
            );
            if reachable {
                assert!(
                    rel <= 0.10,
                    "{name}: site {} off by {:.1}%",
                    key(s),
                    rel * 100.0
                );
            } else {
                // 4, not 3: nine such sites over the three programs would fail a run one
                // time in 40 at 3 standard errors by chance alone, one in 7,000 at 4. (The
                // 3-standard-error share over every site is checked below.) Counted in the
                // larger of the estimated error and the error at the truth: a site drawn
                // short also gets a short estimated error, which made a 3.2-sigma draw of
                // Ninja's 55 expected samples (31 came) read as 4.3.
                c.top_unreachable += 1;
                let at_truth = se_at_truth(truth, f(s, "allocations"), MEAN_CORPUS);
                let z = (x - truth).abs() / se.max(at_truth);
                assert!(z <= 4.0, "{name}: top site {} is {z:.2} SE off", key(s));
            }
        }
    }
    let total = f(&exact, "allocated_bytes");
    eprintln!(
        "{name}: {} sites, {} sampled, {} within 3 SE ({:.1}%); {} of the ten largest have a \
         relative SE over 3.3%; unsampled sites hold {:.3}% of the bytes; total {total} vs \
         {} \u{b1} {:.0}",
        sites.len(),
        c.hit,
        c.inside,
        100.0 * c.inside as f64 / c.hit as f64,
        c.top_unreachable,
        100.0 * c.missed_bytes / total,
        f(&sampled, "allocated_bytes"),
        f(&sampled["sampled"], "allocated_bytes_stderr")
    );
    let allowed = allowed_outside(c.hit as u64) as usize;
    assert!(
        c.hit - c.inside <= allowed,
        "{name}: {} of {} sampled sites outside 3 standard errors, more than the {allowed} \
         that a {:.0}% chance per site allows",
        c.hit - c.inside,
        c.hit,
        OUTSIDE_FRACTION * 100.0
    );
}

/// The standard error of a site's byte estimate when the site really allocated `bytes` in
/// `count` blocks of equal size, sampled every `mean` bytes on average: a block of `b` bytes
/// is sampled with chance p = 1 - exp(-b/mean) and then counts b/p, a variance of
/// b^2 (1 - p) / p per block (about b * mean for small blocks).
fn se_at_truth(bytes: f64, count: f64, mean: f64) -> f64 {
    if count < 1.0 {
        return 0.0;
    }
    let b = bytes / count;
    let p = -(-b / mean).exp_m1();
    (count * b * b * (1.0 - p) / p).sqrt()
}

/// Mean bytes between samples in the corpus tests (512 KiB, the acceptance's rate).
const MEAN_CORPUS: f64 = 524_288.0;
/// A site never sampled must hold fewer bytes than this many means (see the check).
const UNSAMPLED_MEANS: f64 = 8.0;
/// The stated chance of a sampled site to lie outside 3 standard errors: 0.3% for a normal
/// estimate, but most sites are hit by a handful of samples, whose estimates are skewed (a
/// Poisson count) and whose standard errors are themselves estimated from the samples, so 1%.
const OUTSIDE_FRACTION: f64 = 0.01;

/// How many of `n` sites may lie outside 3 standard errors: the least `k` that more than `k`
/// exceeds with probability under 1e-4 when each site is outside with [`OUTSIDE_FRACTION`]
/// (a binomial tail). A flat share failed by chance: one site of 17 is 5.9%, over a 5% cap.
fn allowed_outside(n: u64) -> u64 {
    let p = OUTSIDE_FRACTION;
    // P(X = i), summed from i = 0 until the rest is under 1e-4.
    let mut term = (1.0 - p).powi(n as i32);
    let mut below = 0.0;
    for k in 0..=n {
        below += term;
        if 1.0 - below < 1e-4 {
            return k;
        }
        term *= (n - k) as f64 / (k + 1) as f64 * p / (1.0 - p);
    }
    n
}

#[test]
fn allowed_outside_follows_the_binomial_tail() {
    // n = 17: P(X > 2) = 5.6e-4, P(X > 3) = 2.2e-5.
    assert_eq!(allowed_outside(17), 3);
    assert_eq!(allowed_outside(1), 1);
    assert!(allowed_outside(1000) < 30);
}

/// What `compare_with_exact` counts.
#[derive(Default)]
struct Coverage {
    /// Sites sampled at least once.
    hit: usize,
    /// Of them, within 3 standard errors of exact mode.
    inside: usize,
    /// Bytes of the sites never sampled.
    missed_bytes: f64,
    /// Of the ten largest, those whose relative standard error is over 10%/3.
    top_unreachable: usize,
}

#[test]
fn lua_estimates_match_exact_mode() {
    compare_with_exact("lua", &[]);
}

#[test]
fn sqlite_estimates_match_exact_mode() {
    compare_with_exact("sqlite3", &["-lookaside", "0", "0"]);
}

#[test]
fn ninja_estimates_match_exact_mode() {
    compare_with_exact("ninja", &[]);
}
