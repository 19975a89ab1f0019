//! Aggregations over a recording: what the reports and exports are computed from. Each takes
//! decoded records or samples as the pipeline's passes hand them over (see
//! [`crate::pipeline`]) and never reads the file itself.

pub mod cpu;
pub mod diff;
pub mod events;
pub mod function_table;
pub mod heap;
pub mod latency;
pub mod off_cpu;
pub mod off_cpu_diff;
pub mod off_cpu_profile;
pub mod significance;
pub mod snapshot;
pub mod stack_usage;
pub mod syscalls;
pub mod thread_timeline;
pub mod wakers;
