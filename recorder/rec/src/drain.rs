//! Moving records from the kernel's rings to the recording: the loop that must keep up with
//! the kernel, so it copies each record once out of the ring and decodes samples into buffers
//! it reuses (no allocation per sample).
//!
//! Records of a wanted type that do not decode, and rings that had to be resynchronized, are
//! counted and written down as `Lost` records (`undecodable`, `resync`) so the report can say
//! what is missing; the kernel's own losses (a ring that was full) arrive as `Lost` records.

use std::os::fd::AsRawFd;

use crossprof_format::{EventSample, Record, Sample};

use crate::heap::Heap;
use crate::perf::events::Events;
use crate::perf::parse;

/// Where drained records go.
pub trait Destination {
    /// Takes one decoded record other than a sample (maps, names, tasks, switches, losses).
    fn record(&mut self, r: Record);
    /// Takes one sample (`Sample` or `EventSample`) by reference: its buffers go back to the
    /// drain for the next one.
    fn sample(&mut self, r: &Record);
    /// Notes `count` events of `kind` that rec could not record.
    fn lost(&mut self, kind: &str, count: u64);
}

/// The drain loop's reusable buffers. Costs the largest record seen and one sample's
/// buffers.
#[derive(Default)]
pub struct Drain {
    /// A record copied out of its ring.
    raw: Vec<u8>,
    /// The sample being decoded.
    sample: Sample,
}

impl Drain {
    /// Moves every record now in the rings to `out`.
    pub fn run(&mut self, events: &mut Events, out: &mut impl Destination) {
        let (mut undecodable, mut resyncs) = (0u64, 0u64);
        let Drain { raw, sample } = self;
        for (ring, kind) in events.rings.iter_mut().zip(&events.kinds) {
            let resynced = ring.drain(raw, |raw| {
                if parse::is_sample(raw) {
                    if !parse::decode_sample_into(raw, kind.layout, sample) {
                        undecodable += 1;
                        return;
                    }
                    let s = std::mem::take(sample);
                    // Samples of a secondary event (blocking stacks) are told apart by their
                    // ring.
                    let r = if kind.event != 0 {
                        Record::EventSample(EventSample {
                            event: kind.event,
                            sample: s,
                        })
                    } else {
                        Record::Sample(s)
                    };
                    out.sample(&r);
                    *sample = match r {
                        Record::Sample(s) => s,
                        Record::EventSample(e) => e.sample,
                        _ => Sample::default(),
                    };
                    return;
                }
                match parse::decode(raw, kind.layout) {
                    Some(r) => out.record(r),
                    None if parse::is_handled(raw) => undecodable += 1,
                    None => {}
                }
            });
            resyncs += u64::from(resynced);
        }
        out.lost("undecodable", undecodable);
        out.lost("resync", resyncs);
    }
}

/// Sleeps until a ring reaches its wake-up watermark, the heap interposers' socket has
/// something, a signal comes, or `timeout_ms` passes.
pub fn wait_readable(events: &Events, heap: Option<&Heap>, timeout_ms: i32) {
    let mut fds: Vec<libc::pollfd> = events.fds[..events.rings.len()]
        .iter()
        .map(|fd| fd.as_raw_fd())
        .chain(heap.map(|h| h.fd()))
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: fds is a valid array of pollfd of the given length. EINTR (a signal) is fine.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
}
