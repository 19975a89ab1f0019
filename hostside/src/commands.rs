//! Dispatch: each subcommand runs the [`crate::pipeline`], picks its profile and hands it with
//! the report context to one writer in [`crate::output`]. No formatting here.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::analysis::diff::{counts_time, diff, Totals};
use crate::analysis::heap::{self, EventSampling, HeapMetric, HeapOptions};
use crate::analysis::snapshot;
use crate::cli::{Cli, Command, ExportFormat, HeapGraph};
use crate::diagnostics::Kind;
use crate::filter::Filter;
use crate::output::diff::Side;
use crate::output::off_cpu as off_cpu_text;
use crate::output::{self as o, export, flame, heap_text, info, json, leak_check, text};
use crate::pipeline::{load, open, Loaded, Opened, Wants};
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
    let verbose = cli.verbose;
    let loaded = |l: Loaded| {
        if verbose {
            print_passes(&l.opened);
        }
        l
    };
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
            latency,
            syscalls,
            stack_usage,
            event,
            top,
            json,
            fail_on_leak,
        } => {
            let heap = heap || fail_on_leak.is_some();
            let o = open(&file, &symbols.lookup(), &filter.filter())?;
            if heap {
                require(&o, "heap", o.has_heap, "rec --heap")?;
            }
            if off_cpu || latency {
                require(&o, "off-CPU", o.has_switches, "rec --off-cpu")?;
            }
            if syscalls {
                require(&o, "system call", o.has_syscalls, "rec -e syscalls")?;
            }
            // A heap-only recording reports its heap without being asked to.
            let heap_text = heap || (!cpu && o.has_heap && !o.has_samples);
            let want_heap = o.has_heap && (json || heap_text);
            let l = loaded(o.analyze(Wants {
                off_cpu: json || off_cpu || latency,
                event,
                heap: want_heap.then(|| heap_options(top)),
                syscalls: json || syscalls,
                stack_usage: json || stack_usage,
            })?);
            let (waits, chosen, profile) = (&l.off_cpu, &l.event, &l.heap);
            let depths = l.stack_usage.as_ref().filter(|u| u.recorded);
            let calls = &l.syscalls;
            let ctx = l.context();
            let mut out = io::stdout().lock();
            let origin = ctx.header.start_clock_ns;
            let snapshot = (!l.opened.thread_states.is_empty())
                .then(|| snapshot::threads(&l.opened.thread_states, &l.cpu));
            if json {
                let timeline = l.opened.timeline(None);
                let sections = json::Sections {
                    event: chosen.as_ref(),
                    heap: profile.as_ref(),
                    off_cpu: waits.as_ref(),
                    timeline: timeline.as_ref(),
                    syscalls: calls.as_ref(),
                    snapshot: snapshot.as_deref(),
                    stack_usage: depths,
                };
                o::write_json(&mut out, &json::report(&ctx, &l.cpu, &sections, top))?;
            } else if let Some(e) = &chosen {
                o::event::report(&mut out, &ctx, e, top)?;
            } else if let (true, Some(u)) = (stack_usage, &l.stack_usage) {
                o::stack_usage::text(&mut out, u)?;
            } else if let (true, Some(s)) = (syscalls, calls) {
                o::syscalls::report(&mut out, &ctx, s)?;
            } else if let (true, Some(w)) = (latency, waits) {
                o::latency::text(&mut out, w, &l.cpu, origin)?;
            } else if let (true, Some(w)) = (off_cpu, waits) {
                off_cpu_text::report(&mut out, &ctx, w, top)?;
                if let Some(t) = l.opened.timeline(None) {
                    o::timeline::text(&mut out, &t, origin, top)?;
                }
            } else if let (true, Some(p)) = (heap_text, profile) {
                heap_text::heap_report(&mut out, &ctx, p, top)?;
            } else if let Some(threads) = &snapshot {
                o::snapshot::report(&mut out, &ctx, &l.cpu, threads)?;
            } else {
                text::cpu_report(&mut out, &ctx, &l.cpu, top)?;
                if let Some(t) = l.opened.timeline(None) {
                    o::timeline::text(&mut out, &t, origin, top)?;
                }
            }
            out.flush()?;
            if let (Some(limit), Some(p)) = (fail_on_leak, profile) {
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
            syscalls,
            event,
            output,
        } => {
            let o = open(&file, &symbols.lookup(), &filter.filter())?;
            let off_cpu = off_cpu && heap.is_none() && event.is_none();
            if off_cpu {
                require(&o, "off-CPU", o.has_switches, "rec --off-cpu")?;
            }
            if syscalls {
                require(&o, "system call", o.has_syscalls, "rec -e syscalls")?;
            }
            if heap.is_some() {
                require(&o, "heap", o.has_heap, "rec --heap")?;
            }
            let l = loaded(o.analyze(Wants {
                off_cpu,
                event: event.filter(|_| heap.is_none()),
                heap: heap.map(|_| HeapOptions::default()),
                syscalls,
                ..Wants::default()
            })?);
            let graph = match (heap, &l.heap, &l.event, &l.off_cpu, &l.syscalls) {
                (Some(what), Some(p), _, _, _) => flame::Graph::Heap(p, heap_metric(what)),
                (_, _, Some(e), _, _) => flame::Graph::Event(e),
                (_, _, _, Some(w), _) => flame::Graph::OffCpu(w),
                (_, _, _, _, Some(s)) => flame::Graph::Syscalls(s),
                _ => flame::Graph::Cpu(&l.cpu),
            };
            flame::write(&l.context(), graph, create(&output)?)?;
            Ok(Outcome::Success)
        }
        Command::Export {
            file,
            symbols,
            filter,
            format,
            heap,
            off_cpu,
            syscalls,
            output,
        } => {
            if syscalls && format != ExportFormat::Collapsed {
                bail!(
                    "export --syscalls writes only --format collapsed (use `flamegraph \
                     --syscalls` for a flame graph, `report --syscalls --json` for numbers)"
                );
            }
            let o = open(&file, &symbols.lookup(), &filter.filter())?;
            if syscalls {
                require(&o, "system call", o.has_syscalls, "rec -e syscalls")?;
            }
            let heap = !off_cpu && !syscalls && (heap || (o.has_heap && !o.has_samples));
            if off_cpu {
                require(&o, "off-CPU", o.has_switches, "rec --off-cpu")?;
            }
            if heap {
                require(&o, "heap", o.has_heap, "rec --heap")?;
            }
            // The Firefox Profiler shows each allocation at its time: log them (bounded).
            let events = match format {
                ExportFormat::Firefox => EventSampling::EXPORT,
                _ => EventSampling::OFF,
            };
            let l = loaded(o.analyze(Wants {
                off_cpu,
                event: None,
                heap: heap.then_some(HeapOptions {
                    events,
                    ..HeapOptions::default()
                }),
                syscalls,
                ..Wants::default()
            })?);
            let ctx = l.context_with_mappings();
            if let Some(s) = &l.syscalls {
                let mut out = create(&output)?;
                o::folded::write(&mut out, &o::folded::syscalls(s, &ctx.names))?;
                out.flush()?;
            } else if let Some(w) = &l.off_cpu {
                let mut out = create(&output)?;
                export::write(format.into(), &ctx, export::Source::OffCpu(w), &mut out)?;
            } else if let Some(p) = &l.heap {
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
                    export::Source::Heap(&l.cpu, p),
                    &mut out,
                )?;
            } else {
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
                let (a, b) = load_pair(
                    &file,
                    &new,
                    &symbols.lookup(),
                    &filter,
                    HeapOptions::default(),
                    false,
                )?;
                return html_diff((&file, loaded(a)), (&new, loaded(b)), &output);
            }
            let opened = open(&file, &symbols.lookup(), &filter)?;
            let grid = o::html::grid(opened.recording.header().start_clock_ns, opened.duration_ns);
            let heap = opened.has_heap.then(|| HeapOptions {
                slices: Some(o::html::heap_slices(&grid)),
                ..HeapOptions::default()
            });
            let l = loaded(opened.analyze(Wants {
                off_cpu: true,
                event: None,
                heap,
                syscalls: false,
                ..Wants::default()
            })?);
            let ctx = l.context();
            let timeline = l
                .opened
                .has_switches
                .then(|| l.opened.timeline(Some(grid)))
                .flatten();
            let profiles = o::html::Profiles {
                cpu: &l.cpu,
                heap: l.heap.as_ref(),
                off_cpu: l.off_cpu.as_ref(),
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
            let l = loaded(load(
                &file,
                &symbols.lookup(),
                &Filter::default(),
                Wants::default(),
            )?);
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
            off_cpu,
            top,
            json,
        } => {
            let (lookup, filter) = (symbols.lookup(), filter.filter());
            let (a, b) = load_pair(&old, &new, &lookup, &filter, heap_options(top), off_cpu)?;
            let (a, b) = (loaded(a), loaded(b));
            let mut out = io::stdout().lock();
            if off_cpu {
                let (Some(wa), Some(wb)) = (&a.off_cpu, &b.off_cpu) else {
                    bail!(
                        "no off-CPU profile of {} or {}",
                        old.display(),
                        new.display()
                    );
                };
                let d = crate::analysis::off_cpu_diff::diff(wa, wb);
                let (files, window) = ((old.as_path(), new.as_path()), &a.opened.window);
                if json {
                    o::write_json(&mut out, &o::off_cpu_diff::json(files, window, &d, top))?;
                } else {
                    o::off_cpu_diff::text(&mut out, files, window, &d, top)?;
                }
                return Ok(Outcome::Success);
            }
            let rows = cpu_diff(&a, &b);
            let heap = heap_diff(&a, &b);
            let with_cpu = heap.is_none() || a.cpu.samples > 0 || b.cpu.samples > 0;
            let old_side = side(&old, &a);
            let new_side = side(&new, &b);
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

/// One side of a CPU diff, for its writer.
fn side<'a>(file: &'a Path, l: &'a Loaded) -> Side<'a> {
    let time = counts_time(&l.opened.recording.header().event);
    Side {
        file,
        samples: l.cpu.samples,
        cost_ns: time.then(|| Totals::of(&l.cpu).period),
        window: &l.opened.window,
    }
}

/// The CPU rows of a comparison, with times where the recordings' event counts them.
fn cpu_diff(a: &Loaded, b: &Loaded) -> Vec<crate::analysis::diff::DiffRow> {
    let event = |l: &Loaded| l.opened.recording.header().event.clone();
    let time = counts_time(&event(a)) && event(a) == event(b);
    diff(&a.cpu, &b.cpu, time)
}

/// The two recordings of a comparison (`diff`, `html OLD NEW`), each analysed under the same
/// filter: times count from each recording's own start, and a `--pid`/`--tid` that one of
/// them never saw is an error naming that recording. When either has heap events both get a
/// heap profile (one of them empty), with `heap`.
fn load_pair(
    old: &Path,
    new: &Path,
    lookup: &crossprof_symbols::Lookup,
    filter: &Filter,
    heap: HeapOptions,
    off_cpu: bool,
) -> Result<(Loaded, Loaded)> {
    let (a, b) = (open(old, lookup, filter)?, open(new, lookup, filter)?);
    if off_cpu {
        require(&a, "off-CPU", a.has_switches, "rec --off-cpu")?;
        require(&b, "off-CPU", b.has_switches, "rec --off-cpu")?;
    }
    let wants = Wants {
        heap: (!off_cpu && (a.has_heap || b.has_heap)).then_some(heap),
        off_cpu,
        ..Wants::default()
    };
    Ok((a.analyze(wants.clone())?, b.analyze(wants)?))
}

/// Both heap profiles of a comparison compared, when [`load_pair`] made them.
fn heap_diff(a: &Loaded, b: &Loaded) -> Option<heap::diff::HeapDiff> {
    Some(heap::diff::diff(a.heap.as_ref()?, b.heap.as_ref()?))
}

/// `hostside html OLD NEW`: both recordings (with their files) as [`load_pair`] analysed them
/// for `hostside diff`.
fn html_diff(
    (old, a): (&Path, Loaded),
    (new, b): (&Path, Loaded),
    output: &Path,
) -> Result<Outcome> {
    let rows = cpu_diff(&a, &b);
    let heap = heap_diff(&a, &b);
    let (ca, cb) = (a.context(), b.context());
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

/// Heap, off-CPU and system call analyses need records the file may not have; say which
/// command makes them.
fn require(o: &Opened, what: &str, present: bool, how: &str) -> Result<()> {
    if !present {
        bail!(
            "{} holds no {what} events; record with `{how}`",
            o.recording.path().display()
        );
    }
    Ok(())
}

/// `--verbose`: how the recording was read, one line per pass over the file.
fn print_passes(o: &Opened) {
    for p in &o.passes {
        eprintln!(
            "hostside: {}: read {} in {:.2} s, {} frames decoded",
            o.recording.path().display(),
            p.what,
            p.seconds,
            p.frames
        );
    }
}

fn create(path: &Path) -> Result<Box<dyn Write>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(BufWriter::new(io::stdout())));
    }
    let f = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    Ok(Box::new(BufWriter::new(f)))
}
