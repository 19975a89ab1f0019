//! `rec --check`: what this board allows and what to do about it, before a recording is
//! attempted: the kernel, whether perf events work, the settings that limit them, a hardware
//! PMU, tracefs, and the free space where the recording would go.
//!
//! Every probe is read-only: files under /proc and /sys, and perf events opened on rec itself
//! and closed at once.

use std::io::{self, Write};
use std::path::Path;

use crate::perf::attr::{self, flag, PerfEventAttr};
use crate::perf::kind::Kind;
use crate::procfs;

/// Opens `kind` on rec itself (user space only), to see whether the kernel allows it.
fn probe(kind: Kind) -> io::Result<()> {
    let (type_, config) = kind.type_config();
    let a = PerfEventAttr {
        type_,
        size: attr::ATTR_SIZE,
        config,
        flags: flag::DISABLED | flag::EXCLUDE_KERNEL | flag::EXCLUDE_HV,
        ..Default::default()
    };
    attr::open(&a, 0, -1).map(drop)
}

/// Whether `--off-cpu` can record who woke whom here: the wakeup tracepoint found in tracefs
/// and opened on rec itself with its raw data.
fn wakeups() -> Result<String, String> {
    sampleable(crate::perf::wakeup::find()?)
}

/// Whether `-e syscalls` can record here: both system call tracepoints found, the entry
/// opened on rec itself.
fn syscalls() -> Result<String, String> {
    crate::perf::tracepoint::find("raw_syscalls", "sys_exit", "ret")?;
    sampleable(crate::perf::tracepoint::find(
        "raw_syscalls",
        "sys_enter",
        "id",
    )?)
}

/// Whether `tp` opens on rec itself with its raw data: its name, or why not.
fn sampleable(tp: crate::perf::tracepoint::Tracepoint) -> Result<String, String> {
    let a = crate::perf::tracepoint::attr(
        &tp,
        PerfEventAttr {
            size: attr::ATTR_SIZE,
            sample_period_or_freq: 1,
            flags: flag::DISABLED | flag::EXCLUDE_HV,
            ..Default::default()
        },
    );
    match attr::open(&a, 0, -1) {
        Ok(_) => Ok(tp.name),
        Err(e) => Err(format!(
            "{} is there but cannot be sampled ({e}): run rec as root or with CAP_PERFMON",
            tp.name
        )),
    }
}

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Free bytes for an unprivileged writer in the filesystem holding `dir`.
fn free_bytes(dir: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let mut c = dir.as_os_str().as_bytes().to_vec();
    c.push(0);
    // SAFETY: statvfs is plain data; c is NUL-terminated.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid path pointer and output struct.
    if unsafe { libc::statvfs(c.as_ptr() as *const libc::c_char, &mut s) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(s.f_bavail as u64 * s.f_frsize as u64)
}

/// Writes the report for a recording that would go to `out`.
pub fn report(w: &mut dyn Write, out: &Path) -> io::Result<()> {
    let (release, host) = procfs::uname();
    writeln!(w, "kernel               {release} on {host}")?;
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    writeln!(
        w,
        "user                 {}",
        if uid == 0 {
            "root (perf_event_paranoid does not apply)".to_string()
        } else {
            format!("uid {uid}")
        }
    )?;
    match probe(Kind::CpuClock) {
        Ok(()) => writeln!(w, "perf events          yes (cpu-clock opens)")?,
        Err(e) => writeln!(
            w,
            "perf events          NO ({e}): rec cannot sample here; the kernel needs CONFIG_PERF_EVENTS (rec --heap --no-cpu still works)"
        )?,
    }
    let paranoid = procfs::perf_event_paranoid();
    let what = match paranoid {
        Some(p) if p <= -1 => "everything allowed",
        Some(0) | Some(1) => "kernel frames and --off-cpu blocking stacks allowed",
        Some(2) => {
            "user-space samples of your own processes only: no kernel frames, --off-cpu stacks are approximate; `sysctl -w kernel.perf_event_paranoid=1` or run as root for more"
        }
        Some(_) => {
            "no perf events for unprivileged users (a distribution patch): run rec as root or `sysctl -w kernel.perf_event_paranoid=2`"
        }
        None => "unknown (no /proc/sys/kernel/perf_event_paranoid)",
    };
    let level = paranoid.map_or("?".to_string(), |p| p.to_string());
    writeln!(w, "perf_event_paranoid  {level}: {what}")?;
    let kptr = read_trim("/proc/sys/kernel/kptr_restrict");
    let what = match kptr.as_deref() {
        Some("0") => "kernel symbols readable: kernel frames are named",
        Some("1") if uid == 0 => "kernel symbols readable by root: kernel frames are named",
        Some(_) => {
            "kernel symbols hidden: kernel frames stay addresses (`sysctl -w kernel.kptr_restrict=0`)"
        }
        None => "unknown",
    };
    writeln!(
        w,
        "kptr_restrict        {}: {what}",
        kptr.as_deref().unwrap_or("?")
    )?;
    match probe(Kind::Cycles) {
        Ok(()) => writeln!(
            w,
            "hardware PMU         yes: -e cycles, instructions, cache-misses, branch-misses"
        )?,
        Err(e) => writeln!(
            w,
            "hardware PMU         none ({e}): use -e cpu-clock or task-clock"
        )?,
    }
    let tracefs = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .into_iter()
        .find(|p| Path::new(p).join("events").is_dir());
    writeln!(
        w,
        "tracefs              {}",
        tracefs.map_or(
            "not readable (not mounted, or not for this user: `mount -t tracefs nodev /sys/kernel/tracing`)".to_string(),
            |p| p.to_string()
        )
    )?;
    match wakeups() {
        Ok(name) => writeln!(
            w,
            "wakeups              yes ({name}): --off-cpu records who woke each thread"
        )?,
        Err(why) => writeln!(
            w,
            "wakeups              no: {why}; --off-cpu records waits without their wakers"
        )?,
    }
    match syscalls() {
        Ok(_) => writeln!(
            w,
            "system calls         yes (raw_syscalls): -e syscalls records each call"
        )?,
        Err(why) => writeln!(
            w,
            "system calls         no: {why}; -e syscalls cannot record"
        )?,
    }
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    match free_bytes(&dir) {
        Ok(b) => writeln!(
            w,
            "free space           {:.1} MB in {} (where --out {} goes)",
            b as f64 / 1e6,
            dir.display(),
            out.display()
        )?,
        Err(e) => writeln!(
            w,
            "free space           unknown for {} ({e})",
            dir.display()
        )?,
    }
    Ok(())
}
