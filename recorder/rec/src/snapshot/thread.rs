//! What /proc says a thread is doing: its scheduler state, the kernel function it sleeps in
//! and its kernel stack. Read before the thread is stopped, since a stopped thread reads as
//! traced (`t`) in `ptrace_stop`.

use std::fs;

/// The state letter of a `/proc/PID/task/TID/stat` line: the first field after the command
/// name, whose parentheses may themselves hold spaces and parentheses.
pub fn parse_state(stat: &str) -> Option<String> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().next().map(str::to_string)
}

/// Function names of a `/proc/PID/task/TID/stack` text, innermost first: lines like
/// `[<0>] futex_wait_queue+0x60/0x90` (the kernel hides the addresses).
pub fn parse_kernel_stack(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let name = l.split_once("] ").map_or(l, |(_, n)| n).trim();
            let name = name.split('+').next().unwrap_or(name).trim();
            (!name.is_empty()).then(|| name.to_string())
        })
        .collect()
}

/// What /proc says one thread is doing; each field empty when unreadable.
pub struct Seen {
    /// The state letter.
    pub state: String,
    /// The wait channel.
    pub wchan: String,
    /// The kernel stack's function names, innermost first.
    pub kernel_stack: Vec<String>,
}

/// What thread `tid` of `pid` is doing.
pub fn read(pid: u32, tid: u32) -> Seen {
    let dir = format!("/proc/{pid}/task/{tid}");
    let state = fs::read_to_string(format!("{dir}/stat"))
        .ok()
        .and_then(|s| parse_state(&s))
        .unwrap_or_default();
    let wchan = fs::read_to_string(format!("{dir}/wchan"))
        .map(|w| w.trim().to_string())
        .ok()
        .filter(|w| !w.is_empty() && w != "0")
        .unwrap_or_default();
    let kernel_stack = fs::read_to_string(format!("{dir}/stack"))
        .map(|s| parse_kernel_stack(&s))
        .unwrap_or_default();
    Seen {
        state,
        wchan,
        kernel_stack,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_follows_the_last_parenthesis() {
        assert_eq!(
            parse_state("123 (a) b (c)) S 1 123 123 0 -1").as_deref(),
            Some("S")
        );
        assert_eq!(parse_state("garbage"), None);
    }

    #[test]
    fn kernel_stack_names() {
        let t = "[<0>] futex_wait_queue+0x60/0x90\n[<0>] do_futex+0x11d/0x1b0\n[<0>] entry_SYSCALL_64_after_hwframe+0x6e/0xd8\n";
        assert_eq!(
            parse_kernel_stack(t),
            [
                "futex_wait_queue",
                "do_futex",
                "entry_SYSCALL_64_after_hwframe"
            ]
        );
        assert!(parse_kernel_stack("").is_empty());
    }

    #[test]
    fn own_thread_reads_as_running() {
        let pid = std::process::id();
        // SAFETY: gettid takes no arguments and cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
        assert_eq!(read(pid, tid).state, "R");
    }
}
