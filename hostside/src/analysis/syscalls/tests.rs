use crossprof_format::Arch;

use super::names::{errno_name, errno_of, syscall_name};
use super::pairing::{signed, Call, Exit, Threads};
use super::stats::{per_call, per_thread};

const ALL: fn(u64, u32, u32) -> bool = |_, _, _| true;

fn neg(errno: i64) -> u64 {
    (-errno) as u64
}

/// Exits that reach the file before their entries (another CPU's ring drained first) still
/// close them: each thread's events are sorted by time before pairing.
#[test]
fn exits_pair_with_entries_whatever_the_file_order() {
    let mut t = Threads::default();
    // Thread 11 entered `read` (0) on CPU 0 at 100 and left on CPU 1 at 250; CPU 1's ring
    // came first. Then `write` (1), 300..310.
    t.exit(10, 11, 250, 8);
    t.exit(10, 11, 310, 4);
    t.enter(10, 11, 100, 0);
    t.enter(10, 11, 300, 1);
    // Thread 12 interleaved with it.
    t.enter(10, 12, 120, 39);
    t.exit(10, 12, 121, 10);
    let p = t.pair(ALL, false);
    assert_eq!(p.unpaired_exits, 0);
    let call = |tid, entry, nr, ns, ret| Call {
        pid: 10,
        tid,
        entry,
        nr,
        exit: Some(Exit { ns, ret }),
    };
    assert_eq!(
        p.calls,
        [
            call(11, 100, 0, 150, 8),
            call(11, 300, 1, 10, 4),
            call(12, 120, 39, 1, 10)
        ]
    );
    assert_eq!(p.find(11, 300).map(|c| c.nr), Some(1));
    assert_eq!(p.find(11, 301), None);
}

/// An entry whose exit is missing before the thread's next entry, or before the end, is
/// unfinished; an exit with nothing open is unpaired.
#[test]
fn unfinished_calls_and_unpaired_exits() {
    let mut t = Threads::default();
    t.exit(1, 1, 50, 0); // its entry was before the recording: unpaired
    t.enter(1, 1, 100, 231); // exit_group: never returns...
    t.enter(1, 1, 200, 0); // ...and this entry is the next call (a damaged file)
    t.exit(1, 1, 260, 5);
    t.exit(1, 1, 270, 5); // a second exit for one entry: unpaired
    t.enter(1, 1, 300, 0); // still blocked at the end
    let p = t.pair(ALL, false);
    assert_eq!(p.unpaired_exits, 2);
    let shape: Vec<(u64, Option<u64>)> = p
        .calls
        .iter()
        .map(|c| (c.entry, c.exit.map(|e| e.ns)))
        .collect();
    assert_eq!(shape, [(100, None), (200, Some(60)), (300, None)]);

    let rows = per_call(&p.calls, Arch::X86_64, |_| None);
    let read = rows.iter().find(|r| r.name == "read").unwrap();
    assert_eq!(
        (
            read.count,
            read.unfinished,
            read.total_ns,
            read.max_ns,
            read.mean_ns()
        ),
        (2, 1, 60, 60, 60)
    );
    let exit_group = rows.iter().find(|r| r.name == "exit_group").unwrap();
    assert_eq!((exit_group.count, exit_group.unfinished), (1, 1));
    assert_eq!((exit_group.total_ns, exit_group.mean_ns()), (0, 0));
}

/// The window selects calls by their entry, and unpaired exits by their time.
#[test]
fn the_window_keeps_calls_by_their_entry() {
    let mut t = Threads::default();
    t.exit(1, 1, 10, 0);
    t.enter(1, 1, 90, 0);
    t.exit(1, 1, 120, 0); // entered before the window: left out, though it ends inside
    t.enter(1, 1, 150, 0);
    t.exit(1, 1, 900, 0); // entered inside: kept, all 750 ns
    t.enter(2, 2, 150, 0); // another process
    let p = t.pair(|time, pid, _| (100..200).contains(&time) && pid == 1, false);
    assert_eq!(p.unpaired_exits, 0);
    assert_eq!(p.calls.len(), 1);
    assert_eq!(p.calls[0].entry, 150);
    assert_eq!(p.calls[0].exit, Some(Exit { ns: 750, ret: 0 }));
}

/// Errors are returns in -4095..=-1, counted per call with their errnos; other negative
/// values (an address from mmap, a large lseek offset) are results.
#[test]
fn errors_with_their_errno_breakdown() {
    let mut t = Threads::default();
    let mut time = 0;
    let mut call = |t: &mut Threads, nr: u64, ret: u64| {
        t.enter(1, 1, time, nr);
        t.exit(1, 1, time + 10, ret);
        time += 100;
    };
    for _ in 0..100 {
        call(&mut t, 1, neg(9)); // write -> EBADF
    }
    for _ in 0..3 {
        call(&mut t, 1, neg(32)); // write -> EPIPE
    }
    for _ in 0..7 {
        call(&mut t, 1, 4096);
    }
    call(&mut t, 1, neg(4096)); // not an error: outside -4095..=-1
    call(&mut t, 2, neg(2)); // open -> ENOENT
    call(&mut t, 2, neg(4095)); // the last errno
    let p = t.pair(ALL, false);
    let rows = per_call(&p.calls, Arch::X86_64, |_| Some(0));
    let write = &rows[0];
    assert_eq!(write.name, "write");
    assert_eq!((write.count, write.errors), (111, 103));
    assert_eq!(write.errnos, [(9, 100), (32, 3)]);
    assert_eq!(
        (write.total_ns, write.max_ns, write.mean_ns()),
        (1110, 10, 10)
    );
    assert_eq!(write.stacks.len(), 1);
    assert_eq!(
        (write.stacks[0].count, write.stacks[0].total_ns),
        (111, 1110)
    );
    let open = &rows[1];
    assert_eq!((open.name.as_str(), open.errors), ("open", 2));
    assert_eq!(open.errnos, [(2, 1), (4095, 1)]);
    assert_eq!(errno_name(9), "EBADF");
    assert_eq!(errno_name(32), "EPIPE");
    assert_eq!(errno_name(512), "ERESTARTSYS");
    assert_eq!(errno_name(4095), "errno_4095");
    assert_eq!(errno_of(-1), Some(1));
    assert_eq!(errno_of(0), None);
    assert_eq!(errno_of(-4096), None);

    let threads = per_thread(&p.calls, |tid| format!("t{tid}"));
    assert_eq!(threads.len(), 1);
    assert_eq!(
        (
            threads[0].comm.as_str(),
            threads[0].calls,
            threads[0].errors
        ),
        ("t1", 113, 105)
    );
}

/// Calls are named by the recording's architecture's numbers.
#[test]
fn names_follow_the_architecture() {
    assert_eq!(syscall_name(Arch::X86_64, 39), "getpid");
    assert_eq!(syscall_name(Arch::Aarch64, 172), "getpid");
    assert_eq!(syscall_name(Arch::Arm, 20), "getpid");
    assert_eq!(syscall_name(Arch::Riscv64, 172), "getpid");
    assert_eq!(syscall_name(Arch::X86, 20), "getpid");
    assert_eq!(syscall_name(Arch::X86_64, 1), "write");
    assert_eq!(syscall_name(Arch::Aarch64, 64), "write");
    assert_eq!(syscall_name(Arch::Arm, 4), "write");
    assert_eq!(syscall_name(Arch::X86_64, 100_000), "syscall_100000");
    assert_eq!(syscall_name(Arch::X86_64, -1), "syscall_-1");
}

/// A 32-bit board's `long` is read from its low 32 bits, sign-extended or not.
#[test]
fn a_32_bit_board_s_return_values_are_32_bit() {
    assert_eq!(signed(0xffff_fff7, true), -9);
    assert_eq!(signed(neg(9), true), -9);
    assert_eq!(signed(0xffff_fff7, false), 0xffff_fff7);
    assert_eq!(signed(neg(9), false), -9);
    let mut t = Threads::default();
    t.enter(1, 1, 0, 4);
    t.exit(1, 1, 5, 0xffff_fff7);
    let p = t.pair(ALL, true);
    let rows = per_call(&p.calls, Arch::Arm, |_| None);
    assert_eq!((rows[0].name.as_str(), rows[0].errors), ("write", 1));
    assert_eq!(rows[0].errnos, [(9, 1)]);
}

/// Calls of one name made from different stacks are told apart, most time first.
#[test]
fn stacks_per_call_most_time_first() {
    let mut t = Threads::default();
    for i in 0..10u64 {
        t.enter(1, 1, i * 100, 35); // nanosleep
        t.exit(1, 1, i * 100 + if i < 3 { 50 } else { 5 }, 0);
    }
    let p = t.pair(ALL, false);
    // The first three calls come from stack 7, the others from stack 2.
    let rows = per_call(&p.calls, Arch::X86_64, |c| {
        Some(if c.entry < 300 { 7 } else { 2 })
    });
    assert_eq!(rows.len(), 1);
    let s: Vec<(Option<u32>, u64, u64)> = rows[0]
        .stacks
        .iter()
        .map(|s| (s.stack, s.count, s.total_ns))
        .collect();
    assert_eq!(s, [(Some(7), 3, 150), (Some(2), 7, 35)]);
    assert_eq!((rows[0].total_ns, rows[0].max_ns), (185, 50));
}
