//! The function table of a profile: self and total counts per function (name and module),
//! each with the location that represents it, in a fixed order.

use std::collections::{HashMap, HashSet};

use super::cpu::Stack;
use crate::frames::{FrameId, FrameTable};

/// Per-function totals.
pub struct FunctionRow {
    /// A representative frame (the most sampled location of this function).
    pub frame: FrameId,
    /// Samples whose innermost frame is this function.
    pub self_samples: u64,
    /// Samples with this function anywhere on the stack (counted once per sample).
    pub total_samples: u64,
}

/// Sums self and total per function (name + module). The representative frame is the
/// function's most sampled location, so its file:line points where the time went.
pub(super) fn functions(stacks: &[Stack], table: &FrameTable) -> Vec<FunctionRow> {
    struct Acc {
        self_samples: u64,
        total: u64,
        locations: HashMap<FrameId, u64>,
    }
    let mut acc: HashMap<(&str, &str), Acc> = HashMap::new();
    for s in stacks {
        let mut seen: HashSet<(&str, &str)> = HashSet::new();
        for (depth, &id) in s.frames.iter().enumerate() {
            let f = table.get(id);
            let key = (f.function.as_str(), f.module.as_str());
            let a = acc.entry(key).or_insert_with(|| Acc {
                self_samples: 0,
                total: 0,
                locations: HashMap::new(),
            });
            *a.locations.entry(id).or_default() += s.count;
            if depth == 0 {
                a.self_samples += s.count;
            }
            if seen.insert(key) {
                a.total += s.count;
            }
        }
    }
    let mut rows: Vec<FunctionRow> = acc
        .into_values()
        .map(|a| {
            let frame = a
                .locations
                .iter()
                .max_by(|x, y| x.1.cmp(y.1).then(y.0.cmp(x.0)))
                .map(|(&id, _)| id)
                .unwrap_or(0);
            FunctionRow {
                frame,
                self_samples: a.self_samples,
                total_samples: a.total,
            }
        })
        .collect();
    // Every tie broken, down to the frame: the rows come out of a hash map, and one name in
    // two modules (`clock_gettime` in the vDSO and in libc) can have the same counts.
    rows.sort_by(|a, b| {
        let (fa, fb) = (table.get(a.frame), table.get(b.frame));
        b.self_samples
            .cmp(&a.self_samples)
            .then(b.total_samples.cmp(&a.total_samples))
            .then_with(|| fa.function.cmp(&fb.function))
            .then_with(|| fa.module.cmp(&fb.module))
            .then_with(|| (&fa.file, fa.line).cmp(&(&fb.file, fb.line)))
            .then(a.frame.cmp(&b.frame))
    });
    rows
}

#[cfg(test)]
mod tests {
    use super::functions;
    use crate::analysis::cpu::Stack;
    use crate::frames::{Frame, FrameTable};

    #[test]
    fn one_name_in_two_modules_with_equal_counts_sorts_by_module() {
        let frame = |module: &str| Frame {
            function: "clock_gettime".to_string(),
            file: None,
            line: None,
            module: module.to_string(),
            symbolized: true,
        };
        let stack = |id| Stack {
            pid: 1,
            tid: 1,
            space: (1, 0),
            frames: vec![id],
            addresses: Vec::new(),
            count: 1,
            period: 1,
        };
        // Either module's frame interned first: the same order, by module.
        for modules in [["libc.so.6", "[vdso]"], ["[vdso]", "libc.so.6"]] {
            let mut table = FrameTable::default();
            let ids = modules.map(|m| table.intern(frame(m)));
            let rows = functions(&[stack(ids[0]), stack(ids[1])], &table);
            let order: Vec<&str> = rows
                .iter()
                .map(|r| table.get(r.frame).module.as_str())
                .collect();
            assert_eq!(order, ["[vdso]", "libc.so.6"]);
        }
    }
}
