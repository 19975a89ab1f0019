//! The thread timeline in the text report (one row of [`COLUMNS`] characters per thread) and
//! its JSON, the report's `timeline` field.

use std::io::{self, Write};

use serde::Serialize;

use crate::analysis::thread_timeline::{Row, ThreadTimeline, COLUMNS};
use crate::output::text::pct;

/// `timeline` of `report --json`.
#[derive(Serialize)]
pub struct TimelineJson {
    /// `switches` (exact, from `rec --off-cpu`'s switch records) or `samples` (running where
    /// CPU samples fell, waiting the rest of the thread's life).
    pub source: String,
    /// Board time of the first slice's start, ns after the recording's start.
    pub start_ns: u64,
    /// Length of each slice, ns.
    pub slice_ns: u64,
    /// Threads by running time, most first.
    pub threads: Vec<TimelineThreadJson>,
}

/// One thread of the timeline.
#[derive(Serialize)]
pub struct TimelineThreadJson {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Thread name.
    pub comm: String,
    /// Running, ns.
    pub running_ns: u64,
    /// Alive and not running (blocked or preempted), ns.
    pub waiting_ns: u64,
    /// The text report's row: one character per slice (see [`cell`]).
    pub row: String,
    /// Running ns in each slice.
    pub running: Vec<u64>,
    /// Waiting ns in each slice.
    pub waiting: Vec<u64>,
}

/// One slice's character, by the share of the thread's time alive in it that it ran: `#`
/// (95% or more), `*` (three quarters), `+` (half), `:` (a quarter), `.` (less), `_` (none:
/// waiting), ` ` (not alive).
pub fn cell(running: u64, waiting: u64) -> char {
    let alive = running + waiting;
    match alive {
        0 => ' ',
        _ if running == 0 => '_',
        _ if running * 20 >= alive * 19 => '#',
        _ if running * 4 >= alive * 3 => '*',
        _ if running * 2 >= alive => '+',
        _ if running * 4 >= alive => ':',
        _ => '.',
    }
}

fn row(r: &Row) -> String {
    r.running
        .iter()
        .zip(&r.waiting)
        .map(|(&a, &b)| cell(a, b))
        .collect()
}

/// The JSON field; `origin` is the recording's start on the board clock.
pub fn json(t: &ThreadTimeline, origin: u64) -> TimelineJson {
    TimelineJson {
        source: t.source.into(),
        start_ns: t.start.saturating_sub(origin),
        slice_ns: t.slice_ns,
        threads: t
            .rows
            .iter()
            .map(|r| TimelineThreadJson {
                pid: r.pid,
                tid: r.tid,
                comm: r.comm.clone(),
                running_ns: r.running_ns(),
                waiting_ns: r.waiting_ns(),
                row: row(r),
                running: r.running.clone(),
                waiting: r.waiting.clone(),
            })
            .collect(),
    }
}

/// The text section, with the `top` threads that ran most; `origin` as for [`json`].
pub fn text(out: &mut dyn Write, t: &ThreadTimeline, origin: u64, top: usize) -> io::Result<()> {
    writeln!(
        out,
        "\nThread timeline ({}): {COLUMNS} columns of {:.1} ms from {:.3} s; share running: \
         '#' all, '*' 3/4, '+' 1/2, ':' 1/4, '.' less, '_' none (waiting), ' ' not alive",
        if t.source == "switches" {
            "from context switches"
        } else {
            "running where CPU samples fell"
        },
        t.slice_ns as f64 / 1e6,
        t.start.saturating_sub(origin) as f64 / 1e9
    )?;
    for r in t.rows.iter().take(top) {
        let (run, wait) = (r.running_ns(), r.waiting_ns());
        writeln!(
            out,
            "  {:>5.1}% |{}| pid {} tid {} {}",
            pct(run, run + wait),
            row(r),
            r.pid,
            r.tid,
            r.comm
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::cell;

    #[test]
    fn cells_say_how_much_of_the_slice_ran() {
        assert_eq!(cell(0, 0), ' ');
        assert_eq!(cell(10, 0), '#');
        assert_eq!(cell(19, 1), '#');
        assert_eq!(cell(3, 1), '*');
        assert_eq!(cell(1, 1), '+');
        assert_eq!(cell(1, 3), ':');
        assert_eq!(cell(1, 4), '.');
        assert_eq!(cell(0, 5), '_');
    }
}
