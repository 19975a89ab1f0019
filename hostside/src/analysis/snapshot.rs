//! `rec --snapshot` recordings: each thread of each snapshot with what /proc said it was doing
//! and the user stack its sample unwound to. The samples themselves went through the CPU
//! profile like any stack-copy sample; this pairs each [`ThreadState`] with its sample by
//! thread and time.

use std::collections::HashMap;

use crossprof_format::ThreadState;

use crate::analysis::cpu::CpuProfile;

/// One thread in one snapshot.
pub struct ThreadSnapshot<'a> {
    /// What /proc said, and how long the stop took.
    pub state: &'a ThreadState,
    /// The thread's name.
    pub comm: String,
    /// Index into [`CpuProfile::stacks`] of its unwound user stack; `None` when the thread
    /// could not be stopped (or its sample lies outside a `--from/--to` window).
    pub stack: Option<u32>,
}

/// The threads of every snapshot, in snapshot order then as /proc listed them.
pub fn threads<'a>(states: &'a [ThreadState], cpu: &CpuProfile) -> Vec<ThreadSnapshot<'a>> {
    let mut by_sample: HashMap<(u64, u32), u32> = HashMap::new();
    for at in &cpu.timeline {
        if let Some(s) = cpu.stacks.get(at.stack as usize) {
            by_sample.insert((at.time, s.tid), at.stack);
        }
    }
    let comms: HashMap<u32, &str> = cpu
        .threads
        .iter()
        .map(|t| (t.tid, t.comm.as_str()))
        .collect();
    states
        .iter()
        .map(|state| ThreadSnapshot {
            state,
            comm: comms.get(&state.tid).copied().unwrap_or("").to_string(),
            stack: by_sample.get(&(state.time, state.tid)).copied(),
        })
        .collect()
}

/// A state letter of /proc's stat in words, as `ps` documents them.
pub fn state_name(letter: &str) -> &'static str {
    match letter {
        "R" => "running",
        "S" => "sleeping",
        "D" => "uninterruptible wait",
        "T" => "stopped",
        "t" => "traced",
        "Z" => "zombie",
        "X" => "dead",
        "I" => "idle",
        "P" => "parked",
        "W" => "waking",
        _ => "unknown",
    }
}
