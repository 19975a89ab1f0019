//! Who woke whom (`--off-cpu`): the scheduler's `sched_waking` tracepoint (`sched_wakeup` on
//! kernels before 4.3, which lack it), sampled at every hit. The kernel fires it in the
//! waker's context, so the sample's thread, kernel chain and user stack are the waker's; the
//! woken thread's id comes from the tracepoint's own data (its `pid` field, found in the
//! event's `format` file) and is stored as the sample's `addr`.
//!
//! Tracepoints need tracefs (to learn the event's id and layout) and the right to read raw
//! tracepoint data (root or CAP_PERFMON; `perf_event_paranoid` -1 otherwise): where either is
//! missing, rec records no wakeups and `rec --check` says why. A wakeup from an interrupt
//! (a timer ending a sleep) names whatever ran on that CPU when the interrupt came: the
//! kernel chain shows the interrupt, and a waker outside the recorded processes is not seen.

use super::attr::PerfEventAttr;

/// Where tracefs is mounted, newest convention first.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
/// The tracepoints that fire in the waker's context, preferred first.
const EVENTS: [&str; 2] = ["sched_waking", "sched_wakeup"];
/// `PERF_TYPE_TRACEPOINT`.
const TYPE_TRACEPOINT: u32 = 2;
/// `PERF_SAMPLE_RAW`: the tracepoint's own data.
pub const SAMPLE_RAW: u64 = 1 << 10;

/// A wakeup tracepoint this kernel has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracepoint {
    /// Its name as the recording's header lists it (`sched:sched_waking`).
    pub name: String,
    /// Its id for `perf_event_open`.
    pub id: u64,
    /// Byte offset of the woken thread's id in the raw data.
    pub tid_offset: u16,
}

/// The woken thread's offset from an event's `format` file: the line
/// `field:pid_t pid;` followed by tab-separated `offset:24;`, `size:4;` and `signed:1;`.
pub fn pid_offset(format: &str) -> Option<u16> {
    let line = format
        .lines()
        .find(|l| l.trim_start().starts_with("field:pid_t pid;"))?;
    let mut offset = None;
    let mut size = None;
    for part in line.split(';') {
        let part = part.trim();
        if let Some(v) = part.strip_prefix("offset:") {
            offset = v.parse().ok();
        } else if let Some(v) = part.strip_prefix("size:") {
            size = v.parse::<u32>().ok();
        }
    }
    (size == Some(4)).then_some(offset?)
}

/// Finds the wakeup tracepoint, or says why there is none.
pub fn find() -> Result<Tracepoint, String> {
    let Some(root) = TRACEFS
        .into_iter()
        .find(|r| std::path::Path::new(r).join("events").is_dir())
    else {
        return Err("tracefs is not mounted or not readable for this user".into());
    };
    for event in EVENTS {
        let dir = format!("{root}/events/sched/{event}");
        let Ok(id) = std::fs::read_to_string(format!("{dir}/id")) else {
            continue;
        };
        let Ok(id) = id.trim().parse() else {
            continue;
        };
        let format = std::fs::read_to_string(format!("{dir}/format")).unwrap_or_default();
        let Some(tid_offset) = pid_offset(&format) else {
            return Err(format!("{dir}/format has no 4-byte pid field"));
        };
        return Ok(Tracepoint {
            name: format!("sched:{event}"),
            id,
            tid_offset,
        });
    }
    Err(format!(
        "{root}/events/sched/ has neither sched_waking nor sched_wakeup readable"
    ))
}

/// Turns a blocking-stack attribute (period 1, the waker's chain and stack copy) into one
/// that samples the tracepoint with its raw data.
pub fn attr(tp: &Tracepoint, mut a: PerfEventAttr) -> PerfEventAttr {
    a.type_ = TYPE_TRACEPOINT;
    a.config = tp.id;
    a.sample_type |= SAMPLE_RAW;
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_woken_threads_offset_comes_from_the_format_file() {
        // Linux 6.1's sched_waking format.
        let format = "name: sched_waking\nID: 316\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
            \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
            \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
            \tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
            \tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n\
            \tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;\n\
            \tfield:int target_cpu;\toffset:32;\tsize:4;\tsigned:1;\n";
        assert_eq!(pid_offset(format), Some(24));
        assert_eq!(
            pid_offset("field:int common_pid;\toffset:4;\tsize:4;"),
            None
        );
        assert_eq!(pid_offset("\tfield:pid_t pid;\toffset:24;\tsize:8;"), None);
        assert_eq!(pid_offset(""), None);
    }

    #[test]
    fn the_attribute_samples_the_tracepoint_with_its_data() {
        let tp = Tracepoint {
            name: "sched:sched_waking".into(),
            id: 316,
            tid_offset: 24,
        };
        let a = attr(&tp, PerfEventAttr::default());
        assert_eq!((a.type_, a.config), (2, 316));
        assert_ne!(a.sample_type & SAMPLE_RAW, 0);
    }
}
