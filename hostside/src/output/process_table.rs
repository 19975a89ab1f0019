//! Each process's share of the samples: what `rec -a` recordings are read for first ("which
//! program takes the board's CPU"), and a summary line per process for any recording with
//! more than one. Built from the CPU profile's per-thread rows, so a report narrowed to some
//! processes or threads lists exactly those.

use std::io::{self, Write};

use serde::Serialize;

use crate::analysis::cpu::CpuProfile;
use crate::processes::ProcessNames;

/// One process in `report --json`'s `cpu.processes`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessJson {
    /// Process id.
    pub pid: u32,
    /// The name of its main thread when the recording ended (the kernel's `comm`: the
    /// executable's name, at most 15 bytes); `swapper` for pid 0, the idle task.
    pub command: String,
    /// Samples of all its threads.
    pub samples: u64,
    /// `samples` as a fraction (0 to 1) of all samples in the report.
    pub share: f64,
}

/// The processes of `cpu`, most samples first (then by pid).
pub fn rows(cpu: &CpuProfile, names: &ProcessNames) -> Vec<ProcessJson> {
    let mut by_pid: std::collections::BTreeMap<u32, u64> = Default::default();
    for t in &cpu.threads {
        *by_pid.entry(t.pid).or_default() += t.samples;
    }
    let total = cpu.samples.max(1) as f64;
    let mut rows: Vec<ProcessJson> = by_pid
        .into_iter()
        .map(|(pid, samples)| ProcessJson {
            pid,
            command: match (pid, names.get(pid)) {
                (0, "?") => "swapper".to_string(),
                (_, name) => name.to_string(),
            },
            samples,
            share: samples as f64 / total,
        })
        .collect();
    rows.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.pid.cmp(&b.pid)));
    rows
}

/// Writes the `Processes` section of the text report, when more than one process was sampled.
pub fn print(out: &mut dyn Write, rows: &[ProcessJson], top: usize) -> io::Result<()> {
    if rows.len() < 2 {
        return Ok(());
    }
    writeln!(out, "\nProcesses ({})", rows.len())?;
    for p in rows.iter().take(top) {
        writeln!(
            out,
            "  {:>6.1}% {:>8}  pid {:<7} {}",
            100.0 * p.share,
            p.samples,
            p.pid,
            p.command
        )?;
    }
    if rows.len() > top {
        writeln!(out, "  ... {} more (--top)", rows.len() - top)?;
    }
    Ok(())
}
