//! `hostside export`: the recording in the formats other tools read, so that people can keep
//! the viewer they know (Firefox Profiler, pprof with Pyroscope or Parca, speedscope, the
//! FlameGraph scripts).
//!
//! Every exporter reads the same analysis the reports print ([`crate::analysis`]): names,
//! file:line and counts agree with `hostside report` by construction. A CPU recording exports
//! its samples; a heap recording (or any recording with `--heap`) its allocation profile.

use std::io::Write;

use anyhow::{bail, Result};

use crate::analysis::heap::{HeapMetric, HeapProfile};
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
    /// The heap analysis of a `rec --heap` recording.
    Heap(&'a Loaded, &'a HeapProfile),
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
        (ExportFormat::Pprof, Source::Cpu(l)) => pprof::write(&pprof::cpu(l), out)?,
        (ExportFormat::Pprof, Source::Heap(l, p)) => pprof::write(&pprof::heap(l, p), out)?,
        (ExportFormat::Speedscope, Source::Cpu(l)) => speedscope::write(&speedscope::cpu(l), out)?,
        (ExportFormat::Speedscope, Source::Heap(l, p)) => {
            speedscope::write(&speedscope::heap(l, p), out)?
        }
        (ExportFormat::PerfScript, Source::Cpu(l)) => perf_script::write(l, out)?,
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
