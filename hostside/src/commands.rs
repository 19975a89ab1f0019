//! Dispatch: each subcommand runs the [`crate::pipeline`], picks its profile and hands it with
//! the report context to one writer in [`crate::output`]. No formatting here.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::analysis::diff::diff;
use crate::analysis::events::{self, EventProfile};
use crate::analysis::heap::{self, EventSampling, HeapMetric, HeapOptions};
use crate::analysis::off_cpu_profile::{self, OffCpuProfile};
use crate::cli::{Cli, Command, ExportFormat, HeapGraph};
use crate::diagnostics::Kind;
use crate::filter::Filter;
use crate::output::diff::Side;
use crate::output::off_cpu as off_cpu_text;
use crate::output::{self as o, export, flame, heap_text, info, json, leak_check, text};
use crate::pipeline::{load, load_checked, Loaded};
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
                o::write_json(&mut out, &i)?;
            } else {
                info::print(&mut out, &i)?;
            }
            Ok(Outcome::Success)
        }
        Command::Report {
            file,
            symbols,
            filter,
            cpu,
            heap,
            off_cpu,
            event,
            top,
            json,
            fail_on_leak,
        } => {
            let heap = heap || fail_on_leak.is_some();
            let l = load(&file, &symbols.lookup(), &filter.filter())?;
            if heap {
                require(&l, "heap", l.has_heap, "rec --heap")?;
            }
            if off_cpu {
                require(&l, "off-CPU", l.has_switches, "rec --off-cpu")?;
            }
            let waits =
                (l.has_switches && (json || off_cpu)).then(|| off_cpu_profile::analyze(&l.input()));
            let chosen = event
                .as_deref()
                .map(|e| events::analyze(&l.input(), e))
                .transpose()?;
            // A heap-only recording reports its heap without being asked to.
            let heap_text = heap || (!cpu && l.has_heap && !l.has_samples);
            let profile = (l.has_heap && (json || heap_text)).then(|| l.heap(heap_options(top)));
            let more: Vec<_> = waits
                .as_ref()
                .map(OffCpuProfile::named)
                .into_iter()
                .chain(chosen.as_ref().map(EventProfile::named))
                .collect();
            let ctx = l.context(profile.as_ref(), &more);
            let mut out = io::stdout().lock();
            let origin = ctx.header.start_clock_ns;
            if json {
                let timeline = l.timeline(None);
                let sections = json::Sections {
                    event: chosen.as_ref(),
                    heap: profile.as_ref(),
                    off_cpu: waits.as_ref(),
                    timeline: timeline.as_ref(),
                };
                o::write_json(&mut out, &json::report(&ctx, &l.cpu, &sections, top))?;
            } else if let Some(e) = &chosen {
                o::event::report(&mut out, &ctx, e, top)?;
            } else if let (true, Some(w)) = (off_cpu, &waits) {
                off_cpu_text::report(&mut out, &ctx, w, top)?;
                if let Some(t) = l.timeline(None) {
                    o::timeline::text(&mut out, &t, origin, top)?;
                }
            } else if let (true, Some(p)) = (heap_text, &profile) {
                heap_text::heap_report(&mut out, &ctx, p, top)?;
            } else {
                text::cpu_report(&mut out, &ctx, &l.cpu, top)?;
                if let Some(t) = l.timeline(None) {
                    o::timeline::text(&mut out, &t, origin, top)?;
                }
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
            filter,
            heap,
            off_cpu,
            event,
            output,
        } => {
            let l = load(&file, &symbols.lookup(), &filter.filter())?;
            let out = create(&output)?;
            match heap {
                None if event.is_some() => {
                    let e = events::analyze(&l.input(), event.as_deref().unwrap_or_default())?;
                    let ctx = l.context(None, &[e.named()]);
                    flame::write(&ctx, flame::Graph::Event(&e), out)?;
                }
                None if off_cpu => {
                    require(&l, "off-CPU", l.has_switches, "rec --off-cpu")?;
                    let w = off_cpu_profile::analyze(&l.input());
                    let ctx = l.context(None, &[w.named()]);
                    flame::write(&ctx, flame::Graph::OffCpu(&w), out)?;
                }
                Some(what) => {
                    require(&l, "heap", l.has_heap, "rec --heap")?;
                    let p = l.heap(HeapOptions::default());
                    let ctx = l.context(Some(&p), &[]);
                    flame::write(&ctx, flame::Graph::Heap(&p, heap_metric(what)), out)?;
                }
                None => flame::write(&l.context(None, &[]), flame::Graph::Cpu(&l.cpu), out)?,
            }
            Ok(Outcome::Success)
        }
        Command::Export {
            file,
            symbols,
            filter,
            format,
            heap,
            off_cpu,
            output,
        } => {
            let l = load(&file, &symbols.lookup(), &filter.filter())?;
            let heap = heap || (!off_cpu && l.has_heap && !l.has_samples);
            if off_cpu {
                require(&l, "off-CPU", l.has_switches, "rec --off-cpu")?;
                let w = off_cpu_profile::analyze(&l.input());
                let ctx = l.context_with(None, &[w.named()]);
                let mut out = create(&output)?;
                export::write(format.into(), &ctx, export::Source::OffCpu(&w), &mut out)?;
            } else if heap {
                require(&l, "heap", l.has_heap, "rec --heap")?;
                // The Firefox Profiler shows each allocation at its time: log them (bounded).
                let events = match format {
                    ExportFormat::Firefox => EventSampling::EXPORT,
                    _ => EventSampling::OFF,
                };
                let p = l.heap(HeapOptions {
                    events,
                    ..HeapOptions::default()
                });
                let ctx = l.context_with(Some(&p), &[]);
                for d in ctx
                    .diagnostics
                    .iter()
                    .filter(|d| d.kind == Kind::HeapEventsSampled)
                {
                    eprintln!("hostside: note: {}", d.message);
                }
                let mut out = create(&output)?;
                export::write(
                    format.into(),
                    &ctx,
                    export::Source::Heap(&l.cpu, &p),
                    &mut out,
                )?;
            } else {
                let ctx = l.context_with(None, &[]);
                let mut out = create(&output)?;
                export::write(format.into(), &ctx, export::Source::Cpu(&l.cpu), &mut out)?;
            }
            Ok(Outcome::Success)
        }
        Command::Html {
            file,
            new,
            symbols,
            filter,
            output,
        } => {
            let filter = filter.filter();
            if let Some(new) = new {
                return html_diff(&file, &new, &symbols.lookup(), &filter, &output);
            }
            let l = load(&file, &symbols.lookup(), &filter)?;
            let grid = o::html::grid(l.recording.header().start_clock_ns, l.duration_ns);
            let heap = l.has_heap.then(|| {
                l.heap(HeapOptions {
                    slices: Some(o::html::heap_slices(&grid)),
                    ..HeapOptions::default()
                })
            });
            let waits = l.has_switches.then(|| off_cpu_profile::analyze(&l.input()));
            let more: Vec<_> = waits
                .as_ref()
                .map(OffCpuProfile::named)
                .into_iter()
                .collect();
            let ctx = l.context(heap.as_ref(), &more);
            let timeline = l.has_switches.then(|| l.timeline(Some(grid))).flatten();
            let profiles = o::html::Profiles {
                cpu: &l.cpu,
                heap: heap.as_ref(),
                off_cpu: waits.as_ref(),
                threads: timeline.as_ref(),
            };
            let mut out = create(&output)?;
            o::html::write(&ctx, &profiles, &mut out)?;
            Ok(Outcome::Success)
        }
        Command::Annotate {
            file,
            function,
            symbols,
            source_dirs,
        } => {
            let l = load_checked(&file, &symbols.lookup())?;
            let (name, lines) = o::annotate::lines(&l.cpu, &function)?;
            let mut out = io::stdout().lock();
            o::annotate::print(
                &mut out,
                &name,
                &lines,
                l.cpu.samples,
                &source_dirs,
                symbols.sysroot.as_deref(),
            )?;
            Ok(Outcome::Success)
        }
        Command::Diff {
            old,
            new,
            symbols,
            filter,
            top,
            json,
        } => {
            let (a, b) = load_pair(&old, &new, &symbols.lookup(), &filter.filter())?;
            let rows = diff(&a.cpu, &b.cpu);
            let with_heap = a.has_heap || b.has_heap;
            let with_cpu = !with_heap || a.cpu.samples > 0 || b.cpu.samples > 0;
            let heap = with_heap.then(|| {
                let opts = heap_options(top);
                heap::diff::diff(&a.heap(opts), &b.heap(opts))
            });
            let old_side = Side {
                file: &old,
                samples: a.cpu.samples,
                window: &a.window,
            };
            let new_side = Side {
                file: &new,
                samples: b.cpu.samples,
                window: &b.window,
            };
            let mut out = io::stdout().lock();
            if json {
                let v = o::diff::json(&old_side, &new_side, &rows, heap.as_ref(), top);
                o::write_json(&mut out, &v)?;
            } else {
                let h = heap.as_ref();
                o::diff::text(&mut out, &old_side, &new_side, &rows, h, with_cpu, top)?;
            }
            Ok(Outcome::Success)
        }
    }
}

/// The two recordings of a comparison (`diff`, `html OLD NEW`), each analysed under the same
/// filter: times count from each recording's own start, and a `--pid`/`--tid` that one of
/// them never saw is an error naming that recording.
fn load_pair(
    old: &Path,
    new: &Path,
    lookup: &crossprof_symbols::Lookup,
    filter: &Filter,
) -> Result<(Loaded, Loaded)> {
    Ok((load(old, lookup, filter)?, load(new, lookup, filter)?))
}

/// `hostside html OLD NEW`: both recordings analysed as `hostside diff` does.
fn html_diff(
    old: &Path,
    new: &Path,
    lookup: &crossprof_symbols::Lookup,
    filter: &Filter,
    output: &Path,
) -> Result<Outcome> {
    let (a, b) = load_pair(old, new, lookup, filter)?;
    let rows = diff(&a.cpu, &b.cpu);
    let (ha, hb) = if a.has_heap || b.has_heap {
        let opts = HeapOptions::default();
        (Some(a.heap(opts)), Some(b.heap(opts)))
    } else {
        (None, None)
    };
    let heap = ha
        .as_ref()
        .zip(hb.as_ref())
        .map(|(x, y)| heap::diff::diff(x, y));
    let (ca, cb) = (a.context(ha.as_ref(), &[]), b.context(hb.as_ref(), &[]));
    let old_side = o::html::diff::DiffSide {
        file: old,
        ctx: &ca,
        cpu: &a.cpu,
    };
    let new_side = o::html::diff::DiffSide {
        file: new,
        ctx: &cb,
        cpu: &b.cpu,
    };
    let mut out = create(output)?;
    o::html::diff::write(&old_side, &new_side, &rows, heap.as_ref(), &mut out)?;
    Ok(Outcome::Success)
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
