//! `hostside export`: the recording in the formats other tools read, so that people can keep
//! the viewer they know (Firefox Profiler, pprof with Pyroscope or Parca, speedscope, the
//! FlameGraph scripts).
//!
//! Every exporter reads the same analysis the reports print ([`crate::analysis`]): names,
//! file:line and counts agree with `hostside report` by construction. A CPU recording exports
//! its samples; a heap recording (or any recording with `--heap`) its allocation profile;
//! `--off-cpu` exports the blocked time of a `rec --off-cpu` recording.

use std::io::Write;

use anyhow::{bail, Result};

use crate::analysis::cpu::CpuProfile;
use crate::analysis::heap::{HeapMetric, HeapProfile};
use crate::analysis::off_cpu_profile::OffCpuProfile;
use crate::cli::ExportFormat;
use crate::output::folded;
use crate::pipeline::Loaded;

pub mod firefox;
pub mod perf_script;
pub mod pprof;
pub mod speedscope;

/// What an export describes.
pub enum Source<'a> {
    /// CPU samples.
    Cpu(&'a Loaded),
    /// Blocked time of a `rec --off-cpu` recording.
    OffCpu(&'a Loaded, &'a OffCpuProfile),
    /// The heap analysis of a `rec --heap` recording.
    Heap(&'a Loaded, &'a HeapProfile),
}

/// A sampled profile: the CPU samples, or the off-CPU waits (one "sample" per wait, its period
/// the nanoseconds waited, its stack the blocking one).
#[derive(Clone, Copy)]
pub struct Sampled<'a> {
    /// The stacks and the timeline.
    pub profile: &'a CpuProfile,
    /// Whether these are off-CPU waits.
    pub off_cpu: bool,
}

impl Sampled<'_> {
    /// Whether the samples' periods are nanoseconds of CPU time (the clock events).
    pub fn time_event(&self, l: &Loaded) -> bool {
        matches!(
            l.recording.header().event.as_str(),
            "cpu-clock" | "task-clock" | ""
        )
    }
}

fn cpu(l: &Loaded) -> Sampled<'_> {
    Sampled {
        profile: &l.cpu,
        off_cpu: false,
    }
}

fn off_cpu(w: &OffCpuProfile) -> Sampled<'_> {
    Sampled {
        profile: &w.profile,
        off_cpu: true,
    }
}

/// Writes `source` to `out` in `format`.
pub fn write(format: ExportFormat, source: Source<'_>, out: &mut dyn Write) -> Result<()> {
    match (format, source) {
        (ExportFormat::Collapsed, Source::Cpu(l)) => {
            folded::write(out, &folded::cpu(&l.cpu, &l.processes.final_names()))?
        }
        (ExportFormat::Collapsed, Source::Heap(l, p)) => folded::write(
            out,
            &folded::heap(p, &l.processes.final_names(), HeapMetric::Allocations),
        )?,
        (ExportFormat::Collapsed, Source::OffCpu(l, w)) => {
            folded::write(out, &folded::cpu(&w.profile, &l.processes.final_names()))?
        }
        (ExportFormat::Pprof, Source::Cpu(l)) => pprof::write(&pprof::cpu(l, cpu(l)), out)?,
        (ExportFormat::Pprof, Source::OffCpu(l, w)) => {
            pprof::write(&pprof::cpu(l, off_cpu(w)), out)?
        }
        (ExportFormat::Pprof, Source::Heap(l, p)) => pprof::write(&pprof::heap(l, p), out)?,
        (ExportFormat::Speedscope, Source::Cpu(l)) => {
            speedscope::write(&speedscope::cpu(l, cpu(l)), out)?
        }
        (ExportFormat::Speedscope, Source::OffCpu(l, w)) => {
            speedscope::write(&speedscope::cpu(l, off_cpu(w)), out)?
        }
        (ExportFormat::Speedscope, Source::Heap(l, p)) => {
            speedscope::write(&speedscope::heap(l, p), out)?
        }
        (ExportFormat::PerfScript, Source::Cpu(l)) => perf_script::write(l, cpu(l), out)?,
        (ExportFormat::PerfScript, Source::OffCpu(l, w)) => perf_script::write(l, off_cpu(w), out)?,
        (ExportFormat::Firefox, Source::OffCpu(..)) => bail!(
            "the Firefox Profiler's samples hold CPU time; export off-CPU waits with \
             --format pprof, speedscope, perf-script or collapsed"
        ),
        (ExportFormat::PerfScript, Source::Heap(..)) => bail!(
            "`perf script` text holds CPU samples; export a heap recording with \
             --format pprof, speedscope, firefox or collapsed"
        ),
        (ExportFormat::Firefox, Source::Cpu(l)) => {
            serde_json::to_writer(&mut *out, &firefox::profile(l, None))?
        }
        (ExportFormat::Firefox, Source::Heap(l, p)) => {
            serde_json::to_writer(&mut *out, &firefox::profile(l, Some(p)))?
        }
    }
    out.flush()?;
    Ok(())
}
