//! One recording from start to end: open the output, start or attach to the target, move
//! records from the kernel's rings into the frame writer, flush and sync on schedule, and stop
//! when the target ends, the duration is up, or a signal asks.
//!
//! Three steps, a module each: [`start`] (output, target, events, first records),
//! [`main_loop`] (drain the rings until the target ends or a stop is asked for) and
//! [`finish`] (last drain, End record, warnings). [`output`] is where every record goes on its
//! way to the file, [`header`] what the file starts with.
//!
//! Memory is bounded by the rings (fixed at start), the frame writer's buffer (closed early at
//! 1 MiB) and the per-path identity cache.

mod header;
mod main_loop;
mod output;
mod start;

use crate::cli::Options;
use crate::drain::Drain;
use crate::error::RecError;
use crate::heap::Heap;
use crate::launch;
use crate::perf::events::Events;
use output::Output;

/// Records as the options say; returns rec's exit status.
pub fn run(opts: &Options) -> Result<i32, RecError> {
    let mut live = start::start(opts)?;
    let status = main_loop::record(opts, &mut live);
    finish(live, status)
}

/// A recording under way: where records go and where they come from.
struct Live {
    out: Output,
    events: Events,
    child: Option<launch::Launched>,
    heap: Option<Heap>,
    /// With `--heap -p`: the process the heap library was attached to, to detach at the end.
    injected: Option<crate::heap::attach::Injected>,
    drain: Drain,
}

/// Drains what is left, closes the file with its End record and says what went missing.
fn finish(live: Live, status: i32) -> Result<i32, RecError> {
    let Live {
        mut out,
        mut events,
        mut heap,
        mut drain,
        injected,
        ..
    } = live;
    // Detached first: the heap library stops writing, and what it wrote is drained below.
    if let Some(i) = injected {
        i.detach();
    }
    drain.run(&mut events, &mut out);
    if let Some(h) = heap.as_mut() {
        h.sample_rss(&mut out);
        h.finish(&mut out);
        out.lost("heap-rings-unreadable", h.bad_rings());
    }
    out.close(status)?;
    if let Some(h) = heap.as_ref().filter(|h| h.bad_rings() > 0) {
        eprintln!(
            "rec: {} heap rings could not be read (is libcrossprof_heap.so from this rec's \
             release? see CROSSPROF_HEAP_LIB); their events are missing",
            h.bad_rings()
        );
    }
    if let Some(h) = heap.as_ref().filter(|h| h.lost > 0) {
        eprintln!(
            "rec: {} heap events were lost (see the Lost records); counts are not exact",
            h.lost
        );
    }
    Ok(status)
}
