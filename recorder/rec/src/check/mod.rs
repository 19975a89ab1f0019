//! `rec --check`: what this board allows and what to do about it, before a recording is
//! attempted: the kernel, whether perf events work, the settings that limit them, a hardware
//! PMU, tracefs, and the free space where the recording would go.
//!
//! Every probe is read-only: files under /proc and /sys, and perf events opened on rec itself
//! and closed at once. With a kernel configuration (see [`kconfig`]) each line also names
//! the `CONFIG_` options missing behind it ([`options`] is the list).

mod kconfig;
pub mod options;

use std::io::{self, Write};
use std::path::Path;

use kconfig::{Config, Found};
use options::{Capability, How};

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

/// Indent of the text after a line's name.
const INDENT: &str = "                     ";

/// After a capability's line: the options its kernel configuration lacks, or, with no
/// configuration, every option it needs when the probe (`works`) failed.
fn options_line(
    w: &mut dyn Write,
    config: &Option<Config>,
    capability: Capability,
    works: bool,
) -> io::Result<()> {
    let list = |rs: Vec<&options::Requirement>| {
        rs.iter()
            .map(|r| match r.how {
                How::Set => format!("CONFIG_{}=y", r.name),
                How::Selected(by) => format!("CONFIG_{} (selected by {by})", r.name),
                How::Arch => format!("CONFIG_{} (the architecture's; no option gives it)", r.name),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    match config {
        Some(c) => {
            let missing = c.missing(capability);
            if !missing.is_empty() {
                writeln!(
                    w,
                    "{INDENT}missing from the kernel configuration: {}",
                    list(missing)
                )?;
            }
        }
        None if !works => {
            let needed = options::of(capability)
                .filter(|r| r.arches.is_empty())
                .collect();
            writeln!(
                w,
                "{INDENT}the kernel needs {} (no kernel configuration says which is missing)",
                list(needed)
            )?;
        }
        None => {}
    }
    Ok(())
}

/// Writes the report for a recording that would go to `out`, naming missing kernel options
/// from `kernel_config` or the running kernel's configuration.
pub fn report(w: &mut dyn Write, out: &Path, kernel_config: Option<&Path>) -> io::Result<()> {
    let (release, host) = procfs::uname();
    let found = kconfig::find(kernel_config, &release);
    if let Err(Found::Unreadable(why)) = found {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("--kernel-config {why}"),
        ));
    }
    writeln!(w, "kernel               {release} on {host}")?;
    let proc_config = Path::new("/proc/config.gz").exists();
    let config = match found {
        Ok(c) => {
            writeln!(w, "kernel config        {}", c.source)?;
            Some(c)
        }
        Err(Found::Unreadable(_)) => None,
        Err(Found::Nothing(tried)) => {
            writeln!(
                w,
                "kernel config        none readable ({tried}): missing kernel options \
                 cannot be named; copy the build's .config here and give it with \
                 --kernel-config FILE"
            )?;
            None
        }
    };
    options_line(w, &config, Capability::KernelConfig, proc_config)?;
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
    let perf = probe(Kind::CpuClock);
    match &perf {
        Ok(()) => writeln!(w, "perf events          yes (cpu-clock opens)")?,
        Err(e) => writeln!(
            w,
            "perf events          NO ({e}): rec cannot sample here (rec --heap --no-cpu still works)"
        )?,
    }
    options_line(w, &config, Capability::PerfEvents, perf.is_ok())?;
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
    let kallsyms = Path::new("/proc/kallsyms").exists();
    writeln!(
        w,
        "kernel symbols       {}",
        if kallsyms {
            "/proc/kallsyms: kernel frames can be named"
        } else {
            "no /proc/kallsyms: kernel frames stay addresses"
        }
    )?;
    options_line(w, &config, Capability::KernelSymbols, kallsyms)?;
    let pmu = probe(Kind::Cycles);
    match &pmu {
        Ok(()) => writeln!(
            w,
            "hardware PMU         yes: -e cycles, instructions, cache-misses, branch-misses"
        )?,
        Err(e) => writeln!(
            w,
            "hardware PMU         none ({e}): use -e cpu-clock or task-clock"
        )?,
    }
    options_line(w, &config, Capability::HardwarePmu, pmu.is_ok())?;
    if let Some(c) = &config {
        let stacks = if c.missing(Capability::UserStacks).is_empty() {
            "yes: the kernel copies registers and stack (--call-graph dwarf)"
        } else {
            "no: this kernel cannot copy user stacks, use --call-graph fp"
        };
        writeln!(w, "user stacks          {stacks}")?;
        options_line(w, &config, Capability::UserStacks, true)?;
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
    options_line(w, &config, Capability::Tracepoints, tracefs.is_some())?;
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
    let syscalls = syscalls();
    match &syscalls {
        Ok(_) => writeln!(
            w,
            "system calls         yes (raw_syscalls): -e syscalls records each call"
        )?,
        Err(why) => writeln!(
            w,
            "system calls         no: {why}; -e syscalls cannot record"
        )?,
    }
    options_line(w, &config, Capability::Syscalls, syscalls.is_ok())?;
    // Root only; it exists for every process when the kernel has it.
    let stacks = Path::new("/proc/self/stack").exists();
    writeln!(
        w,
        "kernel stacks        {}",
        if stacks {
            "/proc/PID/stack (root only): rec --snapshot shows each thread's kernel stack"
        } else {
            "no /proc/PID/stack: rec --snapshot shows user stacks only"
        }
    )?;
    options_line(w, &config, Capability::KernelStacks, stacks)?;
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
    // One line for scripts: every missing option, as the fragments spell them.
    match &config {
        Some(c) => {
            let missing = c.all_missing();
            let names: Vec<String> = missing.iter().map(|n| format!("CONFIG_{n}")).collect();
            writeln!(
                w,
                "missing options      {}",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(" ")
                }
            )?;
        }
        None => writeln!(
            w,
            "missing options      unknown (no kernel configuration; rec --print-kernel-options lists what rec uses)"
        )?,
    }
    Ok(())
}
