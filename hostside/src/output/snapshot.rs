//! The report of a `rec --snapshot` recording: every thread of every snapshot with its state,
//! wait channel, kernel stack and symbolized user stack, as `thread apply all bt` would show
//! it; with several snapshots, the stacks seen across them, counted (the "poor man's
//! profiler"). Text and the JSON `snapshot` section.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

use crate::analysis::cpu::CpuProfile;
use crate::analysis::snapshot::{state_name, ThreadSnapshot};
use crate::output::context::ReportContext;
use crate::output::text::{self, frame_label};

/// The most user frames printed per thread: deeper stacks are recursion, which a count says
/// better.
const MAX_FRAMES: usize = 64;

/// Writes the text report.
pub fn report(
    out: &mut dyn Write,
    ctx: &ReportContext,
    cpu: &CpuProfile,
    threads: &[ThreadSnapshot<'_>],
) -> io::Result<()> {
    let count = threads.iter().map(|t| t.state.index + 1).max().unwrap_or(0);
    text::header(
        out,
        ctx,
        &format!("{count} snapshots, {} thread stacks", threads.len()),
    )?;
    let origin = ctx.header.start_clock_ns;
    let mut index = None;
    for t in threads {
        let s = t.state;
        if index != Some(s.index) {
            index = Some(s.index);
            let n = threads.iter().filter(|o| o.state.index == s.index).count();
            writeln!(
                out,
                "\nSnapshot {} of {count} at {:.3} s: {n} threads; the process was stopped for {:.2} ms",
                s.index + 1,
                s.time.saturating_sub(origin) as f64 / 1e9,
                s.stopped_ns as f64 / 1e6
            )?;
        }
        let wchan = if s.wchan.is_empty() {
            String::new()
        } else {
            format!(" in {}", s.wchan)
        };
        writeln!(
            out,
            "  pid {} tid {} {}: {} ({}){wchan}",
            s.pid,
            s.tid,
            t.comm,
            state_name(&s.state),
            s.state
        )?;
        if !s.kernel_stack.is_empty() {
            writeln!(out, "      kernel: {}", s.kernel_stack.join(" <- "))?;
        }
        match t.stack.and_then(|i| cpu.stacks.get(i as usize)) {
            Some(stack) => {
                let frames = stack.user_frames();
                for &f in frames.iter().take(MAX_FRAMES) {
                    writeln!(out, "      {}", frame_label(cpu.table.get(f)))?;
                }
                if frames.len() > MAX_FRAMES {
                    writeln!(out, "      ... {} more frames", frames.len() - MAX_FRAMES)?;
                }
                if frames.is_empty() {
                    writeln!(out, "      (no user frames)")?;
                }
            }
            None if !s.captured => writeln!(out, "      (not stopped: it ended or refused)")?,
            None => writeln!(out, "      (its stack lies outside the selection)")?,
        }
    }
    if count > 1 {
        across(out, cpu, threads, count)?;
    }
    text::diagnostics(out, &ctx.diagnostics)
}

/// The user stacks seen across all snapshots, most frequent first: where the process spends
/// its time, counted by thread-snapshots.
fn across(
    out: &mut dyn Write,
    cpu: &CpuProfile,
    threads: &[ThreadSnapshot<'_>],
    count: u32,
) -> io::Result<()> {
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    for stack in threads
        .iter()
        .filter_map(|t| cpu.stacks.get(t.stack? as usize))
    {
        *seen.entry(text::user_labels(cpu, stack, 12)).or_default() += 1;
    }
    let mut rows: Vec<(String, u64)> = seen.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    writeln!(
        out,
        "\nStacks across the {count} snapshots (thread-snapshots, callee <- caller)"
    )?;
    for (labels, n) in rows {
        writeln!(out, "  {n:>6}  {labels}")?;
    }
    Ok(())
}

/// One thread of one snapshot in `report --json` (DESIGN.md: `snapshot`).
#[derive(Debug, Serialize)]
pub struct SnapshotJson {
    /// Which snapshot, from 0.
    pub index: u32,
    /// Seconds from the recording's start, in ns.
    pub time_ns: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Thread name.
    pub comm: String,
    /// The /proc state letter.
    pub state: String,
    /// The letter in words.
    pub state_name: String,
    /// The kernel function it sleeps in, or empty.
    pub wchan: String,
    /// Function names of the user stack, innermost first.
    pub stack: Vec<String>,
    /// Function names of the kernel stack, innermost first (root only on the board).
    pub kernel_stack: Vec<String>,
    /// How long the process was stopped for this snapshot.
    pub stopped_ns: u64,
}

/// The `snapshot` section.
pub fn json(cpu: &CpuProfile, threads: &[ThreadSnapshot<'_>], origin: u64) -> Vec<SnapshotJson> {
    threads
        .iter()
        .map(|t| {
            let s = t.state;
            let stack = t
                .stack
                .and_then(|i| cpu.stacks.get(i as usize))
                .map(|st| {
                    st.user_frames()
                        .iter()
                        .map(|&f| cpu.table.get(f).function.clone())
                        .collect()
                })
                .unwrap_or_default();
            SnapshotJson {
                index: s.index,
                time_ns: s.time.saturating_sub(origin),
                pid: s.pid,
                tid: s.tid,
                comm: t.comm.clone(),
                state: s.state.clone(),
                state_name: state_name(&s.state).into(),
                wchan: s.wchan.clone(),
                stack,
                kernel_stack: s.kernel_stack.clone(),
                stopped_ns: s.stopped_ns,
            }
        })
        .collect()
}
