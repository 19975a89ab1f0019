//! Aggregations over a recording: what the reports and exports are computed from.

pub mod cpu;
pub mod diff;
pub mod events;
pub mod heap;
pub mod off_cpu;
pub mod off_cpu_profile;
pub mod thread_timeline;
pub mod wakers;

use crossprof_format::Arch;

use crate::filter::Window;
use crate::processes::Processes;
use crate::recording::Recording;
use crate::resolve::Resolver;

/// What the analyses of stacks beyond the CPU samples' read: the recording, with what its
/// metadata pass built (tasks and mappings, the resolver, the window, and the events the
/// off-CPU and `--event` analyses keep from that pass). The pipeline makes it
/// (`Loaded::input`); the analyses do not reach back into the pipeline.
pub struct Input<'a> {
    /// The file.
    pub recording: &'a Recording,
    /// Its target architecture.
    pub arch: Arch,
    /// Tasks and mappings.
    pub processes: &'a Processes,
    /// Module lookup and symbolization.
    pub resolver: &'a Resolver,
    /// The part of the recording analysed.
    pub window: &'a Window,
    /// Nanoseconds from the recording's start to its end.
    pub duration_ns: u64,
    /// Every mapping, data ones included (see [`events::DataMaps`]).
    pub data_maps: &'a events::DataMaps,
    /// The off-CPU analysis' events, when the metadata pass kept them.
    pub off_cpu_events: Option<&'a off_cpu_profile::OffCpuEvents>,
}
