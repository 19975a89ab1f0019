//! The stack usage report (`report --stack-usage`) and its JSON section, `stack_usage`: per
//! thread, the deepest stack the samples saw, its share of the stack's size and the call chain
//! at that moment; a warning for each thread that came within 10% of its size.

use std::io::{self, Write};

use serde::Serialize;

use crate::analysis::stack_usage::{StackUsage, ThreadStack, NEAR_LIMIT};
use crate::diagnostics::{Diagnostic, Kind};

/// Frames shown of a thread's deepest chain in the text report.
const TEXT_FRAMES: usize = 12;

/// One thread of the `stack_usage` section of `report --json`.
#[derive(Serialize)]
pub struct StackUsageJson {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Thread name.
    pub comm: String,
    /// The deepest stack seen: bytes from the top of the stack's mapping to the stack pointer.
    pub max_bytes: u64,
    /// The stack's size: its mapping's length, for a main thread `RLIMIT_STACK`; null when
    /// unlimited.
    pub stack_size: Option<u64>,
    /// Whether the thread came within 10% of its stack size.
    pub near_limit: bool,
    /// How deep the stack was when `stack` was seen: `max_bytes`, unless the deepest sample
    /// had no stack copy (taken while the page at its stack pointer was being faulted in), then
    /// the deepest sample that had one: its chain says how the thread got there.
    pub stack_bytes: u64,
    /// The user call chain at `stack_bytes`, function names innermost first.
    pub stack: Vec<String>,
}

/// The `stack_usage` section.
pub fn json(u: &StackUsage) -> Vec<StackUsageJson> {
    u.threads
        .iter()
        .map(|t| StackUsageJson {
            pid: t.pid,
            tid: t.tid,
            comm: t.comm.clone(),
            max_bytes: t.max_bytes,
            stack_size: t.stack_size,
            near_limit: t.near_limit(),
            stack_bytes: t.stack_bytes,
            stack: t.stack.clone(),
        })
        .collect()
}

/// The `stack-near-limit` diagnostic, when a thread came within 10% of its stack size.
pub fn diagnostic(u: &StackUsage) -> Option<Diagnostic> {
    let near: Vec<&ThreadStack> = u.threads.iter().filter(|t| t.near_limit()).collect();
    let first = near.first()?;
    Some(Diagnostic {
        kind: Kind::StackNearLimit,
        reason: None,
        profile: None,
        count: near.len() as u64,
        message: format!(
            "{} thread(s) came within {:.0}% of their stack size (e.g. {} [{}], {}): an \
             overflow corrupts memory silently; give them larger stacks \
             (pthread_attr_setstacksize, ulimit -s) or make them recurse less",
            near.len(),
            (1.0 - NEAR_LIMIT) * 100.0,
            first.comm,
            first.tid,
            used(first)
        ),
    })
}

/// `240.1 KiB of 256.0 KiB (94%)`, or the bytes alone when the size is unknown.
fn used(t: &ThreadStack) -> String {
    match t.stack_size {
        Some(size) if size > 0 => format!(
            "{} of {} ({:.0}%)",
            kib(t.max_bytes),
            kib(size),
            100.0 * t.max_bytes as f64 / size as f64
        ),
        _ => format!("{} (no limit)", kib(t.max_bytes)),
    }
}

/// `stack` with each run of one function (a recursion) as the function and its length.
fn runs(stack: &[String]) -> Vec<(&str, usize)> {
    let mut runs: Vec<(&str, usize)> = Vec::new();
    for f in stack {
        match runs.last_mut() {
            Some((last, n)) if *last == f.as_str() => *n += 1,
            _ => runs.push((f, 1)),
        }
    }
    runs
}

fn kib(bytes: u64) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

/// The text report: one block per thread, those near their limit first, each with the chain
/// that went deepest.
pub fn text(out: &mut dyn Write, u: &StackUsage) -> io::Result<()> {
    writeln!(
        out,
        "Stack usage per thread (deepest stack the samples saw)"
    )?;
    if u.threads.is_empty() {
        writeln!(
            out,
            "  no sample's stack pointer fell in a recorded stack mapping: record with \
             `rec --call-graph dwarf` (the default) so that samples carry registers and rec \
             records the stack mappings"
        )?;
    }
    for t in &u.threads {
        writeln!(out)?;
        let warn = if t.near_limit() {
            "  WARNING: near its limit"
        } else {
            ""
        };
        writeln!(out, "  {} [{}/{}]: {}{warn}", t.comm, t.pid, t.tid, used(t))?;
        if t.stack_bytes != t.max_bytes {
            writeln!(
                out,
                "    the chain at {} (the deeper samples caught a stack page being faulted in \
                 and carry no stack copy):",
                kib(t.stack_bytes)
            )?;
        }
        let runs = runs(&t.stack);
        for (f, n) in runs.iter().take(TEXT_FRAMES) {
            match n {
                1 => writeln!(out, "      {f}")?,
                n => writeln!(out, "      {f}  (x{n}, recursion)")?,
            }
        }
        if runs.len() > TEXT_FRAMES {
            let more: usize = runs[TEXT_FRAMES..].iter().map(|(_, n)| n).sum();
            writeln!(out, "      ... {more} more frames")?;
        }
    }
    if u.unplaced > 0 {
        writeln!(
            out,
            "\n{} of {} samples with a stack pointer fell in no recorded stack mapping (not \
             counted)",
            u.unplaced, u.measured
        )?;
    }
    if let Some(d) = diagnostic(u) {
        writeln!(out, "\nwarning: {}", d.message)?;
    }
    Ok(())
}
