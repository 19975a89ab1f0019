//! The kernel's perf interface: the event attributes, ring buffers, record decoding, and the
//! choice of which events to open for a launched or attached target.

pub mod attr;
pub mod call_graph;
pub mod events;
pub mod kind;
pub mod off_cpu;
pub mod parse;
pub mod regs;
pub mod ring;
pub mod syscalls;
pub mod timers;
pub mod tracepoint;
pub mod wakeup;
