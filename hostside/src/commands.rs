//! One function per subcommand: open, analyse, write. Kept free of formatting details, which
//! live in [`crate::output`].

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::analysis::diff::diff;
use crate::analysis::load::{load_checked, Loaded};
use crate::cli::{Cli, Command, ExportFormat};
use crate::output::{flame, info, json, text};
use crate::recording::Recording;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<()> {
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
            Ok(())
        }
        Command::Report {
            file,
            symbols,
            cpu: _,
            heap,
            off_cpu,
            top,
            json,
        } => {
            let l = load_checked(&file, &symbols.lookup())?;
            if heap {
                require_unimplemented(&l, "heap", l.has_heap, "rec --heap")?;
            }
            if off_cpu {
                require_unimplemented(&l, "off-CPU", l.has_switches, "rec --off-cpu")?;
            }
            let mut out = io::stdout().lock();
            if json {
                serde_json::to_writer_pretty(&mut out, &report_json(&l, top))?;
                writeln!(out)?;
            } else {
                text::cpu_report(&mut out, &l, top)?;
            }
            Ok(())
        }
        Command::Flamegraph {
            file,
            symbols,
            heap,
            off_cpu,
            output,
        } => {
            let l = load_checked(&file, &symbols.lookup())?;
            if heap.is_some() {
                require_unimplemented(&l, "heap", l.has_heap, "rec --heap")?;
            }
            if off_cpu {
                require_unimplemented(&l, "off-CPU", l.has_switches, "rec --off-cpu")?;
            }
            let folded = l.cpu.folded(&l.processes);
            let title = format!("CPU: {}", l.recording.header().command.join(" "));
            let out = create(&output)?;
            flame::svg(&folded, &title, "samples", out)?;
            Ok(())
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
                    Ok(())
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
            let mut out = io::stdout().lock();
            if json {
                let v = serde_json::json!({
                    "old": {"file": old.display().to_string(), "samples": a.cpu.samples},
                    "new": {"file": new.display().to_string(), "samples": b.cpu.samples},
                    "functions": rows.iter().take(top).collect::<Vec<_>>(),
                });
                serde_json::to_writer_pretty(&mut out, &v)?;
                writeln!(out)?;
            } else {
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
            Ok(())
        }
    }
}

/// Heap and off-CPU analyses need records the file may not have; say which command makes them.
fn require_unimplemented(l: &Loaded, what: &str, present: bool, how: &str) -> Result<()> {
    if !present {
        bail!(
            "{} holds no {what} events; record with `{how}`",
            l.recording.path().display()
        );
    }
    bail!("{what} analysis is not available in this version of hostside")
}

fn create(path: &Path) -> Result<Box<dyn Write>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(BufWriter::new(io::stdout())));
    }
    let f = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    Ok(Box::new(BufWriter::new(f)))
}

fn report_json(l: &Loaded, top: usize) -> json::ReportJson {
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
        heap: None,
    }
}
