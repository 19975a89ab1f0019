//! Time and thread filters (`--from SECS --to SECS --pid N --tid N`): which part of a
//! recording an analysis looks at.
//!
//! Times are seconds after the recording's start (the header's `start_clock_ns`), the window
//! `[from, to)`: an event at exactly `from` is in it, one at exactly `to` is not, so two
//! adjacent windows split a recording without counting anything twice (and a window ending
//! where the HTML report's selection ends keeps the same samples). An event stamped before the
//! recording's start counts as at 0 s. [`Filter`] is what the
//! user asked for; [`Window`] is the same bound to one recording's clock, which every analysis
//! consults:
//!
//! - CPU and event samples (page faults, ...): kept when their time, process and thread are
//!   selected ([`Window::keeps`]).
//! - Off-CPU waits: clipped to the window ([`Window::overlap`]): a thread that slept through
//!   the whole window waited exactly the window's length in it.
//! - Heap: only allocations made inside the window by the selected process and thread count;
//!   frees count (whichever thread makes them) when they are inside the window and release
//!   one of those allocations. Blocks still live when the window starts are not allocations
//!   of the window, and their frees are ignored; "leaked" becomes "still live at the window's
//!   end", and the peak is the peak of the window's own allocations.
//!
//! Validation ([`Filter::bind`]) turns bad input into a message that says what to do, never a
//! panic: a window that ends before it starts, a start after the recording's end, a process or
//! thread the recording never saw.

use std::collections::BTreeSet;
use std::fmt;

use anyhow::{bail, Result};

/// What the user selected, before it is bound to a recording.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Filter {
    /// Window start, ns after the recording's start (inclusive).
    pub from_ns: Option<u64>,
    /// Window end, ns after the recording's start (exclusive).
    pub to_ns: Option<u64>,
    /// Only this process.
    pub pid: Option<u32>,
    /// Only this thread.
    pub tid: Option<u32>,
}

/// The tasks a recording saw, to check `--pid` and `--tid` against.
#[derive(Debug, Default)]
pub struct Tasks {
    /// Process ids.
    pub pids: BTreeSet<u32>,
    /// Thread ids with their process.
    pub tids: BTreeSet<(u32, u32)>,
}

impl Tasks {
    /// Notes thread `tid` of process `pid`.
    pub fn add(&mut self, pid: u32, tid: u32) {
        self.pids.insert(pid);
        self.tids.insert((pid, tid));
    }
}

/// A [`Filter`] bound to a recording's clock: absolute board times. Cheap to copy; the
/// default selects everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First board time in the window (ns, inclusive).
    pub lo: u64,
    /// End of the window on the board clock (ns, exclusive; `u64::MAX` when open).
    pub hi: u64,
    /// Only this process.
    pub pid: Option<u32>,
    /// Only this thread.
    pub tid: Option<u32>,
    /// What was asked, relative to the recording's start (for the report's header).
    pub asked: Filter,
}

impl Default for Window {
    fn default() -> Self {
        Window {
            lo: 0,
            hi: u64::MAX,
            pid: None,
            tid: None,
            asked: Filter::default(),
        }
    }
}

impl Filter {
    /// Whether nothing is filtered.
    pub fn is_empty(&self) -> bool {
        *self == Filter::default()
    }

    /// Binds the filter to a recording that started at `start` (board clock) and lasted
    /// `duration_ns`, after checking it against the recording: `to` after `from`, `from`
    /// before the end, `pid` and `tid` among the recorded tasks (and the thread in the
    /// process, when both are given). `name` names the recording in messages.
    pub fn bind(&self, name: &str, start: u64, duration_ns: u64, tasks: &Tasks) -> Result<Window> {
        if let (Some(from), Some(to)) = (self.from_ns, self.to_ns) {
            if from >= to {
                bail!(
                    "--from {} is not before --to {}: the window would be empty",
                    Secs(from),
                    Secs(to)
                );
            }
        }
        if let Some(from) = self.from_ns {
            if from >= duration_ns && duration_ns > 0 {
                bail!(
                    "--from {} is past the end of {name}, which lasts {} (times are seconds \
                     from the recording's start)",
                    Secs(from),
                    Secs(duration_ns)
                );
            }
        }
        if let Some(pid) = self.pid {
            if !tasks.pids.contains(&pid) {
                bail!(
                    "--pid {pid}: {name} recorded no process {pid}; it has {}",
                    list(tasks.pids.iter().copied())
                );
            }
        }
        if let Some(tid) = self.tid {
            let owners: Vec<u32> = tasks
                .tids
                .iter()
                .filter(|(_, t)| *t == tid)
                .map(|(p, _)| *p)
                .collect();
            if owners.is_empty() {
                bail!(
                    "--tid {tid}: {name} recorded no thread {tid}; it has {}",
                    list(tasks.tids.iter().map(|(_, t)| *t))
                );
            }
            if let Some(pid) = self.pid {
                if !owners.contains(&pid) {
                    bail!(
                        "--tid {tid} is a thread of process {}, not of --pid {pid}",
                        list(owners.into_iter())
                    );
                }
            }
        }
        // A window from the start keeps what was stamped just before it too (heap events
        // carry the kernel tick's coarse clock, up to 10 ms behind).
        let lo = match self.from_ns {
            None | Some(0) => 0,
            Some(from) => start.saturating_add(from),
        };
        Ok(Window {
            lo,
            hi: self.to_ns.map_or(u64::MAX, |t| start.saturating_add(t)),
            pid: self.pid,
            tid: self.tid,
            asked: *self,
        })
    }
}

/// Up to 20 ids, then how many more.
fn list(ids: impl Iterator<Item = u32>) -> String {
    let ids: BTreeSet<u32> = ids.collect();
    if ids.is_empty() {
        return "none".into();
    }
    let mut s: Vec<String> = ids.iter().take(20).map(|i| i.to_string()).collect();
    if ids.len() > 20 {
        s.push(format!("and {} more", ids.len() - 20));
    }
    s.join(", ")
}

impl Window {
    /// Whether anything is filtered.
    pub fn is_active(&self) -> bool {
        !self.asked.is_empty()
    }

    /// Whether `time` lies in the window.
    pub fn keeps_time(&self, time: u64) -> bool {
        self.lo <= time && time < self.hi
    }

    /// Whether `pid`/`tid` are selected.
    pub fn keeps_task(&self, pid: u32, tid: u32) -> bool {
        self.pid.is_none_or(|p| p == pid) && self.tid.is_none_or(|t| t == tid)
    }

    /// Whether an event of thread `tid` of process `pid` at `time` is selected.
    pub fn keeps(&self, time: u64, pid: u32, tid: u32) -> bool {
        self.keeps_time(time) && self.keeps_task(pid, tid)
    }

    /// Whether an event of process `pid` at `time` is selected, whatever its thread (process
    /// wide events such as RSS, and frees, which any thread may make).
    pub fn keeps_process(&self, time: u64, pid: u32) -> bool {
        self.keeps_time(time) && self.pid.is_none_or(|p| p == pid)
    }

    /// The part of `[a, b)` inside the window, in ns (0 when they do not meet).
    pub fn overlap(&self, a: u64, b: u64) -> u64 {
        b.min(self.hi).saturating_sub(a.max(self.lo))
    }

    /// One line that says what the window selects, e.g. `0.500 s to 1.000 s, pid 12, tid 13`;
    /// `None` when nothing is filtered.
    pub fn describe(&self) -> Option<String> {
        if !self.is_active() {
            return None;
        }
        let a = &self.asked;
        let mut parts = Vec::new();
        match (a.from_ns, a.to_ns) {
            (Some(f), Some(t)) => parts.push(format!("{} to {}", Secs(f), Secs(t))),
            (Some(f), None) => parts.push(format!("from {} to the end", Secs(f))),
            (None, Some(t)) => parts.push(format!("from the start to {}", Secs(t))),
            (None, None) => {}
        }
        if let Some(p) = a.pid {
            parts.push(format!("pid {p}"));
        }
        if let Some(t) = a.tid {
            parts.push(format!("tid {t}"));
        }
        Some(parts.join(", "))
    }
}

/// Nanoseconds printed as seconds with as many decimals as they need (at least 3).
pub struct Secs(pub u64);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (s, ns) = (self.0 / 1_000_000_000, self.0 % 1_000_000_000);
        let frac = format!("{ns:09}");
        let trimmed = frac.trim_end_matches('0');
        let keep = trimmed.len().max(3);
        write!(f, "{s}.{} s", &frac[..keep])
    }
}

/// Parses `SECS` (seconds after the recording's start: `2`, `0.25`, `1.5s`) into
/// nanoseconds, exactly (decimal digits, not a float: `0.3` is 300,000,000 ns); digits
/// beyond nanoseconds are dropped. Negative and non-numeric values are refused.
pub fn parse_secs(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t.strip_suffix('s').unwrap_or(t).trim_end();
    if t.starts_with('-') {
        return Err(format!(
            "{s:?} is negative: times are seconds from the recording's start (0 or more)"
        ));
    }
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    let digits = |d: &str| d.chars().all(|c| c.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
        return Err(format!(
            "{s:?} is not a time in seconds (e.g. 0, 1.5, 0.250)"
        ));
    }
    let whole: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| format!("{s:?} is too large"))?
    };
    let mut ns = 0u64;
    for (i, c) in frac.chars().take(9).enumerate() {
        ns += u64::from(c as u8 - b'0') * 10u64.pow(8 - i as u32);
    }
    whole
        .checked_mul(1_000_000_000)
        .and_then(|w| w.checked_add(ns))
        .ok_or_else(|| format!("{s:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_parse_exactly() {
        assert_eq!(parse_secs("0"), Ok(0));
        assert_eq!(parse_secs("2"), Ok(2_000_000_000));
        assert_eq!(parse_secs("0.3"), Ok(300_000_000));
        assert_eq!(parse_secs(".5"), Ok(500_000_000));
        assert_eq!(parse_secs("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_secs("1.000000001"), Ok(1_000_000_001));
        assert_eq!(parse_secs("1.0000000019"), Ok(1_000_000_001));
        assert!(parse_secs("-1").unwrap_err().contains("negative"));
        assert!(parse_secs("").is_err());
        assert!(parse_secs(".").is_err());
        assert!(parse_secs("1e3").is_err());
        assert!(parse_secs("1.2.3").is_err());
        assert!(parse_secs("99999999999999999999").is_err());
        assert!(parse_secs("18446744074").is_err());
    }

    #[test]
    fn secs_print_what_they_need() {
        assert_eq!(Secs(1_500_000_000).to_string(), "1.500 s");
        assert_eq!(Secs(1_000_000_001).to_string(), "1.000000001 s");
        assert_eq!(Secs(0).to_string(), "0.000 s");
    }

    fn tasks() -> Tasks {
        let mut t = Tasks::default();
        t.add(10, 10);
        t.add(10, 11);
        t.add(20, 20);
        t
    }

    #[test]
    fn bad_filters_are_refused_with_a_reason() {
        let f = |from, to, pid, tid| Filter {
            from_ns: from,
            to_ns: to,
            pid,
            tid,
        };
        let bind = |x: Filter| x.bind("t.zst", 100, 5_000, &tasks());
        let e = bind(f(Some(2000), Some(1000), None, None)).unwrap_err();
        assert!(e.to_string().contains("not before"), "{e}");
        assert!(bind(f(Some(1000), Some(1000), None, None)).is_err());
        let e = bind(f(Some(5000), None, None, None)).unwrap_err();
        assert!(e.to_string().contains("past the end"), "{e}");
        let e = bind(f(None, None, Some(30), None)).unwrap_err();
        assert!(e.to_string().contains("10, 20"), "{e}");
        let e = bind(f(None, None, None, Some(12))).unwrap_err();
        assert!(e.to_string().contains("no thread 12"), "{e}");
        let e = bind(f(None, None, Some(20), Some(11))).unwrap_err();
        assert!(e.to_string().contains("process 10"), "{e}");
        let w = bind(f(Some(1000), Some(3000), Some(10), Some(11))).unwrap();
        assert_eq!((w.lo, w.hi), (1100, 3100));
        assert!(w.keeps(1100, 10, 11) && !w.keeps(3100, 10, 11) && !w.keeps(1099, 10, 11));
        assert!(!w.keeps(2000, 10, 10));
        assert_eq!(w.overlap(0, 2000), 900);
        assert_eq!(w.overlap(0, 10_000), 2000);
        assert_eq!(w.overlap(4000, 10_000), 0);
        assert_eq!(
            w.describe().as_deref(),
            Some("0.000001 s to 0.000003 s, pid 10, tid 11")
        );
    }

    #[test]
    fn no_filter_keeps_everything() {
        let w = Window::default();
        assert!(!w.is_active());
        assert!(w.keeps(0, 1, 1) && w.keeps(u64::MAX - 1, 1, 1));
        assert_eq!(w.overlap(5, 10), 5);
        assert_eq!(w.describe(), None);
    }
}
