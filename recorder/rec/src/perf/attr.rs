//! `perf_event_attr` and the `perf_event_open` system call.
//!
//! Written by hand rather than taken from `perf-event-open-sys`: that crate has no bindings for
//! 32-bit ARM, one of the boards `rec` must run on. The structure's layout is the same on every
//! architecture (only fixed-size fields, explicitly padded), so one definition serves all.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// `PERF_TYPE_SOFTWARE`.
pub const TYPE_SOFTWARE: u32 = 1;
/// `PERF_COUNT_SW_CPU_CLOCK`: a timer-driven event that works without a hardware PMU (VMs,
/// many ARM boards whose PMU interrupt is not wired up).
pub const SW_CPU_CLOCK: u64 = 0;
/// `PERF_COUNT_SW_CONTEXT_SWITCHES`: fires as a thread leaves its CPU, in the scheduler;
/// sampled with period 1 its user registers and stack copy are where the thread blocked.
/// The kernel drops its samples for `exclude_kernel` events, so it needs kernel profiling
/// rights (`perf_event_paranoid` at most 1, or CAP_PERFMON).
pub const SW_CONTEXT_SWITCHES: u64 = 3;
/// `PERF_COUNT_SW_DUMMY`: never fires; carries MMAP2/COMM/FORK/EXIT side-band records when
/// CPU sampling is off (`rec --heap --no-cpu`).
pub const SW_DUMMY: u64 = 9;

/// `PERF_SAMPLE_*` bits.
pub mod sample {
    /// Instruction pointer.
    pub const IP: u64 = 1 << 0;
    /// pid and tid.
    pub const TID: u64 = 1 << 1;
    /// Timestamp.
    pub const TIME: u64 = 1 << 2;
    /// The data address (the faulting address of fault events).
    pub const ADDR: u64 = 1 << 3;
    /// Call chain.
    pub const CALLCHAIN: u64 = 1 << 5;
    /// CPU number.
    pub const CPU: u64 = 1 << 7;
    /// User registers (`sample_regs_user`).
    pub const REGS_USER: u64 = 1 << 12;
    /// A copy of the user stack (`sample_stack_user` bytes).
    pub const STACK_USER: u64 = 1 << 13;
    /// Sampling period.
    pub const PERIOD: u64 = 1 << 8;
    /// A tracepoint's own data.
    pub const RAW: u64 = 1 << 10;
}

/// Bits of the attr's flag word (the C bit-field), by position.
pub mod flag {
    /// Start disabled.
    pub const DISABLED: u64 = 1 << 0;
    /// Children (threads and processes) inherit the event.
    pub const INHERIT: u64 = 1 << 1;
    /// Do not count kernel mode.
    pub const EXCLUDE_KERNEL: u64 = 1 << 5;
    /// Do not count the hypervisor.
    pub const EXCLUDE_HV: u64 = 1 << 6;
    /// Emit MMAP records for executable mappings.
    pub const MMAP: u64 = 1 << 8;
    /// Emit COMM records.
    pub const COMM: u64 = 1 << 9;
    /// `sample_freq` is a frequency, not a period.
    pub const FREQ: u64 = 1 << 10;
    /// Enable when the task execs.
    pub const ENABLE_ON_EXEC: u64 = 1 << 12;
    /// Emit FORK and EXIT records.
    pub const TASK: u64 = 1 << 13;
    /// Wake up by byte watermark rather than event count.
    pub const WATERMARK: u64 = 1 << 14;
    /// Emit MMAP records for data (non-executable) mappings too.
    pub const MMAP_DATA: u64 = 1 << 17;
    /// Append pid/tid/time/cpu to every non-sample record.
    pub const SAMPLE_ID_ALL: u64 = 1 << 18;
    /// Do not count in guests.
    pub const EXCLUDE_GUEST: u64 = 1 << 20;
    /// Leave user frames out of the kernel's call chain (the host unwinds the stack copy).
    pub const EXCLUDE_CALLCHAIN_USER: u64 = 1 << 22;
    /// No kernel frames in the call chain.
    pub const EXCLUDE_CALLCHAIN_KERNEL: u64 = 1 << 21;
    /// MMAP2 records (with protection bits and inode or build-id).
    pub const MMAP2: u64 = 1 << 23;
    /// Flag COMM records that come from exec.
    pub const COMM_EXEC: u64 = 1 << 24;
    /// Timestamps from `clockid` instead of the perf clock.
    pub const USE_CLOCKID: u64 = 1 << 25;
    /// Emit SWITCH records as the task leaves and enters a CPU (Linux 4.3+; needs no
    /// privilege for a task's own events).
    pub const CONTEXT_SWITCH: u64 = 1 << 26;
    /// MMAP2 records carry the build-id instead of the inode (Linux 5.12+).
    pub const BUILD_ID: u64 = 1 << 34;
}

/// `struct perf_event_attr` up to `sig_data` (`PERF_ATTR_SIZE_VER7`, 128 bytes). Kernels older
/// than the size accept it as long as the fields they do not know are zero.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct PerfEventAttr {
    /// Event type (`PERF_TYPE_*`).
    pub type_: u32,
    /// Size of this structure.
    pub size: u32,
    /// Event config within the type.
    pub config: u64,
    /// Sampling period or frequency (see [`flag::FREQ`]).
    pub sample_period_or_freq: u64,
    /// What each sample holds ([`sample`] bits).
    pub sample_type: u64,
    /// Format of `read()` results (unused).
    pub read_format: u64,
    /// The C bit-field ([`flag`] bits).
    pub flags: u64,
    /// Wake-up watermark in bytes (with [`flag::WATERMARK`]).
    pub wakeup_watermark: u32,
    /// Breakpoint type (unused).
    pub bp_type: u32,
    /// config1 (unused).
    pub config1: u64,
    /// config2 (unused).
    pub config2: u64,
    /// Branch sample type (unused).
    pub branch_sample_type: u64,
    /// User registers to sample (DWARF unwinding).
    pub sample_regs_user: u64,
    /// Bytes of user stack to copy (DWARF unwinding).
    pub sample_stack_user: u32,
    /// Clock for timestamps (with [`flag::USE_CLOCKID`]).
    pub clockid: i32,
    /// Interrupt registers (unused).
    pub sample_regs_intr: u64,
    /// AUX watermark (unused).
    pub aux_watermark: u32,
    /// Maximum call-chain depth, 0 for the system default.
    pub sample_max_stack: u16,
    /// Reserved, zero.
    pub reserved2: u16,
    /// AUX sample size (unused).
    pub aux_sample_size: u32,
    /// Reserved, zero.
    pub reserved3: u32,
    /// Signal data (unused).
    pub sig_data: u64,
}

/// The size this crate passes to the kernel.
pub const ATTR_SIZE: u32 = std::mem::size_of::<PerfEventAttr>() as u32;
const _: () = assert!(ATTR_SIZE == 128);

/// `PERF_EVENT_IOC_ENABLE`: `_IO('$', 0)`, the same number on every architecture.
pub const IOC_ENABLE: u64 = 0x2400;
/// `PERF_EVENT_IOC_SET_OUTPUT`: `_IO('$', 5)`, redirects an event into another's ring buffer.
pub const IOC_SET_OUTPUT: u64 = 0x2405;

/// Opens one event for `pid` on `cpu` (either may be -1 as the syscall allows).
pub fn open(attr: &PerfEventAttr, pid: i32, cpu: i32) -> io::Result<OwnedFd> {
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
    // SAFETY: attr points to a valid, fully initialized structure of the size it declares.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const PerfEventAttr,
            pid,
            cpu,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Issues a perf ioctl that takes an integer argument.
pub fn ioctl(fd: &OwnedFd, request: u64, arg: libc::c_ulong) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: perf ioctls with integer arguments read nothing from our memory.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, arg) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
