//! One function per subcommand: open, analyse, write. Kept free of formatting details, which
//! live in [`crate::output`].

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::analysis::diff::diff;
use crate::analysis::heap::{HeapMetric, HeapOptions, HeapProfile};
use crate::analysis::heap_diff;
use crate::analysis::load::{load_checked, Loaded};
use crate::cli::{Cli, Command, ExportFormat, HeapGraph};
use crate::output::{flame, heap_json, heap_text, info, json, leak_check, text};
use crate::recording::Recording;

/// How a command that ran to its end went, for the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing to complain about (exit status 0).
    Success,
    /// `report --fail-on-leak` found more leaked bytes than allowed (exit status 1).
    LeakLimitExceeded,
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<Outcome> {
    match cli.command {
        Command::Info { file, json } => {
            let rec = Recording::open(&file)?;
            let i = info::collect(&rec);
            let mut out = io::stdout().lock();
            if json {
                serde_json::to_writer_pretty(&mut out, &i)?;
                writeln!(out)?;
            } else {
                info::print(&mut out, &i)?;
            }
            Ok(Outcome::Success)
        }
        Command::Report {
            file,
            symbols,
            cpu,
            heap,
            off_cpu,
            top,
            json,
            fail_on_leak,
        } => {
            let heap = heap || fail_on_leak.is_some();
            let l = load_checked(&file, &symbols.lookup())?;
            if heap {
                require(&l, "heap", l.has_heap, "rec --heap")?;
            }
            if off_cpu {
                require(&l, "off-CPU", l.has_switches, "rec --off-cpu")?;
                bail!("off-CPU analysis is not available in this version of hostside");
            }
            // A heap-only recording reports its heap without being asked to.
            let heap_text = heap || (!cpu && l.has_heap && l.cpu.samples == 0);
            let profile = (l.has_heap && (json || heap_text)).then(|| l.heap(heap_options(top)));
            let mut out = io::stdout().lock();
            if json {
                serde_json::to_writer_pretty(&mut out, &report_json(&l, profile.as_ref(), top))?;
                writeln!(out)?;
            } else if let (true, Some(p)) = (heap_text, &profile) {
                heap_text::heap_report(&mut out, &l, p, top)?;
            } else {
                text::cpu_report(&mut out, &l, top)?;
            }
            out.flush()?;
            if let (Some(limit), Some(p)) = (fail_on_leak, &profile) {
                if p.totals.leaked_bytes > limit {
                    leak_check::report(&mut io::stderr().lock(), p, limit, top)?;
                    return Ok(Outcome::LeakLimitExceeded);
                }
            }
            Ok(Outcome::Success)
        }
        Command::Flamegraph {
            file,
            symbols,
            heap,
            off_cpu,
            output,
        } => {
            let l = load_checked(&file, &symbols.lookup())?;
            if off_cpu {
                require(&l, "off-CPU", l.has_switches, "rec --off-cpu")?;
                bail!("off-CPU analysis is not available in this version of hostside");
            }
            let command = l.recording.header().command.join(" ");
            let (folded, title, unit) = match heap {
                Some(what) => {
                    require(&l, "heap", l.has_heap, "rec --heap")?;
                    let metric = heap_metric(what);
                    let p = l.heap(HeapOptions::default());
                    let name = match metric {
                        HeapMetric::Peak => "heap at its peak",
                        HeapMetric::Leaked => "leaked heap",
                        HeapMetric::Allocations => "allocation calls",
                        HeapMetric::Temporary => "temporary allocations",
                    };
                    (
                        p.folded(&l.processes, metric),
                        format!("{name}: {command}"),
                        metric.unit(),
                    )
                }
                None => (
                    l.cpu.folded(&l.processes),
                    format!("CPU: {command}"),
                    "samples",
                ),
            };
            let out = create(&output)?;
            flame::svg(&folded, &title, unit, out)?;
            Ok(Outcome::Success)
        }
        Command::Export {
            file,
            symbols,
            format,
            output,
        } => {
            let l = load_checked(&file, &symbols.lookup())?;
            match format {
                ExportFormat::Collapsed => {
                    let mut out = create(&output)?;
                    for line in l.cpu.folded(&l.processes) {
                        writeln!(out, "{line}")?;
                    }
                    out.flush()?;
                    Ok(Outcome::Success)
                }
                other => {
                    let name = match other {
                        ExportFormat::Firefox => "firefox",
                        ExportFormat::Pprof => "pprof",
                        _ => "perf-script",
                    };
                    bail!("export format {name} is not available in this version yet; use --format collapsed")
                }
            }
        }
        Command::Diff {
            old,
            new,
            symbols,
            top,
            json,
        } => {
            let lookup = symbols.lookup();
            let a = load_checked(&old, &lookup)?;
            let b = load_checked(&new, &lookup)?;
            let rows = diff(&a.cpu, &b.cpu);
            let with_heap = a.has_heap || b.has_heap;
            let with_cpu = !with_heap || a.cpu.samples > 0 || b.cpu.samples > 0;
            let heap = with_heap.then(|| {
                let opts = heap_options(top);
                heap_diff::diff(&a.heap(opts), &b.heap(opts))
            });
            let mut out = io::stdout().lock();
            if json {
                let mut heap_json = heap.clone();
                if let Some(h) = &mut heap_json {
                    h.sites.truncate(top);
                }
                let v = serde_json::json!({
                    "old": {"file": old.display().to_string(), "samples": a.cpu.samples},
                    "new": {"file": new.display().to_string(), "samples": b.cpu.samples},
                    "functions": rows.iter().take(top).collect::<Vec<_>>(),
                    "heap": heap_json,
                });
                serde_json::to_writer_pretty(&mut out, &v)?;
                writeln!(out)?;
                return Ok(Outcome::Success);
            }
            if with_cpu {
                writeln!(
                    out,
                    "CPU diff: {} ({} samples) -> {} ({} samples)",
                    old.display(),
                    a.cpu.samples,
                    new.display(),
                    b.cpu.samples
                )?;
                writeln!(out, "{:>8} {:>8} {:>8}  function", "old%", "new%", "delta")?;
                for r in rows.iter().take(top) {
                    writeln!(
                        out,
                        "{:>7.1}% {:>7.1}% {:>+7.1}  {}",
                        r.old_self_pct,
                        r.new_self_pct,
                        r.delta_self(),
                        r.function
                    )?;
                }
            }
            if let Some(h) = &heap {
                if with_cpu {
                    writeln!(out)?;
                }
                writeln!(out, "{} -> {}", old.display(), new.display())?;
                heap_text::heap_diff(&mut out, h, top)?;
            }
            Ok(Outcome::Success)
        }
    }
}

fn heap_options(top: usize) -> HeapOptions {
    HeapOptions {
        largest: top.min(100),
        ..HeapOptions::default()
    }
}

fn heap_metric(g: HeapGraph) -> HeapMetric {
    match g {
        HeapGraph::Peak => HeapMetric::Peak,
        HeapGraph::Leaked => HeapMetric::Leaked,
        HeapGraph::Allocations => HeapMetric::Allocations,
        HeapGraph::Temporary => HeapMetric::Temporary,
    }
}

/// Heap and off-CPU analyses need records the file may not have; say which command makes them.
fn require(l: &Loaded, what: &str, present: bool, how: &str) -> Result<()> {
    if !present {
        bail!(
            "{} holds no {what} events; record with `{how}`",
            l.recording.path().display()
        );
    }
    Ok(())
}

fn create(path: &Path) -> Result<Box<dyn Write>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(BufWriter::new(io::stdout())));
    }
    let f = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    Ok(Box::new(BufWriter::new(f)))
}

fn report_json(l: &Loaded, heap: Option<&HeapProfile>, top: usize) -> json::ReportJson {
    let h = l.recording.header();
    let cpu = &l.cpu;
    json::ReportJson {
        recording: json::RecordingJson {
            arch: h.arch.clone(),
            command: h.command.clone(),
            complete: l.summary.complete,
            frames: l.summary.frames,
            bytes_discarded: l.summary.bytes_discarded,
            duration_ns: l.duration_ns,
            lost_samples: l.lost_samples,
        },
        modules: l
            .resolver
            .modules()
            .into_iter()
            .map(|m| json::ModuleJson {
                path: m.key.path,
                build_id: info::hex(&m.key.build_id),
                debug_file: m.located.debug_file.map(|p| p.display().to_string()),
                match_kind: m.located.match_kind.as_str().to_string(),
            })
            .collect(),
        cpu: Some(json::CpuJson {
            samples: cpu.samples,
            unsymbolized_frames: cpu.unsymbolized_frames,
            stack_unwinding: (cpu.unwind.total() > 0).then_some(cpu.unwind),
            functions: cpu
                .functions
                .iter()
                .take(top)
                .map(|f| {
                    let fr = cpu.table.get(f.frame);
                    json::FunctionJson {
                        function: fr.function.clone(),
                        file: fr.file.clone(),
                        line: fr.line,
                        module: fr.module.clone(),
                        self_samples: f.self_samples,
                        total: f.total_samples,
                    }
                })
                .collect(),
            threads: cpu
                .threads
                .iter()
                .map(|t| json::ThreadJson {
                    pid: t.pid,
                    tid: t.tid,
                    comm: t.comm.clone(),
                    samples: t.samples,
                })
                .collect(),
        }),
        off_cpu: None,
        heap: heap.map(|p| heap_json::heap_json(p, top, h.start_clock_ns)),
    }
}
