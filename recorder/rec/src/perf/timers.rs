//! Sleep timers (`--off-cpu` with wakeups): the `timer:hrtimer_start` tracepoint, sampled with
//! only its time, thread and the timer's `softexpires` (when it is due, on the monotonic clock
//! the samples are stamped with). A thread that sleeps until a time (`clock_nanosleep`,
//! `nanosleep`, a timed wait) arms such a timer just before it blocks; `hostside report
//! --latency` then measures its wakeup latency from when the timer was due, as cyclictest
//! does, so that a late timer interrupt counts too.
//!
//! Only sleep timers are wanted: the tracepoint also fires for timers the kernel starts while
//! the thread is current but that are not its sleep (Linux 6.18's deadline server starts its
//! `dl_task_timer` there: 7 of 572 starts under cyclictest), and the host would take such a
//! timer for the sleep's. Every sleep's timer runs `hrtimer_wakeup` (an `hrtimer_sleeper`:
//! nanosleep, timed futex waits, poll and epoll timeouts), so the event carries a kernel filter
//! on the tracepoint's `function` field, a number in every kernel's filter syntax, with that
//! function's address from `/proc/kallsyms`. Where kallsyms hides addresses (they read as 0,
//! `kptr_restrict`) or the kernel refuses the filter, every start is recorded as before and
//! the host's pairing may now and then take a foreign timer.

use std::io::BufRead;

use super::call_graph::CallGraph;
use super::kind::Secondary;
use super::off_cpu;
use super::tracepoint;

/// The event's name in the recording's header.
pub const NAME: &str = "timer:hrtimer_start";

/// The function every sleep's timer runs.
const SLEEP_FUNCTION: &str = "hrtimer_wakeup";

/// The timer event, or why this kernel cannot give it; filtered to sleep timers where the
/// kernel shows `hrtimer_wakeup`'s address.
pub fn event(on_exec: bool, page_size: usize) -> Result<Secondary, String> {
    let mut tp = tracepoint::find("timer", "hrtimer_start", "softexpires")?;
    debug_assert_eq!(tp.name, NAME);
    let has_function = tracepoint::find_field("timer", "hrtimer_start", "function").is_some();
    if has_function {
        tp.filter = kallsyms_address(SLEEP_FUNCTION).map(filter);
    }
    Ok(Secondary {
        tracepoint: Some(tp),
        stackless: true,
        ..off_cpu::secondary(CallGraph::Fp, 0, on_exec, page_size)
    })
}

/// The filter that keeps the starts of timers running the function at `address`.
fn filter(address: u64) -> String {
    format!("function == {address:#x}")
}

/// The address of the kernel text symbol `name` in `/proc/kallsyms`; `None` when it is not
/// there or hidden (shown as 0).
fn kallsyms_address(name: &str) -> Option<u64> {
    let f = std::fs::File::open("/proc/kallsyms").ok()?;
    let lines = std::io::BufReader::new(f).lines().map_while(Result::ok);
    find_symbol(lines, name)
}

/// The address of the text symbol `name` in kallsyms lines (`ADDRESS TYPE NAME [MODULE]`).
fn find_symbol(lines: impl Iterator<Item = String>, name: &str) -> Option<u64> {
    for line in lines {
        let mut w = line.split_ascii_whitespace();
        let (Some(address), Some(kind), Some(symbol)) = (w.next(), w.next(), w.next()) else {
            continue;
        };
        if symbol == name && matches!(kind, "t" | "T") {
            return u64::from_str_radix(address, 16).ok().filter(|&a| a != 0);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> impl Iterator<Item = String> + '_ {
        text.lines().map(String::from)
    }

    #[test]
    fn the_sleep_function_is_found_in_kallsyms_unless_hidden() {
        let text = "ffffffff813c7a00 t dl_task_timer\n\
                    ffffffff8141ff00 t __cfi_hrtimer_wakeup\n\
                    ffffffff814204b0 t hrtimer_wakeup\n\
                    ffffffffc0a01000 t hrtimer_wakeup_x\t[some_module]\n";
        assert_eq!(
            find_symbol(lines(text), "hrtimer_wakeup"),
            Some(0xffff_ffff_8142_04b0)
        );
        assert_eq!(find_symbol(lines(text), "nanosleep_timer"), None);
        // kptr_restrict: every address reads as 0.
        let hidden = "0000000000000000 t hrtimer_wakeup\n";
        assert_eq!(find_symbol(lines(hidden), "hrtimer_wakeup"), None);
        // A data symbol of that name is not the function.
        let data = "ffffffff82000000 d hrtimer_wakeup\n";
        assert_eq!(find_symbol(lines(data), "hrtimer_wakeup"), None);
        // 32-bit boards print 8 digits.
        let arm = "c01a2b3c t hrtimer_wakeup\n";
        assert_eq!(find_symbol(lines(arm), "hrtimer_wakeup"), Some(0xc01a_2b3c));
    }

    #[test]
    fn the_filter_compares_the_function_field_with_the_address() {
        assert_eq!(
            filter(0xffff_ffff_8142_04b0),
            "function == 0xffffffff814204b0"
        );
    }
}
