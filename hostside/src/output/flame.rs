//! Flame graphs (interactive SVG via inferno) and the folded-stack text they are drawn from.

use std::io::Write;

use anyhow::{Context, Result};

use crate::analysis::cpu::CpuProfile;
use crate::analysis::events::EventProfile;
use crate::analysis::heap::{HeapMetric, HeapProfile};
use crate::analysis::off_cpu_profile::OffCpuProfile;
use crate::analysis::syscalls::Syscalls;
use crate::output::context::ReportContext;
use crate::output::folded;

/// What a flame graph shows.
pub enum Graph<'a> {
    /// CPU samples.
    Cpu(&'a CpuProfile),
    /// The samples of the event chosen with `--event`.
    Event(&'a EventProfile),
    /// Time blocked off the CPU, in nanoseconds.
    OffCpu(&'a OffCpuProfile),
    /// The heap, weighed by `metric`.
    Heap(&'a HeapProfile, HeapMetric),
    /// Time in system calls, in nanoseconds, each call's name its innermost frame.
    Syscalls(&'a Syscalls),
}

/// Draws `graph` as `hostside flamegraph` does: stacks under their process's name, titled with
/// what is shown, the recorded command and the part of the recording selected.
pub fn write(ctx: &ReportContext, graph: Graph<'_>, out: impl Write) -> Result<()> {
    let names = &ctx.names;
    let (folded, what, unit) = match graph {
        Graph::Cpu(p) => (folded::cpu(p, names), "CPU".to_string(), "samples"),
        Graph::Event(e) => (folded::cpu(&e.cpu, names), e.name.clone(), "events"),
        Graph::OffCpu(w) => {
            let approx = if w.stacks == "exact" {
                ""
            } else {
                " (approximate stacks)"
            };
            (
                folded::cpu(&w.profile, names),
                format!("off-CPU time{approx}"),
                "ns",
            )
        }
        Graph::Syscalls(s) => (
            folded::syscalls(s, names),
            "time in system calls".to_string(),
            "ns",
        ),
        Graph::Heap(p, metric) => {
            let name = match metric {
                HeapMetric::Peak => "heap at its peak",
                HeapMetric::Leaked => "leaked heap",
                HeapMetric::Allocations => "allocation calls",
                HeapMetric::Temporary => "temporary allocations",
            };
            (
                folded::heap(p, names, metric),
                name.to_string(),
                metric.unit(),
            )
        }
    };
    let command = ctx.header.command.join(" ");
    let title = match ctx.window.describe() {
        Some(w) => format!("{what}: {command} [{w}]"),
        None => format!("{what}: {command}"),
    };
    svg(&folded, &title, unit, out)
}

/// Draws an interactive SVG flame graph from folded lines.
pub fn svg(folded: &[String], title: &str, count_name: &str, out: impl Write) -> Result<()> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = count_name.to_string();
    if folded.is_empty() {
        // inferno refuses empty input; an empty graph with a clear title is more useful.
        let empty = ["(no samples) 1".to_string()];
        return inferno::flamegraph::from_lines(&mut opts, empty.iter().map(|s| s.as_str()), out)
            .context("cannot write flame graph");
    }
    inferno::flamegraph::from_lines(&mut opts, folded.iter().map(|s| s.as_str()), out)
        .context("cannot write flame graph")
}
