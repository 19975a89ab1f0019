//! `hostside export`: the recording in the formats other tools read, so that people can keep
//! the viewer they know (Firefox Profiler, pprof with Pyroscope or Parca, speedscope, the
//! FlameGraph scripts, KCachegrind).
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
use crate::output::context::ReportContext;
use crate::output::folded;

pub mod callgrind;
pub mod firefox;
pub mod perf_data;
pub mod perf_script;
pub mod pprof;
pub mod speedscope;

/// What an export describes. With it, every exporter reads only the [`ReportContext`] (made
/// by [`crate::pipeline::Loaded::context_with_mappings`] so that it holds the profiles' mappings).
pub enum Source<'a> {
    /// CPU samples.
    Cpu(&'a CpuProfile),
    /// Blocked time of a `rec --off-cpu` recording.
    OffCpu(&'a OffCpuProfile),
    /// The heap analysis of a `rec --heap` recording, with the recording's CPU samples (the
    /// Firefox profile shows both).
    Heap(&'a CpuProfile, &'a HeapProfile),
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
    pub fn time_event(&self, ctx: &ReportContext) -> bool {
        matches!(ctx.header.event.as_str(), "cpu-clock" | "task-clock" | "")
    }

    /// Samples (or waits) per stack of the profile, counted from its timeline: an off-CPU
    /// profile's stack counts are nanoseconds.
    pub fn per_stack(&self) -> Vec<u64> {
        let mut n = vec![0u64; self.profile.stacks.len()];
        for t in &self.profile.timeline {
            if let Some(n) = n.get_mut(t.stack as usize) {
                *n += 1;
            }
        }
        n
    }
}

fn cpu(p: &CpuProfile) -> Sampled<'_> {
    Sampled {
        profile: p,
        off_cpu: false,
    }
}

fn off_cpu(w: &OffCpuProfile) -> Sampled<'_> {
    Sampled {
        profile: &w.profile,
        off_cpu: true,
    }
}

/// The file formats of `hostside export` (the command line's `--format` names them; see
/// `crate::cli::ExportFormat` for what each holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Folded stacks.
    Collapsed,
    /// Firefox Profiler processed-profile JSON.
    Firefox,
    /// gzip'd pprof profile.proto.
    Pprof,
    /// speedscope's JSON file format.
    Speedscope,
    /// The text `perf script` prints.
    PerfScript,
    /// Callgrind's profile format.
    Callgrind,
    /// perf's own file.
    PerfData,
}

/// Writes `source` to `out` in `format`.
pub fn write(
    format: Format,
    ctx: &ReportContext,
    source: Source<'_>,
    out: &mut dyn Write,
) -> Result<()> {
    let names = &ctx.names;
    match (format, source) {
        (Format::Collapsed, Source::Cpu(c)) => folded::write(out, &folded::cpu(c, names))?,
        (Format::Collapsed, Source::Heap(_, p)) => {
            folded::write(out, &folded::heap(p, names, HeapMetric::Allocations))?
        }
        (Format::Collapsed, Source::OffCpu(w)) => {
            folded::write(out, &folded::cpu(&w.profile, names))?
        }
        (Format::Pprof, Source::Cpu(c)) => pprof::write(&pprof::cpu(ctx, cpu(c)), out)?,
        (Format::Pprof, Source::OffCpu(w)) => pprof::write(&pprof::cpu(ctx, off_cpu(w)), out)?,
        (Format::Pprof, Source::Heap(_, p)) => pprof::write(&pprof::heap(ctx, p), out)?,
        (Format::Speedscope, Source::Cpu(c)) => {
            speedscope::write(&speedscope::cpu(ctx, cpu(c)), out)?
        }
        (Format::Speedscope, Source::OffCpu(w)) => {
            speedscope::write(&speedscope::cpu(ctx, off_cpu(w)), out)?
        }
        (Format::Speedscope, Source::Heap(_, p)) => {
            speedscope::write(&speedscope::heap(ctx, p), out)?
        }
        (Format::PerfScript, Source::Cpu(c)) => perf_script::write(ctx, cpu(c), out)?,
        (Format::PerfScript, Source::OffCpu(w)) => perf_script::write(ctx, off_cpu(w), out)?,
        (Format::Callgrind, Source::Cpu(c)) => callgrind::write(ctx, cpu(c), out)?,
        (Format::Callgrind, Source::OffCpu(w)) => callgrind::write(ctx, off_cpu(w), out)?,
        (Format::PerfData, Source::Cpu(c)) => perf_data::write(ctx, cpu(c), out)?,
        (Format::PerfData, Source::OffCpu(w)) => perf_data::write(ctx, off_cpu(w), out)?,
        (Format::PerfData, Source::Heap(..)) => bail!(
            "perf.data holds samples; export a heap recording with \
             --format pprof, speedscope, firefox or collapsed"
        ),
        (Format::Callgrind, Source::Heap(..)) => bail!(
            "Callgrind files hold sampled costs; export a heap recording with \
             --format pprof, speedscope, firefox or collapsed"
        ),
        (Format::Firefox, Source::OffCpu(..)) => bail!(
            "the Firefox Profiler's samples hold CPU time; export off-CPU waits with \
             --format pprof, speedscope, perf-script or collapsed"
        ),
        (Format::PerfScript, Source::Heap(..)) => bail!(
            "`perf script` text holds CPU samples; export a heap recording with \
             --format pprof, speedscope, firefox or collapsed"
        ),
        (Format::Firefox, Source::Cpu(c)) => {
            serde_json::to_writer(&mut *out, &firefox::profile(ctx, c, None))?
        }
        (Format::Firefox, Source::Heap(c, p)) => {
            serde_json::to_writer(&mut *out, &firefox::profile(ctx, c, Some(p)))?
        }
    }
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::output::context::LostMark;

    #[test]
    fn lost_marks_stop_growing_at_their_cap_and_keep_the_sum() {
        let mut marks = Vec::new();
        let n = LostMark::MAX as u64 + 500;
        for t in 0..n {
            LostMark::push(&mut marks, t, 2);
        }
        assert_eq!(marks.len(), LostMark::MAX);
        assert_eq!(marks.iter().map(|m| m.count).sum::<u64>(), 2 * n);
        assert_eq!(marks[LostMark::MAX - 1].time, LostMark::MAX as u64 - 1);
        assert_eq!(marks[LostMark::MAX - 1].count, 2 + 2 * 500);
    }
}
