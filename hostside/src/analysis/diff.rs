//! Differences between two CPU profiles, per function: each side's samples and their cost
//! (for time events, nanoseconds: the samples' periods summed), the shares of each profile's
//! samples so that recordings of different lengths compare at a glance, and whether the
//! change exceeds the sampling noise.
//!
//! What "changed" means: a function is marked when its self cost changed in absolute terms
//! (its samples compared at each side's samples per unit of cost, so that two sampling
//! frequencies compare) *and* its share of its recording changed, both beyond noise (see
//! [`crate::analysis::significance::mark_counts`]). The absolute test alone answers "did
//! this function get slower", which is the question when both recordings did the same work:
//! when hot_a's work doubles in a 3:1 split, hot_b's share falls from 25% to 14% but its
//! samples do not change, so it is not marked. The share test guards against changes of the
//! whole recording: a machine that ran everything 10% slower, or a longer recording of a
//! daemon, changes every absolute cost but no share, and marks nothing. Compare recordings of
//! the same work (a test run, a benchmark) or of like windows (`--from/--to`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::analysis::cpu::CpuProfile;
use crate::analysis::significance::{mark_counts, Mark};

/// One function's change.
#[derive(Debug, Clone, Serialize)]
pub struct DiffRow {
    /// Function name.
    pub function: String,
    /// Module path.
    pub module: String,
    /// Self share in the old profile, percent.
    pub old_self_pct: f64,
    /// Self share in the new profile, percent.
    pub new_self_pct: f64,
    /// Total share in the old profile, percent.
    pub old_total_pct: f64,
    /// Total share in the new profile, percent.
    pub new_total_pct: f64,
    /// Samples whose innermost frame is this function, old profile.
    pub old_self_samples: u64,
    /// The same, new profile.
    pub new_self_samples: u64,
    /// Samples with this function anywhere on the stack, old profile.
    pub old_total_samples: u64,
    /// The same, new profile.
    pub new_total_samples: u64,
    /// Self time in the old profile, nanoseconds (the self samples' periods summed); null
    /// for events that do not count time.
    pub old_self_ns: Option<u64>,
    /// The same, new profile.
    pub new_self_ns: Option<u64>,
    /// The p-value of the self change (the larger of the absolute and the share test's).
    pub p_value: f64,
    /// Whether the self change exceeds the sampling noise (see the module docs).
    pub significant: bool,
}

impl DiffRow {
    /// New minus old self share.
    pub fn delta_self(&self) -> f64 {
        self.new_self_pct - self.old_self_pct
    }
}

/// What both sides of a comparison sum to: samples and the sum of their periods.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Samples.
    pub samples: u64,
    /// Their periods summed (nanoseconds for time events).
    pub period: u64,
}

impl Totals {
    /// `p`'s totals.
    pub fn of(p: &CpuProfile) -> Totals {
        Totals {
            samples: p.samples,
            period: p.stacks.iter().map(|s| s.period).sum(),
        }
    }

    /// Samples per unit of cost: what a side's counts are compared at (1 when the periods
    /// are unknown, as if both sides sampled alike).
    fn per_cost(&self) -> f64 {
        if self.period == 0 || self.samples == 0 {
            1.0
        } else {
            self.samples as f64 / self.period as f64
        }
    }
}

/// Whether an event's sample periods are nanoseconds.
pub fn counts_time(event: &str) -> bool {
    matches!(event, "cpu-clock" | "task-clock")
}

/// Per function of one profile: self and total samples, self period.
#[derive(Default, Clone, Copy)]
struct Side {
    self_samples: u64,
    total_samples: u64,
    self_period: u64,
}

/// Every function's self and total samples and self period in `p`, by (function, module).
fn sides(p: &CpuProfile) -> BTreeMap<(String, String), Side> {
    let mut out: BTreeMap<(String, String), Side> = BTreeMap::new();
    for f in &p.functions {
        let fr = p.table.get(f.frame);
        let s = out
            .entry((fr.function.clone(), fr.module.clone()))
            .or_default();
        s.self_samples = f.self_samples;
        s.total_samples = f.total_samples;
    }
    for st in &p.stacks {
        if let Some(&leaf) = st.frames.first() {
            let fr = p.table.get(leaf);
            if let Some(s) = out.get_mut(&(fr.function.clone(), fr.module.clone())) {
                s.self_period += st.period;
            }
        }
    }
    out
}

/// Rows for every function in either profile, largest absolute self change first; `time`
/// when the profiles' sample periods are nanoseconds (see [`counts_time`]).
pub fn diff(old: &CpuProfile, new: &CpuProfile, time: bool) -> Vec<DiffRow> {
    let (a, b) = (sides(old), sides(new));
    let mut keys: Vec<&(String, String)> = a.keys().chain(b.keys()).collect();
    keys.sort_unstable();
    keys.dedup();
    let (ta, tb) = (Totals::of(old), Totals::of(new));
    let pct = |k: u64, n: u64| 100.0 * k as f64 / n.max(1) as f64;
    let mut v: Vec<DiffRow> = keys
        .iter()
        .map(|key| {
            let (o, n) = (
                a.get(*key).copied().unwrap_or_default(),
                b.get(*key).copied().unwrap_or_default(),
            );
            DiffRow {
                function: key.0.clone(),
                module: key.1.clone(),
                old_self_pct: pct(o.self_samples, old.samples),
                new_self_pct: pct(n.self_samples, new.samples),
                old_total_pct: pct(o.total_samples, old.samples),
                new_total_pct: pct(n.total_samples, new.samples),
                old_self_samples: o.self_samples,
                new_self_samples: n.self_samples,
                old_total_samples: o.total_samples,
                new_total_samples: n.total_samples,
                old_self_ns: time.then_some(o.self_period),
                new_self_ns: time.then_some(n.self_period),
                p_value: 1.0,
                significant: false,
            }
        })
        .collect();
    let counts: Vec<(u64, u64)> = v
        .iter()
        .map(|r| (r.old_self_samples, r.new_self_samples))
        .collect();
    let marks = mark_counts(
        &counts,
        (ta.per_cost(), tb.per_cost()),
        (ta.samples, tb.samples),
    );
    for (
        r,
        Mark {
            p_value,
            significant,
        },
    ) in v.iter_mut().zip(marks)
    {
        r.p_value = p_value;
        r.significant = significant;
    }
    v.sort_by(|a, b| {
        b.delta_self()
            .abs()
            .total_cmp(&a.delta_self().abs())
            .then_with(|| a.function.cmp(&b.function))
    });
    v
}
