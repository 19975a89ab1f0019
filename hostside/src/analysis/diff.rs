//! Differences between two CPU profiles, per function, as shares of each profile's samples so
//! that recordings of different lengths compare fairly.

use std::collections::BTreeMap;

use crate::analysis::cpu::CpuProfile;

/// One function's change.
#[derive(Debug, Clone, serde::Serialize)]
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
}

impl DiffRow {
    /// New minus old self share.
    pub fn delta_self(&self) -> f64 {
        self.new_self_pct - self.old_self_pct
    }
}

/// Rows for every function in either profile, largest absolute self change first.
pub fn diff(old: &CpuProfile, new: &CpuProfile) -> Vec<DiffRow> {
    let mut rows: BTreeMap<(String, String), DiffRow> = BTreeMap::new();
    for (p, is_new) in [(old, false), (new, true)] {
        let n = p.samples.max(1) as f64;
        for f in &p.functions {
            let fr = p.table.get(f.frame);
            let row = rows
                .entry((fr.function.clone(), fr.module.clone()))
                .or_insert_with(|| DiffRow {
                    function: fr.function.clone(),
                    module: fr.module.clone(),
                    old_self_pct: 0.0,
                    new_self_pct: 0.0,
                    old_total_pct: 0.0,
                    new_total_pct: 0.0,
                });
            let (s, t) = (
                100.0 * f.self_samples as f64 / n,
                100.0 * f.total_samples as f64 / n,
            );
            if is_new {
                row.new_self_pct = s;
                row.new_total_pct = t;
            } else {
                row.old_self_pct = s;
                row.old_total_pct = t;
            }
        }
    }
    let mut v: Vec<DiffRow> = rows.into_values().collect();
    v.sort_by(|a, b| {
        b.delta_self()
            .abs()
            .total_cmp(&a.delta_self().abs())
            .then_with(|| a.function.cmp(&b.function))
    });
    v
}
