//! Differences between two heap profiles, per site. Sites are matched by function, source file,
//! line and module path (not by address, which changes with every build), as heaptrack's diff
//! matches locations without their addresses.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use serde::Serialize;

use crate::analysis::heap::{HeapCounts, HeapProfile, HeapTotals};

/// One side's numbers for a site or for the whole heap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SideCounts {
    /// Allocation calls.
    pub allocations: u64,
    /// Temporary allocations.
    pub temporary: u64,
    /// Peak live bytes (a site's own maximum).
    pub peak_bytes: u64,
    /// Bytes leaked.
    pub leaked_bytes: u64,
    /// Blocks leaked.
    pub leaked_allocations: u64,
    /// Bytes requested.
    pub allocated_bytes: u64,
}

impl From<&HeapCounts> for SideCounts {
    fn from(c: &HeapCounts) -> Self {
        SideCounts {
            allocations: c.allocations,
            temporary: c.temporary,
            peak_bytes: c.peak_bytes,
            leaked_bytes: c.leaked_bytes,
            leaked_allocations: c.leaked_allocations,
            allocated_bytes: c.allocated_bytes,
        }
    }
}

impl From<&HeapTotals> for SideCounts {
    fn from(c: &HeapTotals) -> Self {
        SideCounts {
            allocations: c.allocations,
            temporary: c.temporary,
            peak_bytes: c.peak_bytes,
            leaked_bytes: c.leaked_bytes,
            leaked_allocations: c.leaked_allocations,
            allocated_bytes: c.allocated_bytes,
        }
    }
}

/// New minus old, field by field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Delta {
    /// Allocation calls.
    pub allocations: i64,
    /// Temporary allocations.
    pub temporary: i64,
    /// Peak live bytes.
    pub peak_bytes: i64,
    /// Bytes leaked.
    pub leaked_bytes: i64,
    /// Blocks leaked.
    pub leaked_allocations: i64,
    /// Bytes requested.
    pub allocated_bytes: i64,
}

fn sub(a: u64, b: u64) -> i64 {
    (a as i128 - b as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

impl Delta {
    /// `new - old`.
    pub fn between(old: &SideCounts, new: &SideCounts) -> Delta {
        Delta {
            allocations: sub(new.allocations, old.allocations),
            temporary: sub(new.temporary, old.temporary),
            peak_bytes: sub(new.peak_bytes, old.peak_bytes),
            leaked_bytes: sub(new.leaked_bytes, old.leaked_bytes),
            leaked_allocations: sub(new.leaked_allocations, old.leaked_allocations),
            allocated_bytes: sub(new.allocated_bytes, old.allocated_bytes),
        }
    }

    fn magnitude(&self) -> (u64, u64, u64, u64) {
        (
            self.allocations.unsigned_abs(),
            self.leaked_bytes.unsigned_abs(),
            self.peak_bytes.unsigned_abs(),
            self.temporary.unsigned_abs(),
        )
    }
}

/// One site's change.
#[derive(Debug, Clone, Serialize)]
pub struct SiteDiff {
    /// Function name.
    pub function: String,
    /// Source file.
    pub file: Option<String>,
    /// Source line.
    pub line: Option<u32>,
    /// Module path on the board.
    pub module: String,
    /// The old recording's numbers (zeros when the site is new).
    pub old: SideCounts,
    /// The new recording's numbers (zeros when the site is gone).
    pub new: SideCounts,
    /// `new - old`.
    pub delta: Delta,
}

/// The whole comparison.
#[derive(Debug, Clone, Serialize)]
pub struct HeapDiff {
    /// Totals of the old recording.
    pub old: SideCounts,
    /// Totals of the new recording.
    pub new: SideCounts,
    /// `new - old` of the totals.
    pub delta: Delta,
    /// Sites that changed, largest change in allocations first (then leaked, then peak bytes).
    pub sites: Vec<SiteDiff>,
}

type SiteKey = (String, Option<String>, Option<u32>, String);

/// Compares two profiles. Sites whose numbers did not change are left out.
pub fn diff(old: &HeapProfile, new: &HeapProfile) -> HeapDiff {
    let mut rows: BTreeMap<SiteKey, (SideCounts, SideCounts)> = BTreeMap::new();
    for (p, is_new) in [(old, false), (new, true)] {
        for s in &p.sites {
            let f = p.table.get(s.frame);
            let key = (f.function.clone(), f.file.clone(), f.line, f.module.clone());
            let e = rows.entry(key).or_default();
            let side = if is_new { &mut e.1 } else { &mut e.0 };
            let c = SideCounts::from(&s.counts);
            // Two sites of one recording can share a key only through unsymbolized frames.
            side.allocations = side.allocations.saturating_add(c.allocations);
            side.temporary = side.temporary.saturating_add(c.temporary);
            side.peak_bytes = side.peak_bytes.saturating_add(c.peak_bytes);
            side.leaked_bytes = side.leaked_bytes.saturating_add(c.leaked_bytes);
            side.leaked_allocations = side.leaked_allocations.saturating_add(c.leaked_allocations);
            side.allocated_bytes = side.allocated_bytes.saturating_add(c.allocated_bytes);
        }
    }
    let mut sites: Vec<SiteDiff> = rows
        .into_iter()
        .filter(|(_, (o, n))| o != n)
        .map(|((function, file, line, module), (o, n))| SiteDiff {
            function,
            file,
            line,
            module,
            delta: Delta::between(&o, &n),
            old: o,
            new: n,
        })
        .collect();
    sites.sort_by_key(|s| Reverse(s.delta.magnitude()));
    let (o, n) = (SideCounts::from(&old.totals), SideCounts::from(&new.totals));
    HeapDiff {
        old: o,
        new: n,
        delta: Delta::between(&o, &n),
        sites,
    }
}
