//! Issue 14, acceptance 1: off-CPU time from `rec --off-cpu`, against programs whose waits are
//! known. `off_cpu.c`: nap() sleeps 30 ms of every 40 ms of the main thread (about 75% of its
//! wall time); waiter() blocks on a condition variable for the whole run. `mutex_split.c`: the
//! contender waits about 90 ms of every 120 on the mutex and 30 on a semaphore.
//! A busy machine wakes sleepers late and stretches those waits, so both programs measure
//! their waits themselves and the tests take those measurements as the truth.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crossprof_tests::*;
use serde_json::Value;

/// `report --off-cpu --json`'s function row named exactly `name`.
fn off_cpu_function<'a>(r: &'a Value, name: &str) -> Option<&'a Value> {
    r["off_cpu"]["functions"]
        .as_array()?
        .iter()
        .find(|f| f["function"].as_str() == Some(name))
}

fn total_ns(r: &Value, name: &str) -> u64 {
    off_cpu_function(r, name)
        .and_then(|f| f["total_ns"].as_u64())
        .unwrap_or(0)
}

/// The thread rows of the `off_cpu` section, by tid order of creation (main thread first).
fn threads(r: &Value) -> Vec<Value> {
    let mut t = r["off_cpu"]["threads"].as_array().expect("threads").clone();
    t.sort_by_key(|t| t["tid"].as_u64());
    t
}

fn ns(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no {field} in {v}"))
}

/// off_cpu.c's flags: symbols bound at start (`-z now`), so that no thread's last CPU sample
/// before it blocks lands in the dynamic linker's lazy binding of `pthread_cond_wait`.
const OFF_CPU_FLAGS: &[&str] = &["-O2", "-Wl,-z,now"];

/// What off_cpu.c measured itself: the share of its run spent in nap(), percent, and the
/// nanoseconds its waiter spent in wait_for_go().
/// The measurement must be one of 50 naps of at least 30 ms (a sleep never ends early; a
/// loaded machine only makes them longer).
fn measured_nap_share(stdout: &[u8]) -> (f64, f64) {
    let text = String::from_utf8_lossy(stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("nap_ns "))
        .unwrap_or_else(|| panic!("no measurement in {text:?}"));
    let w: Vec<f64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(w.len(), 3, "{line}");
    assert!(w[0] >= 50.0 * 30e6 && w[1] > w[0] && w[1] > w[2], "{line}");
    (100.0 * w[0] / w[1], w[2])
}

/// Runs `run` (which records off_cpu.c and returns the report and the program's output) and
/// returns the report, the share of its run the program measured in nap(), percent, and the
/// nanoseconds its waiter measured in wait_for_go(): the truth on this machine, however late
/// its sleeps ended and however late its waiter started.
fn with_truth(run: impl FnOnce() -> (Value, Vec<u8>)) -> (Value, f64, f64) {
    let (r, stdout) = run();
    let (truth, wait_ns) = measured_nap_share(&stdout);
    eprintln!(
        "off_cpu.c measured nap at {truth:.1}% of its run, the waiter's wait at {wait_ns} ns"
    );
    (r, truth, wait_ns)
}

/// The main thread's and the waiter's rows, checked for what holds in both stack modes: the
/// main thread blocked the share of its wall time the program measured in nap() (within 3
/// points), the waiter for the whole run (±5%).
fn assert_thread_split(r: &Value, truth: f64) -> (u64, u64) {
    let t = threads(r);
    assert_eq!(t.len(), 2, "{r:#}");
    let (main, waiter) = (&t[0], &t[1]);
    let wall = ns(main, "wall_ns");
    assert!(wall > 1_500_000_000, "a short run: {main}");
    let blocked = 100.0 * ns(main, "blocked_ns") as f64 / wall as f64;
    assert!(
        (blocked - truth).abs() <= 3.0,
        "main thread blocked {blocked:.1}% of its wall time, the program measured {truth:.1}%: {main}"
    );
    let waited = ns(waiter, "blocked_ns") as f64 / wall as f64;
    assert!(
        (0.95..=1.05).contains(&waited),
        "the waiter blocked {:.1}% of the run: {waiter}",
        waited * 100.0
    );
    for row in [main, waiter] {
        assert_eq!(
            ns(row, "on_cpu_ns") + ns(row, "off_cpu_ns"),
            ns(row, "wall_ns"),
            "{row}"
        );
    }
    (wall, ns(waiter, "blocked_ns"))
}

/// The report's thread timeline agrees with the off-CPU section: the main thread of
/// off_cpu.c runs (or waits for a CPU, on a busy machine) the 25% of its time it is not in
/// nap() (within 5 points of what the program measured), the waiter almost never runs.
fn assert_timeline(r: &Value, truth: f64, source: &str) {
    let tl = &r["timeline"];
    assert_eq!(tl["source"], source, "{tl:#}");
    let t = threads(r);
    let rows = tl["threads"].as_array().expect("timeline threads");
    assert_eq!(rows.len(), 2, "{tl:#}");
    for (th, want_main) in [(&t[0], true), (&t[1], false)] {
        let row = rows
            .iter()
            .find(|x| x["tid"] == th["tid"])
            .unwrap_or_else(|| panic!("no timeline row for {th}"));
        let (run, wait) = (ns(row, "running_ns"), ns(row, "waiting_ns"));
        let cells = row["row"].as_str().unwrap();
        assert_eq!(cells.chars().count(), 60, "{row}");
        // The same switches: the same on-CPU time and wall time, to 1% of the wall time (a
        // new thread's wait for its first CPU is waiting here, on-CPU there).
        let wall = ns(th, "wall_ns");
        assert!(
            run.abs_diff(ns(th, "on_cpu_ns")) * 100 <= wall,
            "{row} vs {th}"
        );
        assert!((run + wait).abs_diff(wall) * 100 <= wall, "{row} vs {th}");
        let share = 100.0 * (run + ns(th, "runnable_ns")) as f64 / (run + wait) as f64;
        if want_main {
            assert!(
                (share - (100.0 - truth)).abs() <= 5.0,
                "main thread ran {share:.1}% (the program measured {:.1}%): {row}",
                100.0 - truth
            );
        } else {
            assert!(share < 5.0, "the waiter ran {share:.1}%: {row}");
        }
        // Alive in the columns its life spans: not all 60 where a loaded machine slowed rec's
        // start or end around the program's.
        let alive = cells.chars().filter(|&c| c != ' ').count() as u64;
        let ran = cells.chars().filter(|&c| c != ' ' && c != '_').count() as u64;
        let spans = (run + wait) / ns(tl, "slice_ns");
        assert!(
            (spans..=spans + 2).contains(&alive),
            "{cells:?} for {} ns in {} ns columns",
            run + wait,
            ns(tl, "slice_ns")
        );
        // Columns of at least 33 ms (a 60th of a 2 s run) across 40 ms burn/nap cycles: the
        // main thread runs in nearly every one, the waiter in almost none.
        match want_main {
            true => assert!(ran * 10 >= alive * 8, "{cells:?}"),
            false => assert!(ran * 10 <= alive, "{cells:?}"),
        }
    }
}

#[test]
fn sleeping_and_waiting_threads_exact_stacks() {
    let p = build("off_cpu.c", "off_cpu_exact", OFF_CPU_FLAGS);
    add_system_libs(&p.sysroot, &p.board);
    let out = scratch().join("off_cpu_exact.zst");
    let (r, truth, wait_ns) = with_truth(|| {
        let o = run_rec(&[
            "--off-cpu",
            "--out",
            out.to_str().unwrap(),
            "--",
            p.board.to_str().unwrap(),
            "50",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        (off_cpu_report(&out, &p.sysroot, &[]), o.stdout)
    });
    assert_eq!(r["off_cpu"]["stacks"], "exact", "{:#}", r["off_cpu"]);
    let (wall, _) = assert_thread_split(&r, truth);
    assert_timeline(&r, truth, "switches");
    // nap(): the share of the main thread's wall time the program measured, all of it under
    // work_loop and main.
    let nap = total_ns(&r, "nap");
    let share = 100.0 * nap as f64 / wall as f64;
    assert!(
        (share - truth).abs() <= 3.0,
        "nap is off-CPU {share:.1}% of the main thread's wall time ({truth:.1}% measured): {:#}",
        r["off_cpu"]
    );
    assert!(total_ns(&r, "work_loop") >= nap && total_ns(&r, "main") >= nap);
    // The waiter: blocked in wait_for_go, in pthread_cond_wait, under waiter, for as long as
    // it measured itself there (its start and spin before take a share of the run that a busy
    // machine stretches). Off-CPU time is at most the wall time in the call, and less only by
    // the call's own moments on the CPU.
    let wait = total_ns(&r, "wait_for_go");
    let run = wait as f64 / wait_ns;
    assert!(
        (0.97..=1.01).contains(&run),
        "wait_for_go off-CPU {wait} ns, {:.1}% of the {wait_ns} ns the waiter measured in it: {:#}",
        run * 100.0,
        r["off_cpu"]
    );
    assert!(total_ns(&r, "waiter") >= wait);
    assert!(
        r["off_cpu"]["functions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["function"]
                .as_str()
                .is_some_and(|n| n.contains("pthread_cond_wait"))
                && f["total_ns"].as_u64() >= Some(wait)),
        "{:#}",
        r["off_cpu"]
    );
    // burn() spins: no blocked time of its own, only preemption, as much as a busy machine
    // preempts it.
    let main = &threads(&r)[0];
    assert!(
        total_ns(&r, "burn") <= ns(main, "runnable_ns"),
        "burn off-CPU {} ns, the thread preempted {} ns: {:#}",
        total_ns(&r, "burn"),
        ns(main, "runnable_ns"),
        r["off_cpu"]
    );
    assert_eq!(r["off_cpu"]["approximate_ns"], 0, "{:#}", r["off_cpu"]);
    // Every nanosecond is charged once: the section's total is the threads' off-CPU time.
    let sum: u64 = threads(&r).iter().map(|t| ns(t, "off_cpu_ns")).sum();
    assert_eq!(ns(&r["off_cpu"], "wait_ns"), sum);

    // The text report and the flame graph say the same.
    let text = hostside_ok(&[
        "report",
        "--off-cpu",
        "--sysroot",
        p.sysroot.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert!(text.contains("stacks: exact"), "{text}");
    assert!(
        text.contains("Thread timeline (from context switches): 60 columns"),
        "{text}"
    );
    let chain = text
        .lines()
        .find(|l| l.contains("nap (off_cpu.c:") && l.contains(" <- "))
        .unwrap_or_else(|| panic!("no chain through nap:\n{text}"));
    assert!(chain.contains("<- work_loop (off_cpu.c:"), "{chain}");
    let svg = scratch().join("off_cpu_exact.svg");
    hostside_ok(&[
        "flamegraph",
        "--off-cpu",
        "--sysroot",
        p.sysroot.to_str().unwrap(),
        out.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
    ]);
    let svg = std::fs::read_to_string(svg).unwrap();
    assert!(svg.contains("off-CPU time: ") && svg.contains("wait_for_go"));
}

/// Restores `kernel.perf_event_paranoid` when the test ends, however it ends.
struct Paranoid(Option<String>);

impl Paranoid {
    const PATH: &'static str = "/proc/sys/kernel/perf_event_paranoid";

    fn set(level: &str) -> Paranoid {
        let old = std::fs::read_to_string(Self::PATH).expect("read perf_event_paranoid");
        if old.trim() == level {
            return Paranoid(None);
        }
        std::fs::write(Self::PATH, level).expect("set perf_event_paranoid (needs root)");
        Paranoid(Some(old))
    }
}

impl Drop for Paranoid {
    fn drop(&mut self) {
        if let Some(old) = &self.0 {
            let _ = std::fs::write(Self::PATH, old.trim());
        }
    }
}

#[test]
fn unprivileged_recording_has_approximate_stacks_and_exact_times() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let p = build("off_cpu.c", "off_cpu_user", OFF_CPU_FLAGS);
    add_system_libs(&p.sysroot, &p.board);
    // A directory the unprivileged user can read, write and run from: rec and the output.
    let dir = scratch().join("off_cpu_user_run");
    std::fs::create_dir_all(&dir).unwrap();
    for d in [
        scratch(),
        &scratch().join("off_cpu_user"),
        p.board.parent().unwrap(),
    ] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let rec_copy = dir.join("rec");
    std::fs::copy(rec(), &rec_copy).unwrap();
    let out = dir.join("user.zst");
    let args = [
        "--off-cpu",
        "--out",
        out.to_str().unwrap(),
        "--",
        p.board.to_str().unwrap(),
        "50",
    ];
    let (r, truth, _) = with_truth(|| {
        let status = {
            let _level = root.then(|| Paranoid::set("2"));
            let mut cmd = if root {
                let mut c = Command::new("setpriv");
                c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                    .arg(&rec_copy);
                c
            } else {
                Command::new(&rec_copy)
            };
            cmd.args(args).output().expect("run rec unprivileged")
        };
        assert!(
            status.status.success(),
            "{}",
            String::from_utf8_lossy(&status.stderr)
        );
        (off_cpu_report(&out, &p.sysroot, &[]), status.stdout)
    });
    assert_eq!(r["off_cpu"]["stacks"], "approximate", "{:#}", r["off_cpu"]);
    assert_eq!(r["off_cpu"]["exact_ns"], 0);
    let (wall, waited) = assert_thread_split(&r, truth);
    // The stacks are the threads' last CPU samples: burn() under the right callers.
    let main_off = ns(&threads(&r)[0], "off_cpu_ns");
    let in_loop = total_ns(&r, "work_loop");
    assert!(
        in_loop * 100 >= main_off * 90,
        "work_loop {in_loop} of {main_off} ns: {:#}",
        r["off_cpu"]
    );
    assert!(
        total_ns(&r, "waiter") >= waited,
        "waiter: {:#}",
        r["off_cpu"]
    );
    // Most waits are charged to burn(), where the thread ran last before each nap: the leaf
    // is where it ran, not where it blocked.
    assert!(
        total_ns(&r, "burn") * 2 >= main_off,
        "burn {} of {main_off} ns: {:#}",
        total_ns(&r, "burn"),
        r["off_cpu"]
    );
    assert!(wall > 0);
    let text = hostside_ok(&[
        "report",
        "--off-cpu",
        "--sysroot",
        p.sysroot.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert!(
        text.contains("stacks: APPROXIMATE") && text.contains("perf_event_paranoid"),
        "{text}"
    );
}

/// The contender's waits split between take_lock and wait_turn, and the holder's between
/// hold_lock and rest, as the program measured them (about 75:25; within 2 points: a wait is
/// all of its function's time but a few microseconds on a CPU).
#[test]
fn mutex_contention_splits_as_measured() {
    let m = fixtures::recorded_mutex_split("mutex_split");
    let (p, out) = (&m.program, &m.recording);
    let r = off_cpu_report(out, &p.sysroot, &[]);
    assert_eq!(r["off_cpu"]["stacks"], "exact");
    for (a, b) in [("take_lock", "wait_turn"), ("hold_lock", "rest")] {
        let (na, nb) = (total_ns(&r, a), total_ns(&r, b));
        let (s, truth) = (share(na, nb), m.measured_share(a, b));
        assert!(
            (s - truth).abs() <= 2.0,
            "{a} has {s:.1}% of {a}+{b} ({na} vs {nb} ns), the program measured {truth:.1}%: {:#}",
            r["off_cpu"]
        );
    }
    // The contender's mutex wait is in pthread_mutex_lock, under take_lock and contender.
    let lock = r["off_cpu"]["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            f["function"]
                .as_str()
                .is_some_and(|n| n.contains("pthread_mutex_lock"))
        })
        .unwrap_or_else(|| panic!("no pthread_mutex_lock: {:#}", r["off_cpu"]));
    let take = total_ns(&r, "take_lock");
    assert!(ns(lock, "total_ns") >= take * 95 / 100, "{lock}");
    assert!(total_ns(&r, "contender") >= take + total_ns(&r, "wait_turn"));
}

/// One waker of a blocked stack: (waker stack names, wait_ns, wakeups, waker tid, blocked
/// tid).
type Waker = (Vec<String>, u64, u64, u64, u64);

/// The wakers of every blocked stack that contains `blocked_in`, and the woken time of those
/// blocked stacks.
fn wakers_of(r: &Value, blocked_in: &str) -> (Vec<Waker>, u64) {
    let has = |stack: &Value, f: &str| {
        stack
            .as_array()
            .is_some_and(|s| s.iter().any(|n| n.as_str() == Some(f)))
    };
    let mut wakers = Vec::new();
    let mut woken = 0;
    for b in r["off_cpu"]["wakeups"]["blocked"]
        .as_array()
        .unwrap_or_else(|| panic!("no wakeups: {:#}", r["off_cpu"]))
    {
        if !has(&b["stack"], blocked_in) {
            continue;
        }
        woken += ns(b, "woken_ns");
        for w in b["wakers"].as_array().unwrap() {
            let names = w["stack"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_str().unwrap().to_string())
                .collect();
            wakers.push((
                names,
                ns(w, "wait_ns"),
                ns(w, "wakeups"),
                ns(w, "tid"),
                ns(b, "tid"),
            ));
        }
    }
    (wakers, woken)
}

/// Who woke whom (issue 14): in mutex_split.c, holder() wakes the contender 20 times from
/// sem_post (ending its wait_turn) and 20 times from pthread_mutex_unlock (ending its
/// take_lock); nobody else wakes those waits.
#[test]
fn the_holder_wakes_the_contender_from_sem_post_and_mutex_unlock() {
    let m = fixtures::recorded_mutex_split("mutex_split_wakers");
    let (p, out) = (&m.program, &m.recording);
    let r = off_cpu_report(out, &p.sysroot, &[]);
    assert_eq!(r["off_cpu"]["wakeups"]["event"], "sched:sched_waking");
    for blocked_in in ["take_lock", "wait_turn"] {
        let (wakers, woken) = wakers_of(&r, blocked_in);
        // The kernel's futex wake, called from holder().
        let by_holder: Vec<_> = wakers
            .iter()
            .filter(|(s, ..)| {
                s.iter().any(|n| n == "holder") && s.iter().any(|n| n == "futex_wake")
            })
            .collect();
        let wakeups: u64 = by_holder.iter().map(|w| w.2).sum();
        let ns_by_holder: u64 = by_holder.iter().map(|w| w.1).sum();
        assert_eq!(wakeups, 20, "{blocked_in}: wakeups by holder: {wakers:#?}");
        assert_eq!(ns_by_holder, woken, "{blocked_in}: {wakers:#?}");
        // The holder thread woke the contender thread.
        assert!(by_holder.iter().all(|w| w.3 != w.4), "{wakers:#?}");
        // 20 waits of about 90 ms (take_lock) or 30 ms (wait_turn), as long as the program
        // measured them, to 2% (a few microseconds of each call run on a CPU).
        let measured = m.measured[blocked_in];
        assert!(
            woken.abs_diff(measured) * 50 <= measured,
            "{blocked_in}: woken {woken} ns, the program measured {measured} ns"
        );
    }
    // The text report names the line of holder() that woke each wait: the unlock ends
    // take_lock's waits, the sem_post wait_turn's.
    let source = std::fs::read_to_string(root().join("tests/programs/mutex_split.c")).unwrap();
    let line_of = |code: &str| {
        1 + source
            .lines()
            .position(|l| l.trim() == code)
            .unwrap_or_else(|| panic!("no {code} in mutex_split.c"))
    };
    // holder() comes first in the file: the first unlock is its own.
    let (unlock, post) = (
        line_of("pthread_mutex_unlock(&lock);"),
        line_of("sem_post(&held);"),
    );
    let text = hostside_ok(&[
        "report",
        "--off-cpu",
        "--sysroot",
        p.sysroot.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert!(text.contains("Who woke them (sched:sched_waking"), "{text}");
    let mut blocked = "";
    let mut woke: Vec<(String, u64)> = Vec::new();
    for l in text.lines() {
        if l.contains(" blocked in ") {
            blocked = l;
        } else if let Some((_, rest)) = l.split_once(" ms  ") {
            if let Some((n, _)) = rest.split_once(" wakeups by tid ") {
                let site = ["take_lock", "wait_turn"]
                    .into_iter()
                    .find(|f| blocked.contains(&format!("{f} (mutex_split.c:")))
                    .unwrap_or("other");
                woke.push((format!("{site} {l}"), n.parse().unwrap()));
            }
        }
    }
    for (site, line) in [("take_lock", unlock), ("wait_turn", post)] {
        let n: u64 = woke
            .iter()
            .filter(|(l, _)| {
                l.starts_with(site) && l.contains(&format!("holder (mutex_split.c:{line})"))
            })
            .map(|w| w.1)
            .sum();
        assert_eq!(
            n, 20,
            "{site} woken from mutex_split.c:{line}: {woke:#?}\n{text}"
        );
    }
}
