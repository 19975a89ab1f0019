//! Issue 28, acceptance 1: `rec --snapshot -p PID` of a two-thread deadlock
//! (tests/programs/deadlock.c: each thread holds one mutex and blocks taking the other, in
//! take_second, from worker_one and worker_two; main blocks in pthread_join), on x86_64 and on
//! the emulated AArch64 and ARMv7 boards (real Debian kernels, the cross-built static `rec`).
//! tests/programs/snapshot_driver.c starts the program, waits until it is deadlocked, runs rec
//! and then checks the program is unharmed: all three threads still there and still asleep.
//! `hostside report --json` shows both workers asleep in the mutex lock with their callers
//! down to their entry functions, main in the join, each stop under a second.

use std::path::Path;

use crossprof_tests::boards::{boot, debian_libc, Board, Sysroot};
use crossprof_tests::*;
use serde_json::Value;

/// The `snapshot` section of `recording`'s JSON report, and the text report.
fn snapshot(recording: &Path, sysroot: &Path) -> (Vec<Value>, String) {
    let args = |json: bool| {
        let mut a = vec!["report", "--sysroot", sysroot.to_str().expect("UTF-8")];
        if json {
            a.push("--json");
        }
        a.push(recording.to_str().expect("UTF-8"));
        hostside_ok(&a)
    };
    let r: Value = serde_json::from_str(&args(true)).expect("JSON");
    let threads = r["snapshot"]
        .as_array()
        .unwrap_or_else(|| panic!("no snapshot section: {r}"))
        .clone();
    (threads, args(false))
}

/// The thread whose user stack holds `function`.
fn thread_in<'a>(threads: &'a [Value], function: &str) -> &'a Value {
    threads
        .iter()
        .find(|t| stack(t).iter().any(|f| f == function))
        .unwrap_or_else(|| panic!("no thread in {function}: {threads:#?}"))
}

fn stack(t: &Value) -> Vec<String> {
    t["stack"]
        .as_array()
        .map(|s| {
            s.iter()
                .filter_map(|f| f.as_str())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// In each of `count` snapshots, both workers asleep in the lock, called from take_second and
/// their entry function; main in the join; the process stopped for less than a second. With
/// several, each worker's stack counted once per snapshot across them.
fn assert_deadlock_seen(all: &[Value], text: &str, what: &str, count: usize) {
    assert_eq!(
        all.len(),
        3 * count,
        "{what}: three threads per snapshot: {all:#?}"
    );
    for index in 0..count {
        let threads: Vec<Value> = all
            .iter()
            .filter(|t| t["index"] == index)
            .cloned()
            .collect();
        assert_one_snapshot(&threads, what);
    }
    assert!(
        text.contains(&format!("Snapshot {count} of {count}")),
        "{text}"
    );
    assert!(text.contains("take_second"), "{text}");
    if count > 1 {
        let heading = format!("Stacks across the {count} snapshots");
        let across = text
            .split(&heading)
            .nth(1)
            .unwrap_or_else(|| panic!("{text}"));
        let rows: Vec<&str> = across
            .lines()
            .filter(|l| l.contains("take_second"))
            .collect();
        assert_eq!(rows.len(), 2, "{across}");
        for r in rows {
            assert_eq!(
                r.split_whitespace().next(),
                Some(&*count.to_string()),
                "{r}"
            );
        }
    }
}

/// One snapshot's three threads as [`assert_deadlock_seen`] says.
fn assert_one_snapshot(threads: &[Value], what: &str) {
    assert_eq!(threads.len(), 3, "{what}: three threads: {threads:#?}");
    for worker in ["worker_one", "worker_two"] {
        let t = thread_in(threads, worker);
        let s = stack(t);
        assert_eq!(t["state"], "S", "{what}: {worker} sleeps: {t}");
        let at = |f: &str| s.iter().position(|x| x == f);
        let lock = s
            .iter()
            .position(|f| f.contains("pthread_mutex_lock"))
            .unwrap_or_else(|| panic!("{what}: {worker} not in pthread_mutex_lock: {s:?}"));
        let caller = at("take_second").unwrap_or_else(|| panic!("{what}: {s:?}"));
        let entry = at(worker).expect("found above");
        assert!(
            lock < caller && caller < entry,
            "{what}: {worker}'s order: {s:?}"
        );
        let kernel = t["kernel_stack"].as_array().map_or(0, Vec::len);
        if kernel > 0 {
            assert!(
                t["kernel_stack"].to_string().contains("futex"),
                "{what}: {worker} waits in a futex: {t}"
            );
        }
    }
    let main = thread_in(threads, "main");
    assert!(
        stack(main).iter().any(|f| f.contains("join")),
        "{what}: main joins: {main}"
    );
    for t in threads {
        let ns = number(t, "stopped_ns");
        assert!(ns > 0 && ns < 1_000_000_000, "{what}: stopped {ns} ns");
    }
    eprintln!(
        "{what}: process stopped for {:.2} ms",
        number(&threads[0], "stopped_ns") as f64 / 1e6
    );
}

#[test]
fn a_deadlock_on_x86_64() {
    let tag = "snapshot_deadlock";
    let program = build("deadlock.c", tag, &["-O2"]);
    let driver = build("snapshot_driver.c", "snapshot_driver", &["-O2"]);
    add_system_libs(&program.sysroot, &program.board);
    add_host_debug_files(&program.sysroot);
    let out = scratch().join(tag).join("s.zst");
    let run = std::process::Command::new(&driver.board)
        .arg(&program.board)
        .arg("--")
        .arg(rec())
        .args(["--snapshot", "--count", "3", "--interval", "50", "--out"])
        .arg(&out)
        .output()
        .expect("run the driver");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && stdout.contains("alive: 3 threads, 3 sleeping"),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let (threads, text) = snapshot(&out, &program.sysroot);
    assert_deadlock_seen(&threads, &text, "x86_64", 3);
}

/// The same on an emulated board, with the board's static rec.
fn on_board(board: Board, tag: &str) {
    let sysroot = Sysroot::new(board, tag);
    let p = sysroot.build_c(board, "deadlock.c", "deadlock", &["-O2", "-pthread"]);
    let d = sysroot.build_c(board, "snapshot_driver.c", "snapshot_driver", &["-O2"]);
    let mut files: Vec<_> = [&p, &d]
        .iter()
        .map(|q| (q.guest.clone(), std::fs::read(&q.stripped).unwrap(), 0o755))
        .collect();
    // The board runs Debian's C library, whose detached debug info names the frames inside
    // pthread_mutex_lock; the sysroot holds the same files.
    let libc = debian_libc(board);
    for guest in [
        format!("/lib/{}", board.dynamic_linker()),
        format!("/lib/{}/libc.so.6", board.gnu()),
    ] {
        let debian = std::fs::canonicalize(libc.join(guest.trim_start_matches('/')))
            .unwrap_or_else(|e| panic!("{guest} in Debian's C library: {e}"));
        let dest = sysroot.dir.join(guest.trim_start_matches('/'));
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(&debian, &dest).unwrap();
        files.push((guest, std::fs::read(&debian).unwrap(), 0o755));
    }
    let debug = sysroot.dir.join("usr/lib/debug");
    if !debug.exists() {
        std::fs::create_dir_all(debug.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(libc.join("usr/lib/debug"), &debug).unwrap();
    }
    let job: Vec<String> = [
        &d.guest,
        &p.guest,
        "--",
        "/rec",
        "--snapshot",
        "--out",
        "/out/s.zst",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let run = boot(board, tag, files, &[job]);
    let log = String::from_utf8_lossy(run.file("job0.log")).into_owned();
    assert!(log.contains("alive: 3 threads, 3 sleeping"), "{log}");
    run.assert_ok(1);
    let (threads, text) = snapshot(&run.save("s.zst", tag), &sysroot.dir);
    assert_deadlock_seen(&threads, &text, tag, 1);
}

#[test]
fn a_deadlock_on_the_aarch64_board() {
    on_board(Board::Aarch64, "snapshot_aarch64");
}

#[test]
fn a_deadlock_on_the_armv7_board() {
    on_board(Board::Armv7, "snapshot_armv7");
}
