//! Differences between two off-CPU profiles (`hostside diff --off-cpu`): per function and
//! per thread, the nanoseconds waited in each recording, their share of all waiting, the
//! number of waits and whether the change exceeds the noise.
//!
//! An off-CPU recording holds every wait as its own switch-out/in interval, so a function's
//! waits in two recordings are two samples of durations. A row's p-value is the smaller of
//! two tests, doubled (Bonferroni over the two): its blocked waits' durations compared by the
//! Mann-Whitney U test (did the waits get longer or shorter), and their number by the exact
//! conditional binomial test at equal exposures (did it wait more often: the recordings are
//! taken to do the same work). The rows are then marked by Benjamini-Hochberg at
//! [`ALPHA`] (see [`crate::analysis::significance`]). Only blocked waits are tested:
//! preemptions (the thread was runnable, waiting for a CPU) measure the machine's other load
//! more than the program, and vary from run to run of the same program; their time still
//! counts in the nanoseconds shown. Waits are treated as independent.
//!
//! Threads are matched by name: the n-th thread (by thread id) named `worker` in one
//! recording with the n-th named so in the other; thread ids differ from run to run.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::analysis::off_cpu_profile::OffCpuProfile;
use crate::analysis::significance::{
    benjamini_hochberg, mann_whitney, rate_test, smallest_rate_p, ALPHA, MIN_WAITS,
};

/// The smallest change of a row's wait time that is marked, as a fraction of the smaller
/// side: a loaded machine oversleeps a 10 ms nap by 1 to 3 ms, differently from run to run,
/// and with 40 waits the tests call such a shift of the whole distribution real. It is real,
/// but it is the machine's, not the program's; a change of a quarter is the program's.
pub const MIN_CHANGE: f64 = 0.25;

/// One function's or thread's waits in one recording.
#[derive(Debug, Clone, Default, Serialize)]
pub struct WaitSide {
    /// Nanoseconds off-CPU (blocked and preempted) with the function on the stack (for a
    /// thread: all of its off-CPU time).
    pub wait_ns: u64,
    /// That time's share of the recording's off-CPU time, percent.
    pub wait_pct: f64,
    /// Its blocked waits (not preemptions).
    pub waits: u64,
    /// Their mean duration, nanoseconds (0 without waits).
    pub mean_wait_ns: u64,
    /// The blocked waits' durations, for the tests.
    #[serde(skip)]
    durations: Vec<u64>,
}

/// One function's (or thread's) change.
#[derive(Debug, Clone, Serialize)]
pub struct WaitDiffRow {
    /// Function name, or the thread's name.
    pub name: String,
    /// Module path (functions), or empty (threads).
    pub module: String,
    /// Thread ids in the old and new recording (threads only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tids: Option<(u32, u32)>,
    /// The old recording's waits.
    pub old: WaitSide,
    /// The new recording's waits.
    pub new: WaitSide,
    /// New minus old wait, nanoseconds.
    pub delta_ns: i64,
    /// The row's p-value (see the module docs; 1 when not tested).
    pub p_value: f64,
    /// Whether the change exceeds the noise.
    pub significant: bool,
}

/// The whole off-CPU comparison.
#[derive(Debug, Clone, Serialize)]
pub struct OffCpuDiff {
    /// All off-CPU time of the old recording, nanoseconds.
    pub old_wait_ns: u64,
    /// The same, new recording.
    pub new_wait_ns: u64,
    /// Functions by the size of their change in nanoseconds, largest first.
    pub functions: Vec<WaitDiffRow>,
    /// Threads by the size of their change, largest first.
    pub threads: Vec<WaitDiffRow>,
}

/// What the diff reads of one recording: per key, its waits.
type Sides = BTreeMap<(String, String), WaitSide>;

/// Each thread key's thread id in one recording.
type Tids = HashMap<(String, String), u32>;

fn add(side: &mut WaitSide, ns: u64, preempt: bool) {
    side.wait_ns = side.wait_ns.saturating_add(ns);
    if !preempt {
        side.waits += 1;
        side.durations.push(ns);
    }
}

/// Per function (anywhere on the wait's stack, once per wait) of `p`.
fn functions(p: &OffCpuProfile) -> Sides {
    let mut out = Sides::new();
    for w in &p.waits {
        let Some(stack) = p.profile.stacks.get(w.stack as usize) else {
            continue;
        };
        let mut seen = HashSet::new();
        for &f in &stack.frames {
            let fr = p.profile.table.get(f);
            let key = (fr.function.clone(), fr.module.clone());
            if seen.insert(key.clone()) {
                add(out.entry(key).or_default(), w.to - w.from, w.preempt);
            }
        }
    }
    out
}

/// Per thread of `p`, keyed by name and its ordinal among threads so named; with each
/// thread's id.
fn threads(p: &OffCpuProfile) -> (Sides, Tids) {
    let mut by_tid: Vec<(u32, u32, &str)> = p
        .threads
        .iter()
        .map(|t| (t.tid, t.pid, t.comm.as_str()))
        .collect();
    by_tid.sort_unstable();
    let mut ordinal: HashMap<&str, usize> = HashMap::new();
    let mut key_of: HashMap<u32, (String, String)> = HashMap::new();
    let mut tids = HashMap::new();
    let mut out = Sides::new();
    for &(tid, _, comm) in &by_tid {
        let n = ordinal.entry(comm).or_default();
        *n += 1;
        let name = if *n == 1 {
            comm.to_string()
        } else {
            format!("{comm} #{n}")
        };
        let key = (name, String::new());
        tids.insert(key.clone(), tid);
        key_of.insert(tid, key.clone());
        out.entry(key).or_default();
    }
    for w in &p.waits {
        if let Some(key) = key_of.get(&w.tid) {
            if let Some(side) = out.get_mut(key) {
                add(side, w.to - w.from, w.preempt);
            }
        }
    }
    // A thread's time off the CPU is its own account (the waits with no stack included).
    for t in &p.threads {
        if let Some(side) = key_of.get(&t.tid).and_then(|k| out.get_mut(k)) {
            side.wait_ns = t.times.off_cpu_ns();
        }
    }
    (out, tids)
}

/// Rows of both sides' keys, tested and sorted by the size of their change.
fn rows(
    mut a: Sides,
    mut b: Sides,
    totals: (u64, u64),
    tids: Option<(&Tids, &Tids)>,
) -> Vec<WaitDiffRow> {
    let mut keys: Vec<(String, String)> = a.keys().chain(b.keys()).cloned().collect();
    keys.sort_unstable();
    keys.dedup();
    let finish = |s: &mut WaitSide, total: u64| {
        s.wait_pct = 100.0 * s.wait_ns as f64 / total.max(1) as f64;
        s.mean_wait_ns = s.durations.iter().sum::<u64>() / s.waits.max(1);
    };
    let mut v: Vec<WaitDiffRow> = Vec::with_capacity(keys.len());
    let mut tested = Vec::with_capacity(keys.len());
    for key in keys {
        let mut old = a.remove(&key).unwrap_or_default();
        let mut new = b.remove(&key).unwrap_or_default();
        finish(&mut old, totals.0);
        finish(&mut new, totals.1);
        let durations = mann_whitney(&old.durations, &new.durations);
        let count = rate_test(old.waits, new.waits, 1.0, 1.0);
        let p_value = (2.0 * durations.min(count)).min(1.0);
        let enough = old.waits.min(new.waits) >= MIN_WAITS as u64
            || smallest_rate_p(old.waits + new.waits) <= ALPHA / 2.0;
        tested.push(enough.then_some(p_value));
        v.push(WaitDiffRow {
            tids: tids.and_then(|(x, y)| Some((*x.get(&key)?, *y.get(&key)?))),
            name: key.0,
            module: key.1,
            delta_ns: new.wait_ns as i64 - old.wait_ns as i64,
            old,
            new,
            p_value,
            significant: false,
        });
    }
    for (r, m) in v.iter_mut().zip(benjamini_hochberg(&tested, ALPHA)) {
        let (lo, hi) = (
            r.old.wait_ns.min(r.new.wait_ns),
            r.old.wait_ns.max(r.new.wait_ns),
        );
        r.significant = m && (hi - lo) as f64 >= MIN_CHANGE * lo as f64;
    }
    v.sort_by(|x, y| {
        y.delta_ns
            .unsigned_abs()
            .cmp(&x.delta_ns.unsigned_abs())
            .then_with(|| x.name.cmp(&y.name))
    });
    v
}

/// The comparison of `old` with `new`.
pub fn diff(old: &OffCpuProfile, new: &OffCpuProfile) -> OffCpuDiff {
    let totals = (old.wait_ns, new.wait_ns);
    let functions = rows(functions(old), functions(new), totals, None);
    let ((ta, ia), (tb, ib)) = (threads(old), threads(new));
    let threads = rows(ta, tb, totals, Some((&ia, &ib)));
    OffCpuDiff {
        old_wait_ns: old.wait_ns,
        new_wait_ns: new.wait_ns,
        functions,
        threads,
    }
}
