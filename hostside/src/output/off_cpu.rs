//! The off-CPU report (`report --off-cpu`): where threads waited and for how long, per
//! function and call chain, and each thread's wall time split into on-CPU, blocked and
//! runnable time; and its JSON section, `off_cpu`.

use std::io::{self, Write};

use serde::Serialize;

use crate::analysis::off_cpu_profile::OffCpuProfile;
use crate::output::context::ReportContext;
use crate::output::text::{frame_label, header, location, pct, short};

/// The `off_cpu` section of `report --json`.
#[derive(Serialize)]
pub struct OffCpuJson {
    /// All off-CPU time, nanoseconds.
    pub wait_ns: u64,
    /// How stacks were recorded: `exact` (the stack each thread blocked in) or `approximate`
    /// (its last CPU sample: the kernel did not allow context-switch samples).
    pub stacks: String,
    /// Off-CPU time charged to the stack the thread blocked in.
    pub exact_ns: u64,
    /// Off-CPU time charged to the thread's last CPU sample.
    pub approximate_ns: u64,
    /// Off-CPU time of threads never sampled before they waited (no stack).
    pub unknown_ns: u64,
    /// Functions by off-CPU time.
    pub functions: Vec<OffCpuFunctionJson>,
    /// Threads by off-CPU time.
    pub threads: Vec<OffCpuThreadJson>,
    /// Who woke the blocked threads, when the recording has wakeups (`rec --off-cpu` as
    /// root); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wakeups: Option<crate::output::wakers::WakeupsJson>,
    /// How the blocking stacks unwound, one count per stack (not weighted by time), as
    /// `cpu.stack_unwinding` for the CPU samples; absent when no stack was unwound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack_unwinding: Option<crate::unwinding::UnwindStats>,
}

/// One function's off-CPU time.
#[derive(Serialize)]
pub struct OffCpuFunctionJson {
    /// Innermost (inlined) function name, demangled.
    pub function: String,
    /// Source file of its location with the most off-CPU time.
    pub file: Option<String>,
    /// Source line of that location.
    pub line: Option<u32>,
    /// Module path on the board.
    pub module: String,
    /// Off-CPU nanoseconds with this function as the innermost frame.
    pub self_ns: u64,
    /// Off-CPU nanoseconds with this function anywhere on the stack.
    pub total_ns: u64,
}

/// One thread's wall time, split.
#[derive(Serialize)]
pub struct OffCpuThreadJson {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Thread name.
    pub comm: String,
    /// From its start (or first event) to its exit (or the end of the recording).
    pub wall_ns: u64,
    /// On a CPU.
    pub on_cpu_ns: u64,
    /// Off a CPU, in all.
    pub off_cpu_ns: u64,
    /// Off a CPU while waiting (sleep, lock, I/O).
    pub blocked_ns: u64,
    /// Off a CPU while runnable (preempted).
    pub runnable_ns: u64,
}

/// The JSON section for `p`, with the top `top` functions.
pub fn json(p: &OffCpuProfile, top: usize) -> OffCpuJson {
    let prof = &p.profile;
    OffCpuJson {
        wait_ns: p.wait_ns,
        stacks: p.stacks.clone(),
        exact_ns: p.exact_ns,
        approximate_ns: p.approximate_ns,
        unknown_ns: p.unknown_ns,
        functions: prof
            .functions
            .iter()
            .take(top)
            .map(|f| {
                let fr = prof.table.get(f.frame);
                OffCpuFunctionJson {
                    function: fr.function.clone(),
                    file: fr.file.clone(),
                    line: fr.line,
                    module: fr.module.clone(),
                    self_ns: f.self_samples,
                    total_ns: f.total_samples,
                }
            })
            .collect(),
        threads: p
            .threads
            .iter()
            .map(|t| OffCpuThreadJson {
                pid: t.pid,
                tid: t.tid,
                comm: t.comm.clone(),
                wall_ns: t.times.wall_ns,
                on_cpu_ns: t.times.on_cpu_ns(),
                off_cpu_ns: t.times.off_cpu_ns(),
                blocked_ns: t.times.blocked_ns,
                runnable_ns: t.times.runnable_ns,
            })
            .collect(),
        wakeups: p
            .wakers
            .as_ref()
            .map(|w| crate::output::wakers::json(prof, w, top)),
        stack_unwinding: (prof.unwind.total() > 0).then_some(prof.unwind),
    }
}

fn ms(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

/// What the text report says about how the stacks were found.
fn stacks_note(p: &OffCpuProfile) -> String {
    match p.stacks.as_str() {
        "exact" if p.approximate_ns + p.unknown_ns == 0 => {
            "stacks: exact (where each thread blocked)".into()
        }
        "exact" => format!(
            "stacks: exact for {:.1}% of the time; the rest APPROXIMATE (context-switch samples lost)",
            pct(p.exact_ns, p.wait_ns)
        ),
        _ => "stacks: APPROXIMATE: each wait shows the thread's last CPU sample, not where it \
              blocked (the kernel did not allow context-switch samples: set \
              kernel.perf_event_paranoid to 1 or less, or run rec as root, for exact stacks)"
            .into(),
    }
}

/// Writes the off-CPU report.
pub fn report(
    out: &mut dyn Write,
    ctx: &ReportContext,
    p: &OffCpuProfile,
    top: usize,
) -> io::Result<()> {
    header(out, ctx, &format!("{} off-CPU", ms(p.wait_ns)))?;
    writeln!(out, "  {}", stacks_note(p))?;
    if p.unknown_ns > 0 {
        writeln!(
            out,
            "  {} of it in threads not sampled before they waited (no stack)",
            ms(p.unknown_ns)
        )?;
    }
    let prof = &p.profile;
    writeln!(out, "\nThreads: wall time on and off the CPU")?;
    writeln!(
        out,
        "  {:>10} {:>16} {:>16} {:>16}  thread",
        "wall", "on-CPU", "blocked", "runnable"
    )?;
    for t in p.threads.iter().take(top) {
        let w = t.times.wall_ns;
        let cell = |ns: u64| format!("{} {:>5.1}%", ms(ns), pct(ns, w));
        writeln!(
            out,
            "  {:>10} {:>16} {:>16} {:>16}  pid {} tid {} {}",
            ms(w),
            cell(t.times.on_cpu_ns()),
            cell(t.times.blocked_ns),
            cell(t.times.runnable_ns),
            t.pid,
            t.tid,
            t.comm
        )?;
    }
    if p.wait_ns == 0 {
        writeln!(out, "\nNo off-CPU time in this recording.")?;
        return Ok(());
    }
    writeln!(out, "\nTop functions by off-CPU time")?;
    writeln!(
        out,
        "{:>7} {:>11} {:>7} {:>11}  {:<40} {:<24} module",
        "self%", "self", "total%", "total", "function", "location"
    )?;
    for f in prof.functions.iter().take(top) {
        let fr = prof.table.get(f.frame);
        writeln!(
            out,
            "{:>6.1}% {:>11} {:>6.1}% {:>11}  {:<40} {:<24} {}",
            pct(f.self_samples, p.wait_ns),
            ms(f.self_samples),
            pct(f.total_samples, p.wait_ns),
            ms(f.total_samples),
            fr.function,
            location(fr),
            short(&fr.module)
        )?;
    }
    writeln!(out, "\nWhere the longest waits block (callee <- caller)")?;
    for f in prof.functions.iter().take(top.min(5)) {
        if f.self_samples == 0 {
            continue;
        }
        let fr = prof.table.get(f.frame);
        writeln!(out, "  {} ({} self)", fr.function, ms(f.self_samples))?;
        for (chain, n) in prof.callers(&fr.function, &fr.module, 24, 3) {
            let names: Vec<String> = chain
                .iter()
                .map(|&id| frame_label(prof.table.get(id)))
                .collect();
            writeln!(out, "    {:>10}  {}", ms(n), names.join(" <- "))?;
        }
    }
    if let Some(w) = &p.wakers {
        crate::output::wakers::text(out, prof, w, top.min(5))?;
    }
    crate::output::text::diagnostics(out, &ctx.diagnostics)
}
