//! The recording's header: what a reader must know before the first record (the board's
//! architecture, word size and page size, the clock, the events and how stacks were taken)
//! and what a person wants to see (command, host, kernel, rec's version).

use crossprof_format::{Arch, Header, FORMAT_VERSION};

use crate::cli::{Options, Target};
use crate::clock::{monotonic_ns, realtime_ns};
use crate::perf::events::Events;
use crate::procfs;

/// The header of a recording made as `opts` say with `events`; `kernel` is whether the
/// events sample kernel stacks too.
pub(super) fn header(opts: &Options, kernel: bool, events: &Events) -> Header {
    let blocking_stacks = events.blocking_stacks;
    let (kernel_release, hostname) = procfs::uname();
    let arch = Arch::native();
    let main_event = events
        .names
        .first()
        .cloned()
        .unwrap_or_else(|| "none".into());
    let command = match &opts.target {
        Target::Launch(c) => c.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
        Target::Attach(pid) => vec!["-p".into(), pid.to_string()],
        Target::System => vec!["-a".into()],
    };
    Header {
        format_version: FORMAT_VERSION,
        arch: arch.map_or("unknown", |a| a.name()).into(),
        big_endian: cfg!(target_endian = "big"),
        pointer_size: std::mem::size_of::<usize>() as u8,
        page_size: procfs::page_size() as u32,
        kernel_release,
        hostname,
        command,
        clock: "monotonic".into(),
        start_unix_ns: realtime_ns(),
        start_clock_ns: monotonic_ns(),
        sample_freq: if opts.cpu { opts.freq } else { 0 },
        call_graph: if kernel {
            opts.call_graph.name()
        } else {
            format!("{} (user only)", opts.call_graph.name())
        },
        rec_version: env!("CARGO_PKG_VERSION").into(),
        event: main_event,
        events: events.names.clone(),
        off_cpu: match (opts.off_cpu, blocking_stacks) {
            (false, _) => "",
            (true, true) => "exact",
            (true, false) => "approximate",
        }
        .into(),
        heap_sample_bytes: opts.heap_sample.unwrap_or(0),
        // The ARMv7 interposer (the one shipped with this rec: the ring's magic pins its
        // version) records sparse stacks for the host to unwind.
        heap_stacks: if opts.heap && cfg!(target_arch = "arm") {
            crossprof_format::HEAP_STACKS_ARM_SPARSE.into()
        } else {
            String::new()
        },
        // Segment 0; later segments of `--max-size` number themselves.
        ..Default::default()
    }
}
