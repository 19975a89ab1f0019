//! Synthetic record streams through the whole heap analysis: every counting rule, several
//! threads and processes, exec and fork, and hostile input. Addresses are not mapped, so each
//! return address becomes its own unsymbolized frame named `0x<ip>`, which is enough to tell
//! sites apart.

use crossprof_format::{Alloc, Comm, End, Free, Lost, Record, Rss, StackNode, Task};
use crossprof_symbols::Lookup;

use super::*;
use crate::processes::Processes;
use crate::resolve::Resolver;

#[derive(Default)]
struct Stream {
    recs: Vec<Record>,
    time: u64,
}

impl Stream {
    /// Lets `ns` pass.
    fn wait(&mut self, ns: u64) -> &mut Self {
        self.time += ns;
        self
    }
    fn tick(&mut self) -> u64 {
        self.time += 10;
        self.time
    }
    /// A one-frame stack `id` at `ip` in process `pid`.
    fn stack(&mut self, pid: u32, id: u64, parent: u64, ip: u64) -> &mut Self {
        self.recs.push(Record::StackNode(StackNode {
            pid,
            id,
            parent,
            ip,
        }));
        self
    }
    fn alloc(&mut self, pid: u32, tid: u32, addr: u64, size: u64, stack: u64) -> &mut Self {
        let time = self.tick();
        self.recs.push(Record::Alloc(Alloc {
            time,
            pid,
            tid,
            addr,
            size,
            stack,
        }));
        self
    }
    fn free(&mut self, pid: u32, tid: u32, addr: u64) -> &mut Self {
        let time = self.tick();
        self.recs.push(Record::Free(Free {
            time,
            pid,
            tid,
            addr,
        }));
        self
    }
    fn realloc(&mut self, pid: u32, old: u64, new: u64, size: u64, stack: u64) -> &mut Self {
        if old != 0 {
            self.free(pid, pid, old);
        }
        self.alloc(pid, pid, new, size, stack)
    }
    fn push(&mut self, r: Record) -> &mut Self {
        self.recs.push(r);
        self
    }
    fn run(&self) -> (HeapProfile, Processes) {
        self.run_with(HeapOptions::default())
    }
    fn run_with(&self, opts: HeapOptions) -> (HeapProfile, Processes) {
        let processes = Processes::build(&mut |f| {
            for r in &self.recs {
                f(r.clone())
            }
        });
        let resolver = Resolver::new(
            &processes,
            &Lookup {
                sysroot: None,
                debug_dirs: vec![],
                search_dirs: vec![],
            },
        );
        let p = analyze(
            &mut |f| {
                for r in &self.recs {
                    f(r.clone())
                }
            },
            &processes,
            &resolver,
            0,
            opts,
        );
        check_invariants(&p);
        (p, processes)
    }
}

/// What must hold for any input.
fn check_invariants(p: &HeapProfile) {
    let t = &p.totals;
    assert!(t.temporary <= t.allocations);
    let sum = |f: fn(&HeapCounts) -> u64| {
        p.sites
            .iter()
            .fold(0u64, |a, s| a.saturating_add(f(&s.counts)))
    };
    assert_eq!(sum(|c| c.allocations), t.allocations);
    assert_eq!(sum(|c| c.temporary), t.temporary);
    assert_eq!(sum(|c| c.leaked_bytes), t.leaked_bytes);
    assert_eq!(sum(|c| c.leaked_allocations), t.leaked_allocations);
    assert_eq!(sum(|c| c.at_peak_bytes), t.peak_bytes);
    for s in &p.sites {
        assert!(s.counts.peak_bytes >= s.counts.at_peak_bytes);
        assert!(s.counts.peak_bytes >= s.counts.leaked_bytes);
        assert!(!s.traces.is_empty());
    }
    for tr in &p.traces {
        assert!(!tr.frames.is_empty());
        assert!(tr.site < p.sites.len());
    }
    assert!(t.leaked_allocations + t.suppressed_leaked_allocations <= t.allocations);
}

/// The site whose frame is the return address `ip`.
fn site(p: &HeapProfile, ip: u64) -> &SiteRow {
    let name = format!("{ip:#x}");
    p.sites
        .iter()
        .find(|s| p.table.get(s.frame).function == name)
        .unwrap_or_else(|| panic!("no site {name}"))
}

#[test]
fn counts_temporaries_leaks_and_peak() {
    let mut s = Stream::default();
    s.stack(1, 1, 0, 0x100).stack(1, 2, 0, 0x200);
    // Three short-lived blocks at site A.
    for _ in 0..3 {
        s.alloc(1, 1, 0xa0, 16, 1).free(1, 1, 0xa0);
    }
    // Two leaks at site B, one freed block at B that is not temporary.
    s.alloc(1, 1, 0xb0, 100, 2)
        .alloc(1, 1, 0xb1, 100, 2)
        .alloc(1, 1, 0xb2, 50, 2)
        .alloc(1, 1, 0xa1, 8, 1)
        .free(1, 1, 0xb2);
    let (p, _) = s.run();
    let t = &p.totals;
    assert_eq!(t.allocations, 7);
    assert_eq!(t.temporary, 3);
    assert_eq!(t.allocated_bytes, 3 * 16 + 250 + 8);
    assert_eq!(t.peak_bytes, 258);
    assert_eq!(t.leaked_bytes, 208);
    assert_eq!(t.leaked_allocations, 3);
    let a = site(&p, 0x100);
    assert_eq!(
        (
            a.counts.allocations,
            a.counts.temporary,
            a.counts.peak_bytes
        ),
        (4, 3, 16)
    );
    assert_eq!((a.counts.leaked_bytes, a.counts.leaked_allocations), (8, 1));
    let b = site(&p, 0x200);
    assert_eq!((b.counts.allocations, b.counts.temporary), (3, 0));
    assert_eq!((b.counts.peak_bytes, b.counts.at_peak_bytes), (250, 250));
    assert_eq!(
        (b.counts.leaked_bytes, b.counts.leaked_allocations),
        (200, 2)
    );
    assert_eq!(a.counts.at_peak_bytes, 8);
    // The peak was reached by the allocation of 0xa1 (the 10th event).
    assert_eq!(t.peak_time, 100);
    // Sites are sorted by allocations.
    assert_eq!(p.table.get(p.sites[0].frame).function, "0x100");
}

#[test]
fn own_peak_differs_from_share_of_the_global_peak() {
    // Site A peaks at 1000 early; the global peak (1500) comes later when A holds 0.
    let mut s = Stream::default();
    s.stack(1, 1, 0, 0x100).stack(1, 2, 0, 0x200);
    s.alloc(1, 1, 0x1, 1000, 1)
        .free(1, 1, 0x1)
        .alloc(1, 1, 0x2, 1500, 2)
        .free(1, 1, 0x2);
    let (p, _) = s.run();
    let (a, b) = (site(&p, 0x100), site(&p, 0x200));
    assert_eq!((a.counts.peak_bytes, a.counts.at_peak_bytes), (1000, 0));
    assert_eq!((b.counts.peak_bytes, b.counts.at_peak_bytes), (1500, 1500));
    assert_eq!(p.totals.peak_bytes, 1500);
}

#[test]
fn realloc_chains_count_like_heaptrack() {
    // p = malloc(8); then realloc five times, each immediately after the previous: every
    // resize frees the block allocated just before it, so 5 of 6 are temporary, and the last
    // block leaks. heaptrack_print counts exactly this.
    let mut s = Stream::default();
    s.stack(1, 1, 0, 0x100).stack(1, 2, 0, 0x200);
    s.alloc(1, 1, 0x10, 8, 1);
    let mut addr = 0x10;
    for i in 1..=5u64 {
        let new = if i % 2 == 0 { 0x10 } else { 0x20 + i };
        s.realloc(1, addr, new, 8 << i, 2);
        addr = new;
    }
    let (p, _) = s.run();
    assert_eq!(p.totals.allocations, 6);
    assert_eq!(p.totals.temporary, 5);
    assert_eq!(p.totals.leaked_bytes, 8 << 5);
    assert_eq!(p.totals.leaked_allocations, 1);
    assert_eq!(p.totals.peak_bytes, 8 << 5);

    // A growing buffer with another allocation between resizes: none is temporary.
    let mut s = Stream::default();
    s.stack(1, 1, 0, 0x100).stack(1, 2, 0, 0x200);
    let mut buf = 0;
    for i in 1..=4u64 {
        let new = 0x1000 + i;
        s.realloc(1, buf, new, 16 * i, 1);
        buf = new;
        s.alloc(1, 1, 0x9000 + i, 1, 2);
    }
    let (p, _) = s.run();
    assert_eq!(p.totals.allocations, 8);
    assert_eq!(p.totals.temporary, 0);
    assert_eq!(site(&p, 0x100).counts.leaked_allocations, 1);
    assert_eq!(site(&p, 0x100).counts.peak_bytes, 64);
}

#[test]
fn temporaries_across_threads_follow_event_order() {
    let mut s = Stream::default();
    s.stack(1, 1, 0, 0x100).stack(1, 2, 0, 0x200);
    // Thread 2 allocates between thread 1's malloc and free: not temporary.
    s.alloc(1, 1, 0x10, 16, 1)
        .alloc(1, 2, 0x20, 32, 2)
        .free(1, 1, 0x10)
        .free(1, 2, 0x20);
    // Thread 2 frees a block right after thread 1 allocated one with the same size and stack:
    // heaptrack compares (size, stack), so this counts.
    s.alloc(1, 2, 0x30, 24, 1)
        .alloc(1, 1, 0x40, 24, 1)
        .free(1, 2, 0x30);
    // A free by another thread of the block just allocated counts too.
    s.alloc(1, 1, 0x50, 64, 2).free(1, 2, 0x50);
    let (p, _) = s.run();
    assert_eq!(p.totals.allocations, 5);
    assert_eq!(p.totals.temporary, 2);
    assert_eq!(site(&p, 0x100).counts.temporary, 1);
    assert_eq!(site(&p, 0x200).counts.temporary, 1);
}

#[test]
fn processes_are_counted_apart_and_summed() {
    let mut s = Stream::default();
    s.stack(1, 1, 0, 0x100).stack(2, 1, 0, 0x100);
    // Interleaved processes: each has its own marker, so both frees are temporary.
    s.alloc(1, 1, 0x10, 100, 1)
        .alloc(2, 2, 0x10, 200, 1)
        .free(1, 1, 0x10)
        .alloc(1, 1, 0x10, 50, 1)
        .free(2, 2, 0x10);
    let (p, _) = s.run();
    assert_eq!(p.totals.allocations, 3);
    assert_eq!(p.totals.peak_bytes, 300);
    assert_eq!(p.totals.leaked_bytes, 50);
    assert_eq!(p.address_spaces, 2);
    // The same address in two processes are two blocks.
    assert_eq!(p.anomalies.reused_live_addresses, 0);
    assert_eq!(p.anomalies.unknown_frees, 0);
    // Both processes have a stack at 0x100: two traces, one site.
    assert_eq!(p.traces.len(), 2);
    assert_eq!(p.sites.len(), 1);
}

#[test]
fn exec_starts_a_new_heap_and_fork_inherits_stack_ids() {
    let mut s = Stream::default();
    s.stack(1, 1, 0, 0x100);
    s.alloc(1, 1, 0x10, 10, 1).wait(1_000_000_000);
    let t = s.tick();
    s.push(Record::Comm(Comm {
        time: t,
        pid: 1,
        tid: 1,
        comm: "new".into(),
        exec: true,
    }));
    // The new image redefines id 1; freeing the old address is unknown in the new image.
    s.stack(1, 1, 0, 0x900);
    s.free(1, 1, 0x10).alloc(1, 1, 0x20, 20, 1);
    // A forked child allocates with an id only its parent defined.
    let t = s.tick();
    s.push(Record::Fork(Task {
        time: t,
        pid: 3,
        tid: 3,
        ppid: 1,
        ptid: 1,
    }));
    s.alloc(3, 3, 0x30, 30, 1);
    let (p, _) = s.run();
    assert_eq!(p.totals.allocations, 3);
    assert_eq!(p.anomalies.unknown_frees, 1);
    assert_eq!(p.totals.leaked_bytes, 60);
    assert_eq!(site(&p, 0x100).counts.allocations, 1);
    assert_eq!(site(&p, 0x900).counts.allocations, 2);
    assert_eq!(p.anomalies.unknown_stack_allocations, 0);
    assert_eq!(p.anomalies.tree.redefined, 1);
}

#[test]
fn coarse_heap_stamps_just_before_an_exec_belong_to_the_new_image() {
    // The interposer's clock runs up to a tick behind: the new image's first allocation can be
    // stamped before rec's exec record.
    let mut s = Stream::default();
    s.wait(1_000_000_000);
    let exec = s.time;
    s.push(Record::Comm(Comm {
        time: exec,
        pid: 1,
        tid: 1,
        comm: "new".into(),
        exec: true,
    }));
    s.stack(1, 1, 0, 0x100);
    s.time = exec - 4_000_000;
    s.alloc(1, 1, 0x10, 10, 1);
    s.time = exec + 1_000_000;
    s.free(1, 1, 0x10);
    let (p, _) = s.run();
    assert_eq!(p.address_spaces, 1);
    assert_eq!(p.anomalies.unknown_frees, 0);
    assert_eq!(p.totals.temporary, 1);
}

#[test]
fn same_call_site_through_different_callers_is_one_site() {
    let mut s = Stream::default();
    // leaf 0x100 called from 0x500 and from 0x600.
    s.stack(1, 1, 0, 0x500)
        .stack(1, 2, 1, 0x100)
        .stack(1, 3, 0, 0x600)
        .stack(1, 4, 3, 0x100);
    s.alloc(1, 1, 0x10, 1, 2)
        .alloc(1, 1, 0x11, 1, 4)
        .alloc(1, 1, 0x12, 1, 4);
    let (p, processes) = s.run();
    assert_eq!(p.sites.len(), 1);
    let site = &p.sites[0];
    assert_eq!(site.counts.allocations, 3);
    assert_eq!(site.traces.len(), 2);
    // The most frequent stack comes first.
    let first = &p.traces[site.traces[0]];
    let names: Vec<&str> = first
        .frames
        .iter()
        .map(|&f| p.table.get(f).function.as_str())
        .collect();
    assert_eq!(names, ["0x100", "0x600"]);
    let folded = crate::output::folded::heap(&p, &processes.final_names(), HeapMetric::Allocations);
    assert_eq!(folded, ["?;0x500;0x100 1", "?;0x600;0x100 2"]);
    assert!(
        crate::output::folded::heap(&p, &processes.final_names(), HeapMetric::Temporary).is_empty()
    );
}

#[test]
fn peak_flame_graph_adds_up_to_the_peak() {
    let mut s = Stream::default();
    s.stack(1, 1, 0, 0x100).stack(1, 2, 0, 0x200);
    s.alloc(1, 1, 0x1, 300, 1)
        .alloc(1, 1, 0x2, 200, 2)
        .free(1, 1, 0x1)
        .alloc(1, 1, 0x3, 100, 2)
        .alloc(1, 1, 0x4, 350, 2);
    let (p, processes) = s.run();
    assert_eq!(p.totals.peak_bytes, 650);
    let lines = crate::output::folded::heap(&p, &processes.final_names(), HeapMetric::Peak);
    assert_eq!(lines, ["?;0x200 650"]);
    let lines = crate::output::folded::heap(&p, &processes.final_names(), HeapMetric::Leaked);
    assert_eq!(lines, ["?;0x200 650"]);
}

#[test]
fn rss_lost_events_end_and_largest() {
    let mut s = Stream::default();
    s.stack(1, 1, 0, 0x100);
    s.push(Record::Rss(Rss {
        time: 5,
        pid: 1,
        bytes: 4096,
    }));
    s.alloc(1, 1, 0x1, 5, 1)
        .alloc(1, 1, 0x2, 500, 1)
        .alloc(1, 1, 0x3, 50, 1)
        .alloc(1, 1, 0x4, 500, 1);
    s.push(Record::Rss(Rss {
        time: 60,
        pid: 2,
        bytes: 8192,
    }));
    s.push(Record::Lost(Lost {
        time: 70,
        count: 3,
        kind: "heap".into(),
    }));
    s.push(Record::Lost(Lost {
        time: 70,
        count: 9,
        kind: "samples".into(),
    }));
    s.push(Record::End(End {
        time: 1_000,
        exit_status: 0,
        samples: 0,
        lost_samples: 0,
    }));
    let (p, _) = s.run_with(HeapOptions {
        largest: 2,
        suppressions: true,
        ..HeapOptions::default()
    });
    assert_eq!(p.totals.peak_rss_bytes, 4096 + 8192);
    assert_eq!(p.lost_events, 3);
    assert_eq!(p.end_time, 1_000);
    let sizes: Vec<(u64, u64)> = p.largest.iter().map(|l| (l.size, l.time)).collect();
    assert_eq!(sizes, [(500, 20), (500, 40)]);
    assert!(p.timeline.iter().any(|b| b.rss_max == Some(12288)));
    assert_eq!(
        p.timeline.iter().filter_map(|b| b.heap_max).max(),
        Some(1055)
    );
}

#[test]
fn hostile_streams_never_panic_and_stay_consistent() {
    let mut s = Stream::default();
    // Unknown stack ids, id 0, cycles, self-parents, frees of unknown addresses, null blocks,
    // reused live addresses, sizes that overflow when summed.
    s.stack(1, 5, 6, 0x500)
        .stack(1, 6, 5, 0x600)
        .stack(1, 7, 7, 0x700);
    s.alloc(1, 1, 0x1, 1, 999)
        .alloc(1, 1, 0x2, 1, 0)
        .alloc(1, 1, 0x3, u64::MAX, 5)
        .alloc(1, 1, 0x4, u64::MAX, 7)
        .alloc(1, 1, 0, 8, 5)
        .free(1, 1, 0xdead)
        .free(1, 1, 0)
        .alloc(1, 1, 0x1, 2, 5)
        .free(1, 1, 0x1)
        .free(1, 1, 0x1);
    let (p, _) = s.run();
    assert_eq!(p.anomalies.unknown_stack_allocations, 2);
    assert_eq!(p.anomalies.null_allocations, 1);
    assert_eq!(p.anomalies.unknown_frees, 2);
    assert_eq!(p.anomalies.reused_live_addresses, 1);
    assert_eq!(p.anomalies.tree.truncated, 2);
    assert_eq!(p.totals.allocations, 5);
    assert_eq!(site(&p, 0x500).counts.allocations, 2);
    assert!(p
        .sites
        .iter()
        .any(|s| p.table.get(s.frame).function == UNKNOWN_STACK));
    // The orphaned block at 0x1 stays live, as in heaptrack.
    assert_eq!(p.totals.leaked_allocations, 4);
}

#[test]
fn random_streams_keep_the_invariants() {
    // A small xorshift generator: deterministic, no dependency.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for _round in 0..50 {
        let mut s = Stream::default();
        for _ in 0..300 {
            match next(6) {
                0 => {
                    let (id, parent, ip) = (next(20), next(20), next(8) * 0x10);
                    s.stack(1 + next(2) as u32, id, parent, ip);
                }
                1 | 2 => {
                    let (pid, addr, size, st) =
                        (1 + next(2) as u32, next(16), next(1000), next(22));
                    s.alloc(pid, pid, addr, size, st);
                }
                3 | 4 => {
                    let (pid, addr) = (1 + next(2) as u32, next(16));
                    s.free(pid, pid, addr);
                }
                _ => {
                    let t = s.tick();
                    s.push(Record::Rss(Rss {
                        time: t,
                        pid: 1,
                        bytes: next(1 << 20),
                    }));
                }
            }
        }
        let (p, _) = s.run();
        let live: u64 = p.traces.iter().map(|t| t.counts.leaked_bytes).sum();
        assert_eq!(live, p.totals.leaked_bytes);
    }
}

#[test]
fn diff_matches_sites_and_reports_changes() {
    let mut a = Stream::default();
    a.stack(1, 1, 0, 0x100).stack(1, 2, 0, 0x200);
    a.alloc(1, 1, 0x1, 10, 1)
        .free(1, 1, 0x1)
        .alloc(1, 1, 0x2, 20, 2);
    let mut b = Stream::default();
    b.stack(1, 1, 0, 0x100).stack(1, 2, 0, 0x300);
    b.alloc(1, 1, 0x1, 10, 1)
        .alloc(1, 1, 0x3, 10, 1)
        .alloc(1, 1, 0x2, 40, 2);
    let (pa, _) = a.run();
    let (pb, _) = b.run();
    let d = diff::diff(&pa, &pb);
    assert_eq!(d.delta.allocations, 1);
    assert_eq!(d.delta.leaked_bytes, 60 - 20);
    assert_eq!(d.delta.temporary, -1);
    let row = |name: &str| d.sites.iter().find(|s| s.function == name).unwrap();
    assert_eq!(row("0x100").delta.allocations, 1);
    assert_eq!(row("0x100").delta.leaked_allocations, 2);
    assert_eq!(row("0x200").new.allocations, 0);
    assert_eq!(row("0x300").old.allocations, 0);
    assert_eq!(row("0x300").new.leaked_bytes, 40);
    // Nothing changed: no rows.
    assert!(diff::diff(&pa, &pa).sites.is_empty());
}

#[test]
fn a_window_counts_only_its_own_allocations() {
    let mut s = Stream::default();
    s.stack(1, 1, 0, 0x100).stack(1, 2, 0, 0x200);
    s.alloc(1, 1, 0xa, 100, 1).wait(80); // A at 10: before the window [100, 300)
    s.alloc(1, 1, 0xb, 50, 1) // B at 110, still live at 300
        .free(1, 1, 0xa) // A's free: allocated before, ignored
        .alloc(1, 2, 0xc, 70, 2) // C by thread 2, freed at once by thread 1: temporary
        .free(1, 1, 0xc)
        .alloc(1, 1, 0xd, 30, 2) // D at 150, still live at 300
        .wait(150);
    s.free(1, 1, 0xb).alloc(1, 1, 0xe, 999, 1); // after the window
    let mut tasks = crate::filter::Tasks::default();
    tasks.add(1, 1);
    tasks.add(1, 2);
    let run = |tid| {
        let f = crate::filter::Filter {
            from_ns: Some(100),
            to_ns: Some(300),
            pid: None,
            tid,
        };
        let window = f.bind("t", 0, 1000, &tasks).unwrap();
        s.run_with(HeapOptions {
            window,
            ..HeapOptions::default()
        })
        .0
    };
    let p = run(None);
    let t = &p.totals;
    assert_eq!((t.allocations, t.temporary, t.peak_bytes), (3, 1, 120));
    assert_eq!((t.leaked_bytes, t.leaked_allocations), (80, 2));
    assert_eq!((p.frees_outside, p.anomalies.unknown_frees), (1, 0));
    // Thread 2's allocations only; their frees count whichever thread makes them.
    let p = run(Some(2));
    let t = &p.totals;
    assert_eq!((t.allocations, t.temporary, t.peak_bytes), (1, 1, 70));
    assert_eq!((t.leaked_bytes, p.frees_outside), (0, 1));
}
