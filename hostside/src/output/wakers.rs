//! Who woke whom, in the off-CPU report: for the blocked stacks with the most woken time,
//! the threads and stacks that woke them (text), and the `off_cpu.wakeups` JSON section.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

use crate::analysis::cpu::CpuProfile;
use crate::analysis::wakers::Wakers;
use crate::output::text::{pct, user_labels};

/// Wakers listed per blocked stack in the text report.
const WAKERS_PER_STACK: usize = 3;
/// Wakers listed per blocked stack in the JSON.
const JSON_WAKERS_PER_STACK: usize = 10;
/// User frames shown of each stack in the text report.
const TEXT_FRAMES: usize = 6;

/// `off_cpu.wakeups` of `report --json`.
#[derive(Serialize)]
pub struct WakeupsJson {
    /// The wakeup event recorded (`sched:sched_waking`).
    pub event: String,
    /// Blocked time whose wakeup is known, nanoseconds.
    pub woken_ns: u64,
    /// Blocked time with no wakeup recorded: woken from outside the recorded processes (a
    /// timer, another program), or the wakeup was lost.
    pub unwoken_ns: u64,
    /// Blocked stacks by the time their known wakeups ended, most first.
    pub blocked: Vec<BlockedJson>,
}

/// One blocked stack and who woke it.
#[derive(Serialize)]
pub struct BlockedJson {
    /// Thread id.
    pub tid: u32,
    /// Functions, innermost first (kernel frames, then user frames).
    pub stack: Vec<String>,
    /// Nanoseconds of its waits whose wakeup is known.
    pub woken_ns: u64,
    /// Its wakers, most time first.
    pub wakers: Vec<WakerJson>,
}

/// One waker stack of a blocked stack.
#[derive(Serialize)]
pub struct WakerJson {
    /// The waker's process id.
    pub pid: u32,
    /// The waker's thread id.
    pub tid: u32,
    /// The waker's thread name.
    pub comm: String,
    /// Its functions at the wakeup, innermost first.
    pub stack: Vec<String>,
    /// Nanoseconds of the waits it ended.
    pub wait_ns: u64,
    /// How many waits it ended.
    pub wakeups: u64,
}

/// A waker of a blocked stack: (waker stack index, nanoseconds, wakeups).
type Waker = (u32, u64, u64);
/// A blocked stack: (its stack index, its woken time, its wakers, most time first).
type BlockedWakers = (u32, u64, Vec<Waker>);

fn by_blocked(w: &Wakers) -> Vec<BlockedWakers> {
    let mut m: BTreeMap<u32, (u64, Vec<Waker>)> = BTreeMap::new();
    for p in &w.pairs {
        let e = m.entry(p.blocked).or_default();
        e.0 += p.ns;
        e.1.push((p.waker, p.ns, p.count));
    }
    let mut v: Vec<_> = m.into_iter().map(|(b, (ns, ws))| (b, ns, ws)).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

/// The JSON section, with the top `top` blocked stacks.
pub fn json(blocked: &CpuProfile, w: &Wakers, top: usize) -> WakeupsJson {
    let stacks = by_blocked(w)
        .into_iter()
        .take(top)
        .filter_map(|(b, ns, ws)| {
            let bs = blocked.stacks.get(b as usize)?;
            Some(BlockedJson {
                tid: bs.tid,
                stack: bs.names(&blocked.table),
                woken_ns: ns,
                wakers: ws
                    .iter()
                    .take(JSON_WAKERS_PER_STACK)
                    .filter_map(|&(ws, ns, count)| {
                        let s = w.profile.stacks.get(ws as usize)?;
                        Some(WakerJson {
                            pid: s.pid,
                            tid: s.tid,
                            comm: thread_name(&w.profile, s.tid),
                            stack: s.names(&w.profile.table),
                            wait_ns: ns,
                            wakeups: count,
                        })
                    })
                    .collect(),
            })
        })
        .collect();
    WakeupsJson {
        event: w.event.clone(),
        woken_ns: w.woken_ns,
        unwoken_ns: w.unwoken_ns,
        blocked: stacks,
    }
}

fn thread_name(p: &CpuProfile, tid: u32) -> String {
    p.threads
        .iter()
        .find(|t| t.tid == tid)
        .map(|t| t.comm.clone())
        .unwrap_or_default()
}

fn ms(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

/// The text section: the `top` blocked stacks with the most woken time, each with its
/// wakers.
pub fn text(out: &mut dyn Write, blocked: &CpuProfile, w: &Wakers, top: usize) -> io::Result<()> {
    let total = w.woken_ns + w.unwoken_ns;
    writeln!(
        out,
        "\nWho woke them ({}: {} of {} blocked known, {:.1}%; the rest was woken from outside \
         the recorded processes, e.g. by a timer)",
        w.event,
        ms(w.woken_ns),
        ms(total),
        pct(w.woken_ns, total)
    )?;
    for (b, ns, ws) in by_blocked(w).into_iter().take(top) {
        let Some(bs) = blocked.stacks.get(b as usize) else {
            continue;
        };
        writeln!(
            out,
            "  {:>10}  tid {} blocked in {}",
            ms(ns),
            bs.tid,
            user_labels(blocked, bs, TEXT_FRAMES)
        )?;
        for &(ws, wns, count) in ws.iter().take(WAKERS_PER_STACK) {
            let Some(s) = w.profile.stacks.get(ws as usize) else {
                continue;
            };
            writeln!(
                out,
                "    {:>10}  {count} wakeups by tid {} {}: {}",
                ms(wns),
                s.tid,
                thread_name(&w.profile, s.tid),
                user_labels(&w.profile, s, TEXT_FRAMES)
            )?;
        }
    }
    Ok(())
}
