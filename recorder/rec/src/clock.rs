//! The clocks a recording's times are read from: CLOCK_MONOTONIC for every event (the clock
//! the perf events are told to use, so that rec's own records sort among the kernel's) and
//! CLOCK_REALTIME once, for the header's wall-clock start.

/// Nanoseconds on CLOCK_MONOTONIC, the clock the events are told to use.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Nanoseconds since the Unix epoch (CLOCK_REALTIME).
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    // SAFETY: ts is a valid timespec for clock_gettime to fill.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
