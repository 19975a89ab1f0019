//! The CPU time a recorded program got, as the kernel accounted it. On a shared, loaded machine
//! a program gets whatever share of a CPU is left, so a test that needs some number of samples
//! records until the program has used that much CPU time, not for a fixed wall time, and judges
//! the sample count against that CPU time (cpu-clock samples a program's CPU time).

use std::path::Path;
use std::time::{Duration, Instant};

/// How long a test waits for a program to use the CPU time it asked for before it gives up: far
/// more than any load this suite runs under needs (at a load average of 10 on two cores a
/// program got a second of CPU in about 7 s).
const PATIENCE: Duration = Duration::from_secs(120);

/// CPU time (user + system) process `pid` has used so far, seconds (utime + stime of
/// /proc/PID/stat).
pub fn cpu_so_far(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // Fields after the command (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / hz
}

/// Waits until process `pid` has used `secs` seconds of CPU time more than it had at the call;
/// returns how much more it used (at least `secs`).
pub fn run_for_cpu(pid: u32, secs: f64) -> f64 {
    let from = cpu_so_far(pid);
    let started = Instant::now();
    loop {
        let used = cpu_so_far(pid) - from;
        if used >= secs {
            return used;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "process {pid} used only {used:.2} s of CPU in {PATIENCE:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until rec has written the header of the recording `out`: it does so right after its
/// events are open, which for `rec -a` is when they start counting.
pub fn wait_for_header(out: &Path) {
    let started = Instant::now();
    while std::fs::metadata(out).map_or(0, |m| m.len()) == 0 {
        assert!(started.elapsed() < PATIENCE, "rec never started");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits until rec records into `out`: its file holds the header's frame and the frame rec
/// flushes once its events are enabled (`-p`: after the /proc snapshot that follows the header)
/// and a launched program is let go.
pub fn wait_for_recording(out: &Path) {
    let started = Instant::now();
    loop {
        let bytes = std::fs::read(out).unwrap_or_default();
        if let Ok(mut r) = crossprof_format::Reader::new(&bytes) {
            while r.next_record().is_some() {}
            if r.summary().frames >= 2 {
                return;
            }
        }
        assert!(started.elapsed() < PATIENCE, "rec never started recording");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The processes process `parent`'s main thread started, from the kernel's own list (where
/// rec launches its program from).
pub fn children(parent: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// The process whose parent is `pid` (the program a rec launched), once it exists.
pub fn child_of(pid: u32) -> u32 {
    let started = Instant::now();
    loop {
        if let Some(&child) = children(pid).first() {
            return child;
        }
        assert!(started.elapsed() < PATIENCE, "{pid} started no process");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Kills process `pid` (SIGKILL) when dropped while the test panics: a program that runs until
/// it is killed must not outlive a wait of this module that failed. Held only while the
/// process is certainly alive and not reaped, so that its id is still its own.
pub struct KillOnPanic(pub u32);

impl Drop for KillOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // SAFETY: a signal to a process the test started and has not reaped.
            unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
        }
    }
}
