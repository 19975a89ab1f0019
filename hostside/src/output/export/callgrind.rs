//! Callgrind's profile format, for KCachegrind, QCachegrind and `callgrind_annotate`: per
//! function and source line, the self cost, and per call site the inclusive cost of the
//! calls made there (<https://valgrind.org/docs/manual/cl-format.html>).
//!
//! A sampled profile has no call counts: a call site's `calls=` is the number of samples taken
//! inside it, and its cost what those samples weigh. Each sample counts once per distinct call
//! site of its stack, so a recursive function's inclusive cost is not counted twice. Two
//! events: the samples and their period (CPU nanoseconds for the clock events, the event's
//! count otherwise; blocked nanoseconds for off-CPU waits). Positions are source lines (0 where
//! debug info gave none); objects are the modules on the board, files the source files (`???`
//! where none is known, as valgrind writes it).

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use anyhow::Result;

use crate::frames::{FrameId, FrameTable};
use crate::output::context::ReportContext;
use crate::output::export::Sampled;

/// A function as callgrind names it: object, file and function name, each interned.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Function {
    object: usize,
    file: usize,
    name: usize,
}

impl Function {
    const MIN: Function = Function {
        object: 0,
        file: 0,
        name: 0,
    };
    const MAX: Function = Function {
        object: usize::MAX,
        file: usize::MAX,
        name: usize::MAX,
    };
}

/// Costs: samples and their summed period.
type Cost = [u64; 2];

fn add(to: &mut Cost, count: u64, period: u64) {
    to[0] = to[0].saturating_add(count);
    to[1] = to[1].saturating_add(period);
}

/// A call site: the caller, the line it calls from, and the callee.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct CallSite {
    caller: Function,
    line: u32,
    callee: Function,
}

/// One string table per kind of name (callgrind compresses `ob=`, `fl=` and `fn=` apart).
#[derive(Default)]
struct Names {
    ids: HashMap<String, usize>,
    names: Vec<String>,
}

impl Names {
    fn id(&mut self, name: &str) -> usize {
        if let Some(&i) = self.ids.get(name) {
            return i;
        }
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), self.names.len() - 1);
        self.names.len() - 1
    }
}

/// The profile being gathered.
#[derive(Default)]
struct Profile {
    objects: Names,
    files: Names,
    functions: Names,
    /// Per frame id, its function (filled as frames are met).
    of_frame: HashMap<FrameId, Function>,
    /// Self cost per function and line.
    own: BTreeMap<Function, BTreeMap<u32, Cost>>,
    /// Inclusive cost per call site, and the line the callee was first seen at.
    calls: BTreeMap<CallSite, (Cost, u32)>,
    total: Cost,
}

impl Profile {
    fn function(&mut self, table: &FrameTable, id: FrameId) -> Function {
        if let Some(&f) = self.of_frame.get(&id) {
            return f;
        }
        let frame = table.get(id);
        let f = Function {
            object: self.objects.id(&frame.module),
            // Valgrind's name for an unknown file.
            file: self.files.id(frame.file.as_deref().unwrap_or("???")),
            name: self.functions.id(&frame.function),
        };
        self.of_frame.insert(id, f);
        f
    }

    /// Counts one stack (frames innermost first) of `count` samples weighing `period`.
    fn stack(&mut self, table: &FrameTable, frames: &[FrameId], count: u64, period: u64) {
        let Some(&leaf) = frames.first() else {
            return;
        };
        add(&mut self.total, count, period);
        let f = self.function(table, leaf);
        let line = table.get(leaf).line.unwrap_or(0);
        add(
            self.own.entry(f).or_default().entry(line).or_default(),
            count,
            period,
        );
        let mut seen = Vec::with_capacity(frames.len());
        for pair in frames.windows(2) {
            let (callee, caller) = (pair[0], pair[1]);
            let site = CallSite {
                caller: self.function(table, caller),
                line: table.get(caller).line.unwrap_or(0),
                callee: self.function(table, callee),
            };
            // A site the stack passes twice (recursion) counts once.
            if seen.contains(&site) {
                continue;
            }
            seen.push(site);
            let target = table.get(callee).line.unwrap_or(0);
            let (cost, _) = self.calls.entry(site).or_insert(([0, 0], target));
            add(cost, count, period);
        }
    }
}

/// Writes `sampled` (CPU samples or off-CPU waits) in Callgrind's format.
pub fn write(ctx: &ReportContext, sampled: Sampled<'_>, out: &mut dyn Write) -> Result<()> {
    let cpu = sampled.profile;
    let mut p = Profile::default();
    for (s, n) in cpu.stacks.iter().zip(sampled.per_stack()) {
        p.stack(&cpu.table, &s.frames, n, s.period);
    }
    let h = &ctx.header;
    let (samples, period) = if sampled.off_cpu {
        ("Waits", "Blocked_ns")
    } else if sampled.time_event(ctx) {
        ("Samples", "CPU_ns")
    } else {
        ("Samples", "Events")
    };
    writeln!(out, "# callgrind format")?;
    writeln!(out, "version: 1")?;
    writeln!(
        out,
        "creator: crossprof hostside {}",
        env!("CARGO_PKG_VERSION")
    )?;
    writeln!(out, "cmd: {}", one_line(&h.command.join(" ")))?;
    writeln!(out, "part: 1")?;
    writeln!(out)?;
    writeln!(out, "positions: line")?;
    writeln!(
        out,
        "event: {samples} : {}",
        describe(samples, sampled, ctx)
    )?;
    writeln!(out, "event: {period} : {}", describe(period, sampled, ctx))?;
    writeln!(out, "events: {samples} {period}")?;
    writeln!(out, "summary: {} {}", p.total[0], p.total[1])?;

    // Each function's block: its own lines, then its call sites (`calls` is ordered by caller).
    let mut functions: Vec<Function> = p.own.keys().copied().collect();
    functions.extend(p.calls.keys().map(|site| site.caller));
    functions.sort();
    functions.dedup();
    let mut named = Named::default();
    for f in functions {
        writeln!(out)?;
        named.write(out, "ob", f.object, &p.objects)?;
        named.write(out, "fl", f.file, &p.files)?;
        named.write(out, "fn", f.name, &p.functions)?;
        for (line, cost) in p.own.get(&f).into_iter().flatten() {
            writeln!(out, "{line} {} {}", cost[0], cost[1])?;
        }
        let (first, last) = (Function::MIN, Function::MAX);
        let sites = CallSite {
            caller: f,
            line: 0,
            callee: first,
        }..=CallSite {
            caller: f,
            line: u32::MAX,
            callee: last,
        };
        for (site, (cost, target)) in p.calls.range(sites) {
            named.write(out, "cob", site.callee.object, &p.objects)?;
            named.write(out, "cfi", site.callee.file, &p.files)?;
            named.write(out, "cfn", site.callee.name, &p.functions)?;
            writeln!(out, "calls={} {target}", cost[0])?;
            writeln!(out, "{} {} {}", site.line, cost[0], cost[1])?;
        }
    }
    writeln!(out)?;
    writeln!(out, "totals: {} {}", p.total[0], p.total[1])?;
    Ok(())
}

/// Which compressed names were written in full already: the first use of a name is
/// `(id) name`, later ones `(id)`.
#[derive(Default)]
struct Named {
    written: [Vec<bool>; 3],
}

impl Named {
    fn write(&mut self, out: &mut dyn Write, key: &str, id: usize, names: &Names) -> Result<()> {
        let kind = match key {
            "ob" | "cob" => 0,
            "fl" | "cfi" => 1,
            _ => 2,
        };
        let written = &mut self.written[kind];
        if written.len() <= id {
            written.resize(id + 1, false);
        }
        if written[id] {
            writeln!(out, "{key}=({})", id + 1)?;
        } else {
            written[id] = true;
            writeln!(out, "{key}=({}) {}", id + 1, one_line(&names.names[id]))?;
        }
        Ok(())
    }
}

/// What an event counts, for the header's `event:` lines.
fn describe(name: &str, sampled: Sampled<'_>, ctx: &ReportContext) -> String {
    let event = match ctx.header.event.as_str() {
        "" => "cpu-clock",
        e => e,
    };
    match name {
        "Blocked_ns" => "time blocked (ns)".into(),
        "CPU_ns" => format!("CPU time (ns, from {event} samples)"),
        "Events" => format!("{event} events"),
        _ if sampled.off_cpu => "off-CPU waits".into(),
        _ => format!("{event} samples"),
    }
}

/// `s` without line breaks, which would end a line of the format.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}
