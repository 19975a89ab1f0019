//! Folded stacks (`process;outermost;...;innermost count`), the text that flame graphs and
//! `export --format collapsed` are made of, built the same way for CPU and heap profiles.

use std::collections::HashMap;

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
