//! What a thread was doing when `rec --snapshot` stopped it: the scheduler's state, the wait
//! channel and the kernel stack, read from /proc before the stop (a stopped thread reads as
//! "traced"). Its user stack is the [`crate::Sample`] of the same thread and time.

use crate::codec::{Dec, DecodeError, Enc};

/// One thread of one snapshot. Readers pair it with the ordinary sample of the same `tid` and
/// `time`, which carries the registers and the stack copy taken while the thread was stopped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ThreadState {
    /// Time on the header's clock, nanoseconds: the same as the thread's sample.
    pub time: u64,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Which snapshot of the recording, from 0 (`--count`).
    pub index: u32,
    /// The state letter of /proc/PID/task/TID/stat: `R` running, `S` sleeping, `D`
    /// uninterruptible, `T` stopped, `t` traced, `Z` zombie...
    pub state: String,
    /// The kernel function the thread sleeps in (/proc/.../wchan), empty when running or
    /// unreadable.
    pub wchan: String,
    /// The kernel stack, innermost first, as function names (/proc/.../stack: root only, and
    /// the kernel hides the addresses); empty when unreadable.
    pub kernel_stack: Vec<String>,
    /// How long the process was stopped for this snapshot, nanoseconds.
    pub stopped_ns: u64,
    /// Whether the thread was stopped and its user stack copied (a sample exists).
    pub captured: bool,
}

impl ThreadState {
    pub(super) fn encode(&self, e: &mut Enc<'_>) {
        e.u64(self.time);
        e.u64(self.pid.into());
        e.u64(self.tid.into());
        e.u64(self.index.into());
        e.str(&self.state);
        e.str(&self.wchan);
        e.strs(&self.kernel_stack);
        e.u64(self.stopped_ns);
        e.bool(self.captured);
    }

    pub(super) fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(ThreadState {
            time: d.u64()?,
            pid: d.u32()?,
            tid: d.u32()?,
            index: d.u32()?,
            state: d.string()?,
            wchan: d.string()?,
            kernel_stack: d.strs()?,
            stopped_ns: d.u64()?,
            captured: d.bool()?,
        })
    }
}
