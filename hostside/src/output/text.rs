//! The human-readable report: what the recording is, how modules matched, the hottest functions
//! with counts, shares and locations, their call chains, and per-thread shares.

use std::io::{self, Write};

use crossprof_symbols::{MatchKind, Origin};
use crossprof_unwind::CutShort;

use crate::analysis::cpu::{CpuProfile, Stack};
use crate::diagnostics::Diagnostic;
use crate::frames::Frame;
use crate::output::context::ReportContext;
use crate::unwinding::UnwindStats;

pub(crate) fn pct(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * n as f64 / total as f64
    }
}

pub(crate) fn short(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

pub(crate) fn location(f: &Frame) -> String {
    match (&f.file, f.line) {
        (Some(file), Some(line)) => format!("{}:{line}", short(file)),
        (Some(file), None) => short(file).to_string(),
        _ => String::new(),
    }
}

/// A frame in a call chain: `function (file:line)`, or the function alone without a location.
/// At most `n` user frames of `s` (of profile `p`) labelled and joined callee <- caller, or
/// `(no user frames)`.
pub(crate) fn user_labels(p: &CpuProfile, s: &Stack, n: usize) -> String {
    let labels: Vec<String> = s
        .user_frames()
        .iter()
        .take(n)
        .map(|&f| frame_label(p.table.get(f)))
        .collect();
    if labels.is_empty() {
        "(no user frames)".into()
    } else {
        labels.join(" <- ")
    }
}

pub(crate) fn frame_label(f: &Frame) -> String {
    let loc = location(f);
    if loc.is_empty() {
        f.function.clone()
    } else {
        format!("{} ({loc})", f.function)
    }
}

/// Writes the report's opening lines: file, command, board, what was recorded (`events`, e.g.
/// "1234 samples, 0 lost") and how the modules matched.
pub fn header(out: &mut dyn Write, ctx: &ReportContext, events: &str) -> io::Result<()> {
    let h = &ctx.header;
    writeln!(out, "crossprof report: {}", ctx.path.display())?;
    writeln!(out, "  command   {}", h.command.join(" "))?;
    writeln!(
        out,
        "  board     {} ({}), kernel {}, {} Hz {} call graphs",
        h.hostname, h.arch, h.kernel_release, h.sample_freq, h.call_graph
    )?;
    let state = if ctx.summary.complete {
        "complete".to_string()
    } else {
        format!(
            "INCOMPLETE ({} bytes discarded at the end)",
            ctx.summary.bytes_discarded
        )
    };
    writeln!(
        out,
        "  recording {:.2} s, {events}, {} frames, {state}",
        ctx.duration_ns as f64 / 1e9,
        ctx.summary.frames_read()
    )?;
    if let Some(w) = ctx.window.describe() {
        writeln!(
            out,
            "  selected  {w} (seconds from the recording's start; only this part is reported)"
        )?;
    }
    let modules = &ctx.modules;
    let count = |k: MatchKind| modules.iter().filter(|m| m.match_kind == k).count();
    writeln!(
        out,
        "  modules   {} ({} by build-id, {} by path only, {} missing, {} mismatched)",
        modules.len(),
        count(MatchKind::BuildId),
        count(MatchKind::PathOnly),
        count(MatchKind::Missing),
        count(MatchKind::Mismatch)
    )?;
    for m in modules
        .iter()
        .filter(|m| matches!(m.match_kind, MatchKind::Mismatch | MatchKind::Missing))
    {
        // Say what each costs: a module no frame fell in is harmless (a preloaded library
        // that never ran), one with frames leaves them as addresses.
        let cost = match m.addresses {
            0 => "no frames in it".to_string(),
            1 => "1 address".to_string(),
            n => format!("{n} addresses"),
        };
        writeln!(
            out,
            "            {}: {} ({cost})",
            m.match_kind.as_str(),
            m.path
        )?;
    }
    // Files found away from the board path: say where, so a surprising match can be checked.
    for m in modules.iter().filter(|m| m.origin != Origin::Path) {
        let file = m.debug_file.as_deref().unwrap_or(std::path::Path::new("?"));
        writeln!(
            out,
            "            {} (by {}): {}",
            m.path,
            m.origin.as_str(),
            file.display()
        )?;
    }
    // Binaries (unwind tables) found apart from their symbols, as for a merged-/usr board.
    for m in modules.iter().filter(|m| m.image_origin != m.origin) {
        if let Some(image) = &m.image {
            writeln!(
                out,
                "            {} unwind tables (by {}): {}",
                m.path,
                m.image_origin.as_str(),
                image.display()
            )?;
        }
    }
    Ok(())
}

/// How the stack copies unwound: complete, cut short and why (nothing for frame-pointer
/// recordings, whose chains the kernel walked).
fn unwinding(out: &mut dyn Write, u: &UnwindStats) -> io::Result<()> {
    let total = u.total();
    if total == 0 {
        return Ok(());
    }
    writeln!(
        out,
        "  stacks    {} of {total} unwound to the entry ({:.1}%), {} cut short",
        u.complete,
        pct(u.complete, total),
        u.truncated
    )?;
    for why in CutShort::ALL {
        let n = u.truncated_by.get(why);
        if n > 0 {
            writeln!(out, "            {n:>7} {}", why.explain())?;
        }
    }
    if u.prologue_frames > 0 {
        writeln!(
            out,
            "            {:>7} frames found by prologue analysis (code without unwind tables)",
            u.prologue_frames
        )?;
    }
    if u.jit_frame_pointer_frames > 0 {
        writeln!(
            out,
            "            {:>7} JIT frames unwound by frame pointer (generated code has no tables)",
            u.jit_frame_pointer_frames
        )?;
    }
    if u.untabled_frames > 0 {
        writeln!(
            out,
            "            {:>7} frames unwound by return address or frame pointer (code no table covers)",
            u.untabled_frames
        )?;
    }
    if u.joined_stacks > 0 {
        writeln!(
            out,
            "            {:>7} of them joined to the same thread's complete stack (the copy ended; same frames at the same stack addresses)",
            u.joined_stacks
        )?;
    }
    if u.scanned_frames > 0 {
        writeln!(
            out,
            "            {:>7} frames found by scanning the stack for a return address (code without tables or frame pointer)",
            u.scanned_frames
        )?;
    }
    if u.go_stack_switches > 0 {
        writeln!(
            out,
            "            {:>7} of them end where Go switched to the system stack (goroutine frames not copied)",
            u.go_stack_switches
        )?;
    }
    if u.no_registers > 0 {
        writeln!(
            out,
            "            {:>7} without registers (nothing to unwind)",
            u.no_registers
        )?;
    }
    Ok(())
}

/// Writes the `Diagnostics` section: every fallback with its count and what to do (nothing
/// when the analysis took none).
pub fn diagnostics(out: &mut dyn Write, list: &[Diagnostic]) -> io::Result<()> {
    if list.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nDiagnostics (what the analysis fell back on)")?;
    for d in list {
        let mut kind = match d.reason {
            Some(r) => format!("{} ({r})", d.kind.name()),
            None => d.kind.name().to_string(),
        };
        if let Some(p) = d.profile {
            kind = format!("{kind}, {p} stacks");
        }
        writeln!(out, "  {:>8}  {kind}: {}", d.count, d.message)?;
    }
    Ok(())
}

/// Writes the CPU report.
pub fn cpu_report(
    out: &mut dyn Write,
    ctx: &ReportContext,
    cpu: &CpuProfile,
    top: usize,
) -> io::Result<()> {
    header(
        out,
        ctx,
        &format!("{} samples, {} lost", cpu.samples, ctx.lost_samples),
    )?;
    if cpu.samples == 0 {
        let part = if ctx.window.is_active() {
            "the selected part of this recording"
        } else {
            "this recording"
        };
        writeln!(out, "\nNo CPU samples in {part}.")?;
        return diagnostics(out, &ctx.diagnostics);
    }
    unwinding(out, &cpu.unwind)?;
    let unsym = pct(
        cpu.unsymbolized_frames,
        cpu.stacks
            .iter()
            .map(|s| s.count * s.frames.len() as u64)
            .sum(),
    );
    writeln!(
        out,
        "\nTop functions ({} samples; {unsym:.1}% of frames unsymbolized)",
        cpu.samples
    )?;
    writeln!(
        out,
        "{:>7} {:>8} {:>7} {:>8}  {:<40} {:<24} module",
        "self%", "self", "total%", "total", "function", "location"
    )?;
    for f in cpu.functions.iter().take(top) {
        let fr = cpu.table.get(f.frame);
        writeln!(
            out,
            "{:>6.1}% {:>8} {:>6.1}% {:>8}  {:<40} {:<24} {}",
            pct(f.self_samples, cpu.samples),
            f.self_samples,
            pct(f.total_samples, cpu.samples),
            f.total_samples,
            fr.function,
            location(fr),
            short(&fr.module)
        )?;
    }
    writeln!(
        out,
        "\nCall chains of the hottest functions (callee <- caller)"
    )?;
    for f in cpu.functions.iter().take(top.min(5)) {
        let fr = cpu.table.get(f.frame);
        if f.self_samples == 0 {
            continue;
        }
        writeln!(
            out,
            "  {} ({:.1}% self)",
            fr.function,
            pct(f.self_samples, cpu.samples)
        )?;
        for (chain, n) in cpu.callers(&fr.function, &fr.module, 8, 3) {
            let names: Vec<String> = chain
                .iter()
                .map(|&id| frame_label(cpu.table.get(id)))
                .collect();
            writeln!(
                out,
                "    {:>5.1}%  {}",
                pct(n, cpu.samples),
                names.join(" <- ")
            )?;
        }
    }
    let processes = crate::output::process_table::rows(cpu, &ctx.names);
    crate::output::process_table::print(out, &processes, top)?;
    writeln!(out, "\nThreads")?;
    for t in cpu.threads.iter().take(top) {
        writeln!(
            out,
            "  {:>6.1}% {:>8}  pid {:<7} tid {:<7} {}",
            pct(t.samples, cpu.samples),
            t.samples,
            t.pid,
            t.tid,
            t.comm
        )?;
    }
    diagnostics(out, &ctx.diagnostics)
}
