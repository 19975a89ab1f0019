//! The system call report (`report --syscalls`) and its JSON sections, `syscalls` and
//! `syscall_threads`: per call, as `strace -c` prints them (share of the time, seconds,
//! microseconds a call, calls, errors), then for the calls that took most time the stacks
//! that made them and their errnos, and the threads that spent most time in calls.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

use crate::analysis::syscalls::names::errno_name;
use crate::analysis::syscalls::{SyscallStats, Syscalls};
use crate::output::context::ReportContext;
use crate::output::text::{frame_label, header, pct};

/// Calls the text report details (stacks and errnos), most time first.
const TEXT_CALLS: usize = 10;
/// Stacks the text report shows per call.
const TEXT_STACKS: usize = 3;
/// User frames shown of a stack in the text report.
const TEXT_FRAMES: usize = 6;
/// Threads the text report lists.
const TEXT_THREADS: usize = 10;

/// One system call of the `syscalls` section of `report --json`. The field names are a
/// contract (scripts read them): add, never rename.
#[derive(Serialize)]
pub struct SyscallJson {
    /// Its name on the recording's architecture (`syscall_<nr>` when unknown).
    pub name: String,
    /// Its number on that architecture.
    pub nr: i64,
    /// Calls entered, unfinished ones included.
    pub count: u64,
    /// Calls that returned an error (-4095..=-1).
    pub errors: u64,
    /// The errors by errno name (`EBADF`), `errno_<n>` for one without a name.
    pub errnos: BTreeMap<String, u64>,
    /// Time in finished calls, entry to exit, nanoseconds.
    pub total_ns: u64,
    /// The longest finished call, nanoseconds.
    pub max_ns: u64,
    /// Mean time of a finished call, nanoseconds.
    pub mean_ns: u64,
    /// Calls with no exit recorded (lost, never returning like `exit_group`, or still in
    /// the call when the recording stopped): in `count`, not in the times.
    pub unfinished: u64,
    /// The stacks that made the calls, most time first (the report's `--top` of them).
    pub stacks: Vec<SyscallStackJson>,
}

/// One calling stack of a system call.
#[derive(Serialize)]
pub struct SyscallStackJson {
    /// The calling thread's user functions, innermost first (the kernel's entry path, the
    /// same for every call, is left out); empty when the stack is unknown.
    pub stack: Vec<String>,
    /// The callers' process id.
    pub pid: u32,
    /// Calls made from it, unfinished ones included.
    pub count: u64,
    /// Time in its finished calls, nanoseconds.
    pub total_ns: u64,
}

/// One thread of the `syscall_threads` section.
#[derive(Serialize)]
pub struct SyscallThreadJson {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Thread name.
    pub comm: String,
    /// Calls entered.
    pub count: u64,
    /// Calls that returned an error.
    pub errors: u64,
    /// Time in finished calls, nanoseconds.
    pub total_ns: u64,
    /// Calls with no exit recorded.
    pub unfinished: u64,
}

/// The user function names of a stack, innermost first.
fn stack_names(s: &Syscalls, stack: Option<u32>) -> Vec<String> {
    s.user_frames(stack)
        .iter()
        .map(|&f| s.profile.table.get(f).function.clone())
        .collect()
}

/// The `syscalls` section, with at most `top` stacks per call.
pub fn json(s: &Syscalls, top: usize) -> Vec<SyscallJson> {
    s.calls
        .iter()
        .map(|c| SyscallJson {
            name: c.name.clone(),
            nr: c.nr,
            count: c.count,
            errors: c.errors,
            errnos: c.errnos.iter().map(|&(e, n)| (errno_name(e), n)).collect(),
            total_ns: c.total_ns,
            max_ns: c.max_ns,
            mean_ns: c.mean_ns(),
            unfinished: c.unfinished,
            stacks: c
                .stacks
                .iter()
                .take(top)
                .map(|st| SyscallStackJson {
                    stack: stack_names(s, st.stack),
                    pid: st.pid,
                    count: st.count,
                    total_ns: st.total_ns,
                })
                .collect(),
        })
        .collect()
}

/// The `syscall_threads` section, at most `top` threads.
pub fn threads_json(s: &Syscalls, top: usize) -> Vec<SyscallThreadJson> {
    s.threads
        .iter()
        .take(top)
        .map(|t| SyscallThreadJson {
            pid: t.pid,
            tid: t.tid,
            comm: t.comm.clone(),
            count: t.calls,
            errors: t.errors,
            total_ns: t.total_ns,
            unfinished: t.unfinished,
        })
        .collect()
}

fn secs(ns: u64) -> String {
    format!("{:.6}", ns as f64 / 1e9)
}

fn us(ns: u64) -> String {
    format!("{:.1} µs", ns as f64 / 1e3)
}

/// A blank for a zero, as `strace -c` leaves its errors column.
fn blank_zero(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        n.to_string()
    }
}

/// The user frames of a stack for the text report, callee <- caller.
fn chain(s: &Syscalls, stack: Option<u32>) -> String {
    let frames = s.user_frames(stack);
    if frames.is_empty() {
        return "(no user frames)".into();
    }
    let mut labels: Vec<String> = frames
        .iter()
        .take(TEXT_FRAMES)
        .map(|&f| frame_label(s.profile.table.get(f)))
        .collect();
    if frames.len() > TEXT_FRAMES {
        labels.push("...".into());
    }
    labels.join(" <- ")
}

/// The `strace -c` table.
fn table(out: &mut dyn Write, s: &Syscalls) -> io::Result<()> {
    let (count, errors, total_ns, _) = s.totals();
    let rule = "------ ----------- ----------- --------- --------- ----------------";
    writeln!(
        out,
        "\n% time     seconds  usecs/call     calls    errors syscall"
    )?;
    writeln!(out, "{rule}")?;
    let row = |out: &mut dyn Write, c: &SyscallStats| {
        writeln!(
            out,
            "{:>6.2} {:>11} {:>11} {:>9} {:>9} {}",
            pct(c.total_ns, total_ns),
            secs(c.total_ns),
            c.mean_ns() / 1000,
            c.count,
            blank_zero(c.errors),
            c.name
        )
    };
    for c in &s.calls {
        row(out, c)?;
    }
    writeln!(out, "{rule}")?;
    let finished = count.saturating_sub(s.totals().3);
    writeln!(
        out,
        "{:>6.2} {:>11} {:>11} {:>9} {:>9} total",
        100.0,
        secs(total_ns),
        total_ns.checked_div(finished).unwrap_or(0) / 1000,
        count,
        blank_zero(errors)
    )
}

/// Where the calls that took most time were made, and how they failed.
fn details(out: &mut dyn Write, s: &Syscalls) -> io::Result<()> {
    writeln!(
        out,
        "\nWhere the calls that took most time were made (user frames, callee <- caller)"
    )?;
    for c in s.calls.iter().take(TEXT_CALLS) {
        writeln!(
            out,
            "\n  {}: {} calls, {} s, mean {}, max {}",
            c.name,
            c.count,
            secs(c.total_ns),
            us(c.mean_ns()),
            us(c.max_ns)
        )?;
        if c.errors > 0 {
            let errnos: Vec<String> = c
                .errnos
                .iter()
                .map(|&(e, n)| format!("{} {n}", errno_name(e)))
                .collect();
            writeln!(out, "    errors: {} ({})", c.errors, errnos.join(", "))?;
        }
        if c.unfinished > 0 {
            writeln!(out, "    unfinished: {} (no exit recorded)", c.unfinished)?;
        }
        for st in c.stacks.iter().take(TEXT_STACKS) {
            writeln!(
                out,
                "    {:>6.1}% {:>8} calls {:>11} s  pid {}: {}",
                pct(st.total_ns, c.total_ns),
                st.count,
                secs(st.total_ns),
                st.pid,
                chain(s, st.stack)
            )?;
        }
    }
    Ok(())
}

/// Writes the system call report.
pub fn report(out: &mut dyn Write, ctx: &ReportContext, s: &Syscalls) -> io::Result<()> {
    let (count, errors, total_ns, unfinished) = s.totals();
    header(
        out,
        ctx,
        &format!(
            "{count} system calls, {} s in calls, {errors} errors",
            secs(total_ns)
        ),
    )?;
    writeln!(
        out,
        "  times     entry to exit of each call (raw_syscalls tracepoints, `rec -e syscalls`)"
    )?;
    if !s.exits_recorded {
        writeln!(
            out,
            "  NOTE      this recording has no raw_syscalls:sys_exit samples: no times, no errors"
        )?;
    }
    if unfinished > 0 {
        writeln!(
            out,
            "  note      {unfinished} calls had no exit recorded (lost, never returning like \
             exit_group, or still in the call when the recording stopped): counted in calls, \
             not in times"
        )?;
    }
    if s.unpaired_exits > 0 {
        writeln!(
            out,
            "  note      {} exits had no entry (entry lost or before the recording): not counted",
            s.unpaired_exits
        )?;
    }
    if s.calls.is_empty() {
        writeln!(
            out,
            "\nNo system calls in the selected part of the recording."
        )?;
        return crate::output::text::diagnostics(out, &ctx.diagnostics);
    }
    table(out, s)?;
    details(out, s)?;
    writeln!(out, "\nThreads by time in system calls")?;
    writeln!(
        out,
        "  {:>11} {:>9} {:>9}  thread",
        "seconds", "calls", "errors"
    )?;
    for t in s.threads.iter().take(TEXT_THREADS) {
        writeln!(
            out,
            "  {:>11} {:>9} {:>9}  pid {} tid {} {}",
            secs(t.total_ns),
            t.calls,
            t.errors,
            t.pid,
            t.tid,
            t.comm
        )?;
    }
    crate::output::text::diagnostics(out, &ctx.diagnostics)
}
