//! Folded stacks (`process;outermost;...;innermost count`), the text that flame graphs and
//! `export --format collapsed` are made of, built the same way for CPU and heap profiles.

use std::collections::HashMap;
use std::io::{self, Write};

use crate::analysis::cpu::CpuProfile;
use crate::analysis::heap::{HeapMetric, HeapProfile};
use crate::analysis::syscalls::Syscalls;
use crate::processes::ProcessNames;

/// CPU stacks as folded lines (`root;...;leaf count`), the input of flame graphs. The root is
/// the process name, like perf's stackcollapse.
pub fn cpu(p: &CpuProfile, names: &ProcessNames) -> Vec<String> {
    let mut folded = Folded::default();
    for s in &p.stacks {
        let frames = s
            .frames
            .iter()
            .rev()
            .map(|&id| p.table.get(id).function.as_str());
        folded.add(names.get(s.pid), frames, s.count);
    }
    folded.into_lines()
}

/// Heap stacks as folded lines (`process;main;...;site value`) weighted by `metric`, stacks
/// with a zero value left out.
pub fn heap(p: &HeapProfile, names: &ProcessNames, metric: HeapMetric) -> Vec<String> {
    let mut folded = Folded::default();
    for t in &p.traces {
        let v = metric.of(&t.counts);
        if v == 0 {
            continue;
        }
        let frames = t
            .frames
            .iter()
            .rev()
            .map(|&id| p.table.get(id).function.as_str());
        folded.add(names.get(t.pid), frames, v);
    }
    folded.into_lines()
}

/// System call stacks as folded lines (`process;main;...;write;syscall_name ns`): each
/// call's user stack with the call's name as its innermost frame, weighted by the
/// nanoseconds of its finished calls (stacks with none left out). The kernel's entry path,
/// the same for every call, is left out.
pub fn syscalls(s: &Syscalls, names: &ProcessNames) -> Vec<String> {
    let mut folded = Folded::default();
    for c in &s.calls {
        for st in c.stacks.iter().filter(|st| st.total_ns > 0) {
            let frames = s
                .user_frames(st.stack)
                .iter()
                .rev()
                .map(|&id| s.profile.table.get(id).function.as_str())
                .chain(std::iter::once(c.name.as_str()));
            folded.add(names.get(st.pid), frames, st.total_ns);
        }
    }
    folded.into_lines()
}

/// Writes `export --format collapsed`: one folded line per distinct stack.
pub fn write(out: &mut dyn Write, lines: &[String]) -> io::Result<()> {
    for line in lines {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// Folded stacks being summed: identical lines add up.
#[derive(Default)]
pub struct Folded {
    lines: HashMap<String, u64>,
}

impl Folded {
    /// Adds `count` to the stack of `frames` (function names, outermost first) under the
    /// process `root`. Separators inside names are replaced so a line always splits back into
    /// the same frames (`;` between frames, a space before the count).
    pub fn add<'a>(&mut self, root: &str, frames: impl Iterator<Item = &'a str>, count: u64) {
        let mut line = root.replace([';', ' '], "_");
        for f in frames {
            line.push(';');
            line.push_str(&f.replace(';', ":"));
        }
        *self.lines.entry(line).or_default() += count;
    }

    /// The lines, sorted, so output is the same on every run.
    pub fn into_lines(self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .lines
            .into_iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        lines.sort();
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_sum_and_escape_separators() {
        let mut f = Folded::default();
        f.add("my app", ["main", "a;b"].into_iter(), 2);
        f.add("my app", ["main", "a;b"].into_iter(), 3);
        f.add("x", std::iter::empty(), 1);
        assert_eq!(f.into_lines(), vec!["my_app;main;a:b 5", "x 1"]);
    }
}
