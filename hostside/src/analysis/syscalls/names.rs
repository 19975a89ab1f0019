//! System call and errno names, from the numbers the board recorded.
//!
//! Call numbers differ per architecture (x86_64's `getpid` is 39, aarch64's and riscv64's
//! 172, arm's and i386's 20): the recording's architecture picks the table. The tables come
//! from the `syscalls` crate, generated from the kernel's own lists: on `arm` the EABI numbers
//! (the only ABI rec runs on), on `x86` the i386 ones. Errno numbers are the same on every
//! architecture crossprof records (they differ only on alpha, mips, parisc and sparc).

use crossprof_format::Arch;

/// The highest errno a system call returns: -4095..=-1 are errors (the kernel's
/// `MAX_ERRNO`), every other value a result.
pub const MAX_ERRNO: i64 = 4095;

/// The name of system call `nr` on `arch`, or `syscall_<nr>` for a number the table does not
/// know (a newer kernel's call, an architecture-private one, a damaged record).
pub fn syscall_name(arch: Arch, nr: i64) -> String {
    let known = usize::try_from(nr).ok().and_then(|n| match arch {
        Arch::X86_64 => syscalls::x86_64::Sysno::new(n).map(|s| s.name()),
        Arch::Aarch64 => syscalls::aarch64::Sysno::new(n).map(|s| s.name()),
        Arch::Arm => syscalls::arm::Sysno::new(n).map(|s| s.name()),
        Arch::X86 => syscalls::x86::Sysno::new(n).map(|s| s.name()),
        Arch::Riscv64 => syscalls::riscv64::Sysno::new(n).map(|s| s.name()),
    });
    match known {
        Some(name) => name.to_string(),
        None => format!("syscall_{nr}"),
    }
}

/// The errno a return value stands for, when it is an error.
pub fn errno_of(ret: i64) -> Option<i32> {
    (-MAX_ERRNO..=-1).contains(&ret).then(|| (-ret) as i32)
}

/// The symbolic name of `errno` (`EBADF`), or `errno_<n>` for one without a name.
pub fn errno_name(errno: i32) -> String {
    match syscalls::Errno::new(errno).name() {
        Some(name) => name.to_string(),
        None => format!("errno_{errno}"),
    }
}
