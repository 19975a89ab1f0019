//! Issue 30, acceptance 2: cyclictest (Debian's rt-tests) measures its own wakeup latency on
//! CPU 0 at real-time priority 80 while tests/programs/rt_hog.c, at priority 90 on the same
//! CPU, burns 3 ms out of every 10; all of it under `rec --off-cpu`. `hostside report
//! --latency --json` gives the measuring thread's latency as cyclictest printed it, and names
//! the hog, in its busy loop, as what ran instead at the worst wakeups, which `hostside html`
//! marks on the thread's timeline row.
//!
//! Tolerance: both measure from when the thread's timer was due on the same monotonic clock;
//! cyclictest reads its clock after returning to user space (a few microseconds after the
//! switch-in this report ends at) and prints whole microseconds. A cycle whose deadline had
//! passed before it slept is measured by cyclictest from its clock read and here from the
//! timer's arming. So: the mean within 10 µs + 3%, the maximum within 20 µs + 5%, and at
//! least 99% of cyclictest's cycles seen.

use std::process::{Command, Stdio};

use crossprof_tests::*;
use serde_json::Value;

/// cyclictest's summary line `T: 0 (TID) P:80 I:1000 C: 2000 Min: .. Act: .. Avg: A Max: M`:
/// (tid, cycles, average µs, maximum µs).
fn cyclictest_summary(out: &str) -> (u64, u64, f64, f64) {
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("T: 0"))
        .unwrap_or_else(|| panic!("no cyclictest summary in:\n{out}"));
    let field = |key: &str| -> f64 {
        let rest = line
            .split(key)
            .nth(1)
            .unwrap_or_else(|| panic!("{key} in {line}"));
        let v = rest.split_whitespace().next().unwrap_or_default();
        v.parse().unwrap_or_else(|_| panic!("{key} {v} in {line}"))
    };
    let tid = line
        .split(['(', ')'])
        .nth(1)
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("no thread id in {line}"));
    (tid, field("C:") as u64, field("Avg:"), field("Max:"))
}

#[test]
fn wakeup_latency_agrees_with_cyclictest_and_names_the_hog() {
    let hog = build("rt_hog.c", "rt_hog", &["-O2"]);
    add_system_libs(&hog.sysroot, &hog.board);
    let out = scratch().join("latency.zst");
    let script = format!(
        "taskset -c 0 chrt -f 90 {} 300 & H=$!; sleep 0.1; \
         taskset -c 0 cyclictest -t 1 -p 80 -a 0 -i 1000 -l 2000 -q; kill $H",
        hog.board.display()
    );
    let o = Command::new(rec())
        .args(["--off-cpu", "--out"])
        .arg(&out)
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .expect("run rec");
    let printed = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "rec: {}\n{printed}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (tid, cycles, avg_us, max_us) = cyclictest_summary(&printed);

    let text = hostside_ok(&[
        "report",
        "--json",
        "--sysroot",
        hog.sysroot.to_str().expect("UTF-8 path"),
        out.to_str().expect("UTF-8 path"),
    ]);
    let r: Value = serde_json::from_str(&text).expect("JSON");
    let t = r["latency"]
        .as_array()
        .and_then(|l| l.iter().find(|t| t["tid"] == tid))
        .unwrap_or_else(|| {
            panic!(
                "thread {tid} not in the latency section: {:#}",
                r["latency"]
            )
        });
    let (wakeups, mean_us, ours_max_us) = (
        number(t, "wakeups"),
        number(t, "mean_ns") as f64 / 1e3,
        number(t, "max_ns") as f64 / 1e3,
    );
    eprintln!(
        "cyclictest: {cycles} cycles, avg {avg_us} us, max {max_us} us; hostside: {wakeups} \
         wakeups, mean {mean_us:.1} us, max {ours_max_us:.1} us"
    );
    // Not all: a cycle whose timer fires before the thread has switched out (armed 0.1 to
    // 3 µs before it was due: two such in a run under load) does not block, so there is no
    // wakeup to measure; 1994-1999 of 2000 counted, quiet or with a busy loop on each CPU.
    // rec records only the starts of sleep timers (`hrtimer_wakeup`): before it did, other
    // timers started while cyclictest is current (the deadline server's `dl_task_timer`: 7 of
    // 572 starts in a `perf record`; under load rec wrote 3,776 starts for 2,000 sleeps) were
    // at times taken for the sleep's timer, and 1984-1995 were counted (1954 once under a
    // fresh machine's load).
    assert!(
        wakeups * 100 >= cycles * 99 && wakeups <= cycles,
        "{wakeups} of {cycles}"
    );
    assert!(
        (mean_us - avg_us).abs() <= 10.0 + 0.03 * avg_us,
        "mean {mean_us:.1} us, cyclictest's {avg_us}"
    );
    assert!(
        (ours_max_us - max_us).abs() <= 20.0 + 0.05 * max_us,
        "max {ours_max_us:.1} us, cyclictest's {max_us}"
    );

    // The worst wakeups: the hog held the CPU, in its busy loop (a stall of the virtual
    // machine, which no recorded thread caused, may be among them too).
    let worst = t["worst"].as_array().expect("worst");
    assert!(!worst.is_empty());
    let by_hog = worst
        .iter()
        .filter(|w| {
            w["instead"]["comm"] == "rt_hog"
                && w["instead"]["stack"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|f| f == "burn"))
        })
        .count();
    assert!(
        by_hog >= 1,
        "the hog in burn() ran instead at none of the worst wakeups: {worst:#?}"
    );
    assert!(
        number(&worst[0], "latency_ns") >= 2_000_000,
        "{:#}",
        worst[0]
    );

    // The HTML timeline marks the same worst wakeups on the thread's row.
    let page = consumers::html_page(&out, &hog.sysroot, "latency");
    let checked = consumers::report_check(&page, None);
    let marks: Vec<&Value> = checked["wakeup_marks"]
        .as_array()
        .expect("wakeup_marks")
        .iter()
        .filter(|m| m["tid"] == tid)
        .collect();
    let mut want: Vec<u64> = worst.iter().map(|w| number(w, "latency_ns")).collect();
    let mut got: Vec<u64> = marks.iter().map(|m| number(m, "latency_ns")).collect();
    want.sort_unstable();
    got.sort_unstable();
    assert_eq!(got, want, "marks {marks:#?}");
    assert!(
        marks.iter().any(|m| m["label"]
            .as_str()
            .is_some_and(|l| l.contains("rt_hog") && l.contains("burn"))),
        "no mark names the hog in burn(): {marks:#?}"
    );
}
