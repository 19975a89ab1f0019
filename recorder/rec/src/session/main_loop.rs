//! The main loop of a recording: wait for data, drain the rings into the output, sample RSS,
//! flush on schedule, and decide when to stop (the target ended, the duration is up, or a
//! signal asked).

use std::time::{Duration, Instant};

use super::Live;
use crate::cli::{Options, Target};
use crate::drain::wait_readable;
use crate::launch;
use crate::procfs;
use crate::signals;

/// How long the main loop sleeps at most between drains.
const POLL_MS: i32 = 100;
/// With `--heap`, the interposers' rings are drained this often (ms): a 2 MiB ring then only
/// fills when a process makes more than ~6 M events per second. Not with `--heap-sample`:
/// one allocated byte in half a million is an event there, so the rings fill a thousand
/// times slower, and waking up 100 times a second would be most of rec's own work.
const HEAP_POLL_MS: i32 = 10;
/// RSS is sampled this often with `--heap`.
const RSS_EVERY: Duration = Duration::from_millis(100);
/// How long a launched command may take to exit after being asked to stop.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// The main loop: drains the rings, flushes on schedule and returns the target's exit status
/// once it ended, the duration is up or a signal asked to stop.
pub(super) fn record(opts: &Options, live: &mut Live) -> i32 {
    let Live {
        out,
        events,
        child,
        heap,
        drain,
        ..
    } = live;
    let started = Instant::now();
    let mut last_flush = Instant::now();
    let mut stop_at: Option<Instant> = None;
    let mut last_rss = Instant::now();
    let poll_ms = if heap.is_some() && opts.heap_sample.is_none() {
        HEAP_POLL_MS
    } else {
        POLL_MS
    };
    if heap.is_some() {
        signals::install_doorbell();
    }
    loop {
        let urgent = heap.as_ref().is_some_and(|h| h.urgent());
        wait_readable(events, heap.as_ref(), if urgent { 0 } else { poll_ms });
        drain.run(events, out);
        if let Some(h) = heap.as_mut() {
            h.tick(out);
            if last_rss.elapsed() >= RSS_EVERY {
                h.sample_rss(out);
                h.reap(out);
                last_rss = Instant::now();
            }
        }
        if last_flush.elapsed() >= opts.flush {
            out.flush();
            last_flush = Instant::now();
        }
        let timed_out = opts.duration.is_some_and(|d| started.elapsed() >= d);
        let stop = signals::stop_requested().is_some() || timed_out;
        match &child {
            Some(c) => {
                if let Some(s) = launch::try_wait(c.pid) {
                    return launch::exit_status(s);
                }
                if stop && stop_at.is_none() {
                    if timed_out && signals::stop_requested().is_none() {
                        // SAFETY: plain kill of our own child.
                        unsafe { libc::kill(c.pid as i32, libc::SIGTERM) };
                    }
                    stop_at = Some(Instant::now() + STOP_GRACE);
                }
                if stop_at.is_some_and(|t| Instant::now() >= t) {
                    eprintln!(
                        "rec: {} did not exit after being asked to; stopping the recording anyway",
                        c.pid
                    );
                    return 128 + libc::SIGTERM;
                }
            }
            None => {
                let Target::Attach(pid) = opts.target else {
                    // -a: until the duration is up or a signal asks.
                    if stop {
                        return 0;
                    }
                    continue;
                };
                let gone = procfs::has_exited(pid);
                if stop || gone {
                    return 0;
                }
            }
        }
    }
}
