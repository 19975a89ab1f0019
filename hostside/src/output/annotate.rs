//! `hostside annotate FILE FUNCTION`: a function's source lines with the samples taken at
//! each, so that the hot line is read in its context, as `perf annotate --stdio` does for
//! source (without the disassembly).
//!
//! `self` at a line counts samples whose innermost frame is the function at that line; `total`
//! adds the samples where the function was at that line while calling something else (the
//! line of a call), once per sample. The source file is the one the debug info names, looked
//! up under `--source-dir` (by its full path, then by its name), then under the sysroot, then
//! where the debug info says.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::analysis::cpu::CpuProfile;

/// Lines of context printed around the sampled ones.
const CONTEXT: u32 = 3;

/// Per source file, per line: (self, total).
type Lines = BTreeMap<String, BTreeMap<u32, (u64, u64)>>;

/// Samples per line of the functions named `function` (exact name, or when none matches
/// exactly, the one name that contains it).
pub fn lines(cpu: &CpuProfile, function: &str) -> Result<(String, Lines)> {
    let names: HashSet<&str> = cpu
        .stacks
        .iter()
        .flat_map(|s| s.frames.iter())
        .map(|&id| cpu.table.get(id).function.as_str())
        .collect();
    let name = if names.contains(function) {
        function.to_string()
    } else {
        let mut matches: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| n.contains(function))
            .collect();
        matches.sort_unstable();
        match matches.as_slice() {
            [one] => one.to_string(),
            [] => bail!("no sampled function is named {function:?}"),
            many => bail!(
                "{function:?} matches {} functions; name one of: {}",
                many.len(),
                many.iter().take(10).copied().collect::<Vec<_>>().join(", ")
            ),
        }
    };
    let mut out: Lines = BTreeMap::new();
    for s in &cpu.stacks {
        let mut seen: HashSet<(Option<&str>, u32)> = HashSet::new();
        for (depth, &id) in s.frames.iter().enumerate() {
            let f = cpu.table.get(id);
            if f.function != name {
                continue;
            }
            let line = f.line.unwrap_or(0);
            let file = f.file.as_deref().unwrap_or("?");
            let e = out
                .entry(file.to_string())
                .or_default()
                .entry(line)
                .or_default();
            if depth == 0 {
                e.0 += s.count;
            }
            if seen.insert((f.file.as_deref(), line)) {
                e.1 += s.count;
            }
        }
    }
    Ok((name, out))
}

/// Where the source of `file` is on this machine, if anywhere.
pub fn find_source(file: &str, source_dirs: &[PathBuf], sysroot: Option<&Path>) -> Option<PathBuf> {
    let rel = file.trim_start_matches('/');
    let base = Path::new(file).file_name()?;
    let mut candidates: Vec<PathBuf> = Vec::new();
    for d in source_dirs {
        candidates.push(d.join(rel));
        candidates.push(d.join(base));
    }
    if let Some(s) = sysroot {
        candidates.push(s.join(rel));
    }
    candidates.push(PathBuf::from(file));
    candidates.into_iter().find(|p| p.is_file())
}

/// Prints the annotated lines.
pub fn print(
    out: &mut dyn Write,
    name: &str,
    lines: &Lines,
    samples: u64,
    source_dirs: &[PathBuf],
    sysroot: Option<&Path>,
) -> Result<()> {
    let pct = |n: u64| 100.0 * n as f64 / samples.max(1) as f64;
    for (file, per_line) in lines {
        let (s, t) = per_line
            .values()
            .fold((0, 0), |a, &(s, t)| (a.0 + s, a.1.max(t)));
        writeln!(
            out,
            "{name}  ({file}): self {s} samples ({:.1}%), total up to {t}",
            pct(s)
        )?;
        let source = find_source(file, source_dirs, sysroot)
            .and_then(|p| std::fs::read_to_string(&p).ok().map(|text| (p, text)));
        let Some((path, text)) = source else {
            writeln!(out, "  (source not found; pass --source-dir DIR)")?;
            writeln!(out, "{:>8} {:>8}  line", "self", "total")?;
            for (line, (s, t)) in per_line {
                writeln!(out, "{s:>8} {t:>8}  {line}")?;
            }
            continue;
        };
        writeln!(out, "  source: {}", path.display())?;
        writeln!(out, "{:>8} {:>8} {:>6}  source", "self", "total", "line")?;
        let src: Vec<&str> = text.lines().collect();
        let first = per_line.keys().find(|&&l| l > 0).copied().unwrap_or(1);
        let last = per_line.keys().next_back().copied().unwrap_or(1);
        let from = first.saturating_sub(CONTEXT).max(1);
        let to = (last + CONTEXT).min(src.len() as u32);
        for n in from..=to {
            let code = src.get(n as usize - 1).copied().unwrap_or("");
            match per_line.get(&n) {
                Some(&(s, t)) => writeln!(out, "{s:>8} {t:>8} {n:>6}  {code}")?,
                None => writeln!(out, "{:>8} {:>8} {n:>6}  {code}", "", "")?,
            }
        }
    }
    Ok(())
}
