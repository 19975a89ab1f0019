//! The scheduling-latency report (`report --latency`) and its JSON section, `latency`: per
//! thread, wakeup to running again (count, mean, p50, p99, max, a histogram), and for the
//! worst wakeups what ran on that CPU instead, with its stack.

use std::collections::HashMap;
use std::io::{self, Write};

use serde::Serialize;

use crate::analysis::cpu::CpuProfile;
use crate::analysis::latency::{Instead, ThreadLatency, Worst};
use crate::analysis::off_cpu::UNKNOWN_CPU;
use crate::analysis::off_cpu_profile::OffCpuProfile;
use crate::analysis::wakers::stacks_by_sample;
use crate::output::text::user_labels;

/// Threads the text report lists, by most wakeups.
const TEXT_THREADS: usize = 10;
/// Worst wakeups the text report shows per thread.
const TEXT_WORST: usize = 3;
/// User frames shown of a stack in the text report.
const TEXT_FRAMES: usize = 5;

/// One thread of the `latency` section of `report --json`.
#[derive(Serialize)]
pub struct LatencyJson {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Thread name.
    pub comm: String,
    /// Wakeups from a blocked wait that the recording saw.
    pub wakeups: u64,
    /// Of them, those due by a sleep timer (measured from its expiry).
    pub timer_wakeups: u64,
    /// Mean due-to-running time, nanoseconds.
    pub mean_ns: u64,
    /// Median, nanoseconds.
    pub p50_ns: u64,
    /// 99th percentile (nearest rank), nanoseconds.
    pub p99_ns: u64,
    /// The largest, nanoseconds.
    pub max_ns: u64,
    /// Wakeups per latency bucket (powers of two from 1 µs), up to the largest.
    pub histogram: Vec<BucketJson>,
    /// The worst wakeups, worst first.
    pub worst: Vec<WorstJson>,
}

/// One histogram bucket.
#[derive(Serialize)]
pub struct BucketJson {
    /// Latencies below this (and at least the previous bucket's bound), nanoseconds.
    pub upto_ns: u64,
    /// How many.
    pub count: u64,
}

/// One of the worst wakeups.
#[derive(Serialize)]
pub struct WorstJson {
    /// When it was woken, seconds since the recording started.
    pub time: f64,
    /// Due to running, nanoseconds.
    pub latency_ns: u64,
    /// What it was due by: `timer` (its sleep's timer expired) or `wakeup`.
    pub due_by: &'static str,
    /// The CPU it then ran on; null when it never left its CPU (its sleep's timer was
    /// already due when armed).
    pub cpu: Option<u32>,
    /// What ran on that CPU until then; null when nothing recorded did (an idle CPU, or a
    /// process outside the recording).
    pub instead: Option<InsteadJson>,
}

/// What ran instead.
#[derive(Serialize)]
pub struct InsteadJson {
    /// Its process id.
    pub pid: u32,
    /// Its thread id.
    pub tid: u32,
    /// Its thread name.
    pub comm: String,
    /// Its functions, innermost first: from its CPU sample on that CPU while the woken
    /// thread waited, else from when it left the CPU (empty when never sampled).
    pub stack: Vec<String>,
    /// Which of the two `stack` is: `cpu-sample` or `switch-out`.
    pub stack_from: &'static str,
}

fn comm(p: &OffCpuProfile, tid: u32) -> String {
    p.threads
        .iter()
        .find(|t| t.tid == tid)
        .map(|t| t.comm.clone())
        .unwrap_or_default()
}

/// Where the stack of what ran instead is: its CPU sample during the wait in the CPU profile,
/// else its switch-out in the off-CPU profile.
pub struct InsteadStacks<'a> {
    cpu: &'a CpuProfile,
    by_sample: HashMap<(u32, u64), u32>,
    off_cpu: &'a CpuProfile,
}

impl<'a> InsteadStacks<'a> {
    /// The lookup for a recording's CPU profile and off-CPU profile.
    pub fn new(cpu: &'a CpuProfile, off_cpu: &'a CpuProfile) -> Self {
        InsteadStacks {
            cpu,
            by_sample: stacks_by_sample(cpu),
            off_cpu,
        }
    }

    /// The profile and stack index to show for `i`, and whether it is a CPU sample.
    fn of(&self, i: &Instead) -> (&'a CpuProfile, Option<u32>, bool) {
        match i.sample.and_then(|t| self.by_sample.get(&(i.tid, t))) {
            Some(&s) => (self.cpu, Some(s), true),
            None => (self.off_cpu, i.stack, false),
        }
    }
}

fn names(p: &CpuProfile, stack: Option<u32>) -> Vec<String> {
    stack
        .and_then(|s| p.stacks.get(s as usize))
        .map(|s| s.names(&p.table))
        .unwrap_or_default()
}

/// The JSON section, or `None` when the recording has no wakeups. `cpu` is the recording's
/// CPU profile, where what ran instead was sampled.
pub fn json(p: &OffCpuProfile, cpu: &CpuProfile, start_ns: u64) -> Option<Vec<LatencyJson>> {
    let threads = p.latency.as_ref()?;
    let stacks = InsteadStacks::new(cpu, &p.profile);
    let worst = |w: &Worst| WorstJson {
        time: w.woken.saturating_sub(start_ns) as f64 / 1e9,
        latency_ns: w.latency_ns,
        due_by: if w.timer { "timer" } else { "wakeup" },
        cpu: (w.cpu != UNKNOWN_CPU).then_some(w.cpu),
        instead: w.instead.map(|i| {
            let (profile, stack, sampled) = stacks.of(&i);
            InsteadJson {
                pid: i.pid,
                tid: i.tid,
                comm: comm(p, i.tid),
                stack: names(profile, stack),
                stack_from: if sampled { "cpu-sample" } else { "switch-out" },
            }
        }),
    };
    Some(
        threads
            .iter()
            .map(|t: &ThreadLatency| LatencyJson {
                pid: t.pid,
                tid: t.tid,
                comm: comm(p, t.tid),
                wakeups: t.wakeups,
                timer_wakeups: t.timer_wakeups,
                mean_ns: t.mean_ns,
                p50_ns: t.p50_ns,
                p99_ns: t.p99_ns,
                max_ns: t.max_ns,
                histogram: t
                    .histogram
                    .iter()
                    .map(|b| BucketJson {
                        upto_ns: b.upto_ns,
                        count: b.count,
                    })
                    .collect(),
                worst: t.worst.iter().map(worst).collect(),
            })
            .collect(),
    )
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e3)
}

/// The user frames of a stack, labelled, at most [`TEXT_FRAMES`].
fn user_frames(p: &CpuProfile, stack: Option<u32>) -> String {
    match stack.and_then(|s| p.stacks.get(s as usize)) {
        Some(s) => user_labels(p, s, TEXT_FRAMES),
        None => "(never sampled)".into(),
    }
}

/// One worst wakeup in a line: how late, where, and what ran instead in which function (the
/// HTML timeline's marks).
pub fn describe(p: &OffCpuProfile, stacks: &InsteadStacks<'_>, w: &Worst) -> String {
    let late = format!("{} µs late", us(w.latency_ns));
    match w.instead {
        _ if w.cpu == UNKNOWN_CPU => {
            format!("{late}: still running when it armed its next sleep, already due")
        }
        Some(i) => {
            let (profile, stack, _) = stacks.of(&i);
            format!(
                "{late} on CPU {}: {} ({}) ran instead, in {}",
                w.cpu,
                comm(p, i.tid),
                i.tid,
                user_frames(profile, stack)
            )
        }
        None => format!(
            "{late} on CPU {}: nothing recorded ran there (idle, or another process)",
            w.cpu
        ),
    }
}

/// The text section (`cpu`: the recording's CPU profile). Says so when the recording has no
/// wakeups.
pub fn text(
    out: &mut dyn Write,
    p: &OffCpuProfile,
    cpu: &CpuProfile,
    start_ns: u64,
) -> io::Result<()> {
    let stacks = InsteadStacks::new(cpu, &p.profile);
    let Some(threads) = &p.latency else {
        return writeln!(
            out,
            "\nScheduling latency: this recording has no wakeups (record with `rec --off-cpu` \
             as root, or where sched:sched_waking is readable, without --no-wakeups)"
        );
    };
    writeln!(
        out,
        "\nScheduling latency (due to running, µs: from the expiry of the sleep timer that woke \
         it, else from the wakeup; {} threads woken, the {} with most wakeups)",
        threads.len(),
        threads.len().min(TEXT_THREADS)
    )?;
    writeln!(
        out,
        "  {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}  thread",
        "wakeups", "by timer", "mean", "p50", "p99", "max"
    )?;
    for t in threads.iter().take(TEXT_THREADS) {
        writeln!(
            out,
            "  {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}  {} ({})",
            t.wakeups,
            t.timer_wakeups,
            us(t.mean_ns),
            us(t.p50_ns),
            us(t.p99_ns),
            us(t.max_ns),
            comm(p, t.tid),
            t.tid
        )?;
    }
    for t in threads.iter().take(TEXT_THREADS) {
        writeln!(out, "\n  {} ({}): latency histogram", comm(p, t.tid), t.tid)?;
        let most = t
            .histogram
            .iter()
            .map(|b| b.count)
            .max()
            .unwrap_or(1)
            .max(1);
        let mut from = 0;
        for b in &t.histogram {
            let bar = "#".repeat(((b.count * 40).div_ceil(most)) as usize);
            writeln!(
                out,
                "    {:>9} - {:>9} µs {:>8}  {bar}",
                us(from),
                us(b.upto_ns),
                b.count
            )?;
            from = b.upto_ns;
        }
        writeln!(out, "    worst wakeups:")?;
        for w in t.worst.iter().take(TEXT_WORST) {
            let at = w.woken.saturating_sub(start_ns) as f64 / 1e9;
            match w.instead {
                _ if w.cpu == UNKNOWN_CPU => writeln!(
                    out,
                    "    {:>9} µs at {at:.3} s: still running, late, when it armed its next \
                     sleep (its timer was already due: it did not sleep)",
                    us(w.latency_ns)
                )?,
                Some(i) => {
                    let (profile, stack, sampled) = stacks.of(&i);
                    writeln!(
                        out,
                        "    {:>9} µs at {at:.3} s on CPU {}: {} ({}) ran instead, {} {}",
                        us(w.latency_ns),
                        w.cpu,
                        comm(p, i.tid),
                        i.tid,
                        if sampled {
                            "sampled in"
                        } else {
                            "leaving the CPU in"
                        },
                        user_frames(profile, stack)
                    )?
                }
                None => writeln!(
                    out,
                    "    {:>9} µs at {at:.3} s on CPU {}: nothing recorded ran there (idle, \
                     or a process outside the recording)",
                    us(w.latency_ns),
                    w.cpu
                )?,
            }
        }
    }
    Ok(())
}
