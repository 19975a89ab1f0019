//! `rec --heap` on the board side (issue 3): the raw records the interposer and rec write,
//! checked against programs with known allocation counts, sizes and stacks, and against the
//! traps (threads, signal handlers, fork, exec, SIGKILL, rec itself dying).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crossprof_format::{Mmap, Record};
use crossprof_tests::*;

/// Runs `rec --heap [extra] -- cmd`, returning its output.
fn rec_heap(out: &Path, extra: &[&str], cmd: &[&str]) -> std::process::Output {
    Command::new(rec())
        .env("CROSSPROF_HEAP_LIB", heap_lib())
        .arg("--heap")
        .args(extra)
        .arg("--out")
        .arg(out)
        .arg("--")
        .args(cmd)
        .output()
        .expect("run rec")
}

/// Alloc counts by (pid, size) and Free count by pid.
fn counts(records: &[Record]) -> (HashMap<(u32, u64), u64>, HashMap<u32, u64>) {
    let mut allocs = HashMap::new();
    let mut frees = HashMap::new();
    for r in records {
        match r {
            Record::Alloc(a) => *allocs.entry((a.pid, a.size)).or_default() += 1,
            Record::Free(f) => *frees.entry(f.pid).or_default() += 1,
            _ => {}
        }
    }
    (allocs, frees)
}

fn allocs_of(allocs: &HashMap<(u32, u64), u64>, size: u64) -> u64 {
    allocs
        .iter()
        .filter(|((_, s), _)| *s == size)
        .map(|(_, n)| n)
        .sum()
}

/// Checks the trace-tree invariants and returns each stack id's ips (innermost first).
fn stacks(records: &[Record]) -> HashMap<(u32, u64), Vec<u64>> {
    let mut nodes: HashMap<(u32, u64), (u64, u64)> = HashMap::new();
    let mut out = HashMap::new();
    for r in records {
        match r {
            Record::StackNode(n) => {
                assert_ne!(n.id, 0);
                assert!(
                    n.parent == 0 || nodes.contains_key(&(n.pid, n.parent)),
                    "parent written before child"
                );
                assert!(
                    nodes.insert((n.pid, n.id), (n.parent, n.ip)).is_none(),
                    "node ids are unique per pid: {n:?}"
                );
            }
            Record::Alloc(a) if a.stack != 0 => {
                let mut ips = Vec::new();
                let mut id = a.stack;
                while id != 0 {
                    let (parent, ip) = *nodes
                        .get(&(a.pid, id))
                        .unwrap_or_else(|| panic!("stack {id} used before it was written"));
                    ips.push(ip);
                    id = parent;
                }
                out.insert((a.pid, a.stack), ips);
            }
            _ => {}
        }
    }
    out
}

fn mmaps(records: &[Record], pid: u32) -> Vec<&Mmap> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Mmap(m) if m.pid == pid => Some(m),
            _ => None,
        })
        .collect()
}

fn check_counts_program(extra: &[&str], tag: &str) {
    let prog = build("heap_counts.c", tag, &["-O2", "-fomit-frame-pointer"]);
    let out = scratch().join(format!("{tag}.zst"));
    let o = rec_heap(&out, extra, &[prog.board.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (records, summary) = read_records(&out);
    assert!(summary.complete && summary.damage.is_none());
    let (allocs, _) = counts(&records);
    for (size, n) in [
        (10007, 1000),
        (9993, 1),
        (20011, 1),
        (20021, 1),
        (30011, 1),
        (30016, 1),
        (30023, 1),
        (30029, 1),
        (30047, 1),
        (30059, 1),
    ] {
        assert_eq!(allocs_of(&allocs, size), n, "allocations of {size} bytes");
    }
    let pid = records
        .iter()
        .find_map(|r| match r {
            Record::Alloc(a) if a.size == 10007 => Some(a.pid),
            _ => None,
        })
        .unwrap();
    // Exactly one free per address of the tracked sizes, and realloc = Free{old}, Alloc{new}
    // back to back.
    let seq: Vec<&Record> = records
        .iter()
        .filter(|r| {
            matches!(r, Record::Alloc(a) if a.pid == pid)
                || matches!(r, Record::Free(f) if f.pid == pid)
        })
        .collect();
    let first = seq
        .iter()
        .position(|r| matches!(r, Record::Alloc(a) if a.size == 20011))
        .unwrap();
    let Record::Alloc(a1) = seq[first] else {
        unreachable!()
    };
    match (seq[first + 1], seq[first + 2]) {
        (Record::Free(f), Record::Alloc(a2)) => {
            assert_eq!(f.addr, a1.addr, "realloc frees the old block first");
            assert_eq!(a2.size, 20021);
        }
        other => panic!("realloc recorded as {other:?}"),
    }
    let frees: HashSet<u64> = seq
        .iter()
        .filter_map(|r| match r {
            Record::Free(f) => Some(f.addr),
            _ => None,
        })
        .collect();
    assert!(!frees.contains(&0), "free(NULL) is not an event");
    // Full stacks without frame pointers: level3 <- level2 <- level1 <- main, all in the
    // program, then libc's start-up.
    let st = stacks(&records);
    let maps = mmaps(&records, pid);
    let exe = maps
        .iter()
        .filter(|m| m.path == prog.board.to_str().unwrap())
        .collect::<Vec<_>>();
    assert!(!exe.is_empty(), "the program's mapping is recorded");
    assert!(
        exe.iter().all(|m| m.build_id.len() >= 16),
        "with its build-id"
    );
    let in_exe = |ip: u64| exe.iter().any(|m| ip >= m.start && ip < m.start + m.len);
    let stack = records
        .iter()
        .find_map(|r| match r {
            Record::Alloc(a) if a.size == 10007 => st.get(&(a.pid, a.stack)),
            _ => None,
        })
        .expect("the 10007-byte allocations have a stack");
    assert!(
        stack.len() >= 5 && stack[..4].iter().all(|&ip| in_exe(ip)),
        "level3/level2/level1/main then libc: {stack:x?}"
    );
    // Every ip of every stack lies in a recorded mapping of its process.
    for ((p, _), ips) in &st {
        let maps = mmaps(&records, *p);
        for ip in ips {
            assert!(
                maps.iter().any(|m| *ip >= m.start && *ip < m.start + m.len),
                "ip {ip:#x} of pid {p} is in no recorded mapping"
            );
        }
    }
    assert!(!records
        .iter()
        .any(|r| matches!(r, Record::Lost(l) if l.kind == "heap")));
}

#[test]
fn counts_sizes_realloc_order_and_full_stacks_without_frame_pointers() {
    check_counts_program(&[], "heap_counts");
}

#[test]
fn heap_only_without_cpu_sampling_still_records_maps() {
    check_counts_program(&["--no-cpu"], "heap_counts_nocpu");
}

#[test]
fn eight_threads_lose_and_duplicate_nothing() {
    let prog = build("heap_rec_threads.c", "heap_rec_threads", &["-O2"]);
    let out = scratch().join("heap_rec_threads.zst");
    let o = rec_heap(&out, &["--no-cpu"], &[prog.board.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (records, summary) = read_records(&out);
    assert!(summary.complete);
    let (allocs, _) = counts(&records);
    for t in 0..8 {
        assert_eq!(allocs_of(&allocs, 5000 + t), 20_000, "thread {t}");
    }
    // Per address, events alternate Alloc, Free, Alloc, ... in file order.
    let mut live: HashMap<u64, u64> = HashMap::new();
    let sizes: HashSet<u64> = (5000..5008).collect();
    for r in &records {
        match r {
            Record::Alloc(a) if sizes.contains(&a.size) => {
                assert!(
                    live.insert(a.addr, a.size).is_none(),
                    "{:#x} allocated twice",
                    a.addr
                )
            }
            Record::Free(f) => {
                live.remove(&f.addr);
            }
            _ => {}
        }
    }
    assert!(
        live.is_empty(),
        "every tracked block was freed after it was allocated"
    );
    assert!(!records.iter().any(|r| matches!(r, Record::Lost(_))));
}

#[test]
fn fork_exec_threads_and_signal_handlers_are_counted_exactly() {
    let prog = build("heap_chaos.c", "heap_chaos", &["-O2"]);
    let out = scratch().join("heap_chaos.zst");
    let started = Instant::now();
    let o = rec_heap(&out, &[], &[prog.board.to_str().unwrap()]);
    assert!(started.elapsed() < Duration::from_secs(60), "no hang");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let usr2: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("usr2_allocs="))
        .and_then(|v| v.trim().parse().ok())
        .expect("the program reports its handler's allocations");
    let (records, summary) = read_records(&out);
    assert!(summary.complete);
    let (allocs, _) = counts(&records);
    assert_eq!(allocs_of(&allocs, 40001), 300, "thread");
    assert_eq!(allocs_of(&allocs, 40019), 100, "SIGUSR1 handler");
    assert_eq!(
        allocs_of(&allocs, 40003),
        20_000,
        "main loop under a signal storm"
    );
    assert_eq!(allocs_of(&allocs, 40021), usr2, "SIGUSR2 handler");
    assert_eq!(allocs_of(&allocs, 40009), 100, "fork child");
    assert_eq!(allocs_of(&allocs, 40013), 50, "exec'd image");
    let pid_of = |size| {
        allocs
            .keys()
            .find(|(_, s)| *s == size)
            .map(|(p, _)| *p)
            .unwrap()
    };
    assert_ne!(
        pid_of(40009),
        pid_of(40001),
        "the fork child records with its own pid"
    );
    assert_eq!(
        pid_of(40013),
        pid_of(40001),
        "the exec'd image keeps the pid"
    );
    stacks(&records); // ids stay unique per pid across the exec
    assert!(!records
        .iter()
        .any(|r| matches!(r, Record::Lost(l) if l.kind == "heap")));
}

#[test]
fn a_sigkilled_program_leaves_a_valid_file_with_every_event() {
    let prog = build("heap_chaos.c", "heap_chaos_kill", &["-O2"]);
    let out = scratch().join("heap_kill.zst");
    let o = rec_heap(&out, &["--no-cpu"], &[prog.board.to_str().unwrap(), "kill"]);
    assert_eq!(o.status.code(), Some(128 + 9));
    let (records, summary) = read_records(&out);
    assert!(summary.complete && summary.damage.is_none());
    let (allocs, _) = counts(&records);
    assert_eq!(
        allocs_of(&allocs, 40031),
        200,
        "the ring outlives the process: nothing written before the kill is lost"
    );
}

/// rec is killed while the application allocates, and the application allocates on: it
/// neither blocks nor dies once the ring's reader is gone. Ordered by files, not by sleeps, so
/// that neither a fast processor (the application done before the kill) nor a loaded machine
/// (rec not started yet) can make the test pass or fail without the kill in the middle.
#[test]
fn the_application_runs_on_when_rec_is_killed() {
    let prog = build("heap_chaos.c", "heap_chaos_long", &["-O2"]);
    let out = scratch().join("heap_reckill.zst");
    let done = scratch().join("heap_reckill.done");
    let go = scratch().join("heap_reckill.go");
    let _ = std::fs::remove_file(&done);
    let _ = std::fs::remove_file(&go);
    let mut rec_proc = Command::new(rec())
        .env("CROSSPROF_HEAP_LIB", heap_lib())
        .args(["--heap", "--no-cpu", "--out", out.to_str().unwrap(), "--"])
        .args([
            prog.board.to_str().unwrap(),
            "long",
            "3000000",
            done.to_str().unwrap(),
            go.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn rec");
    // Killed once rec records and the application is in its allocation loop.
    {
        let _rec = cpu_time::KillOnPanic(rec_proc.id());
        let app = cpu_time::child_of(rec_proc.id());
        cpu_time::wait_for_recording(&out);
        cpu_time::run_for_cpu(app, 0.1);
    }
    rec_proc.kill().expect("kill -9 rec");
    rec_proc.wait().expect("reap rec");
    std::fs::write(&go, "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done.exists() {
        assert!(
            Instant::now() < deadline,
            "the application hung after rec died"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, summary) = read_records(&out);
    assert!(summary.frames >= 1, "what was synced stays readable");
}

#[test]
fn impossible_heap_requests_exit_2_with_one_line() {
    let out = scratch().join("heap_fail.zst");
    let stat = scratch().join("heap_static");
    let src = source("heap_rec_threads.c");
    let built = Command::new("musl-gcc")
        .args(["-static", "-O2", "-o"])
        .arg(&stat)
        .arg(&src)
        .status()
        .or_else(|_| {
            Command::new("gcc")
                .args(["-static", "-O2", "-pthread", "-o"])
                .arg(&stat)
                .arg(&src)
                .status()
        })
        .expect("a static build");
    assert!(built.success());
    let cases: [(&[&str], &str); 2] = [
        (&[stat.to_str().unwrap()], "statically linked"),
        (&["-p", "1"], "cannot attach"),
    ];
    for (cmd, msg) in cases {
        let o = if cmd[0] == "-p" {
            Command::new(rec())
                .env("CROSSPROF_HEAP_LIB", heap_lib())
                .args(["--heap", "--out", out.to_str().unwrap()])
                .args(cmd)
                .output()
                .unwrap()
        } else {
            rec_heap(&out, &[], cmd)
        };
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("rec: ") && err.contains(msg), "{err}");
    }
}

#[test]
fn the_unwind_memo_tells_same_depth_callers_and_recursion_depths_apart() {
    let prog = build("heap_memo.c", "heap_memo", &["-O2", "-fomit-frame-pointer"]);
    let out = scratch().join("heap_memo.zst");
    let o = rec_heap(&out, &["--no-cpu"], &[prog.board.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (records, summary) = read_records(&out);
    assert!(summary.complete);
    let st = stacks(&records);
    // Per size: how many allocations, and every distinct stack.
    let mut by_size: HashMap<u64, (u64, HashSet<Vec<u64>>)> = HashMap::new();
    for r in &records {
        if let Record::Alloc(a) = r {
            let ips = st.get(&(a.pid, a.stack)).cloned().unwrap_or_default();
            let e = by_size.entry(a.size).or_default();
            e.0 += 1;
            e.1.insert(ips);
        }
    }
    let one = |size: u64, n: u64| -> Vec<u64> {
        let (count, stacks) = by_size.get(&size).unwrap_or_else(|| panic!("no {size}"));
        assert_eq!(*count, n, "allocations of {size} bytes");
        assert_eq!(stacks.len(), 1, "one stack for {size} bytes: {stacks:x?}");
        stacks.iter().next().unwrap().clone()
    };
    let a = one(24, 20_000);
    let b = one(32, 20_000);
    // Same call site in leaf, at the same depth; different callers.
    assert_eq!(a.len(), b.len());
    assert_eq!(a[0], b[0], "leaf's call of malloc");
    assert_ne!(a[1], b[1], "via_a and via_b");
    let d0 = one(40, 5_000);
    assert_eq!(d0[0], a[0]);
    for d in 1..4u64 {
        let s = one(40 + 8 * d, 5_000);
        assert_eq!(s.len(), d0.len() + d as usize, "depth {d}: {s:x?}");
        assert_eq!(s[0], a[0]);
        // down's recursive call site repeats d times above its call of leaf.
        assert!(s[2..2 + d as usize].iter().all(|&ip| ip == s[2]), "{s:x?}");
        assert_eq!(s[1], d0[1], "down's call of leaf");
        assert_eq!(s[d as usize + 2..], d0[2..], "depth {d} ends like depth 0");
    }
}
