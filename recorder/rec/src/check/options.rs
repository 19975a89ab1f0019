//! The kernel options behind each capability `rec --check` reports: the one list that
//! `--check` compares a kernel configuration with, that `rec --print-kernel-options` prints,
//! and that the Yocto layer's and the Buildroot package's configuration fragments must equal
//! (a test below reads both). Names and kinds checked against the Linux 6.1 Kconfig files.

/// How an option comes to be set, which decides what `--check` tells the user to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// A prompt in menuconfig: the fragments set it, the user can.
    Set,
    /// No prompt: another option selects it (the text names which).
    Selected(&'static str),
    /// Selected by the architecture's own Kconfig: no option gives it.
    Arch,
}

/// What rec can do on a board; each one is a line of `rec --check`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capability {
    /// perf_event_open at all: every recording but `--heap --no-cpu`.
    PerfEvents,
    /// `-e cycles,instructions,...`.
    HardwarePmu,
    /// DWARF-mode stacks: the kernel copies registers and the user stack into each sample.
    UserStacks,
    /// Tracepoints in tracefs: `--off-cpu` wakeups and sleep timers.
    Tracepoints,
    /// `-e syscalls`: the raw_syscalls tracepoints.
    Syscalls,
    /// Kernel frames named from /proc/kallsyms.
    KernelSymbols,
    /// `/proc/PID/stack`: kernel stacks in `rec --snapshot`.
    KernelStacks,
    /// `/proc/config.gz`: what this check reads.
    KernelConfig,
}

/// One kernel option a capability needs.
#[derive(Clone, Copy, Debug)]
pub struct Requirement {
    /// What needs it.
    pub capability: Capability,
    /// The option, without `CONFIG_`.
    pub name: &'static str,
    /// Whether a user sets it or something else does.
    pub how: How,
    /// The architecture symbols (`ARM64`, `X86`...) of the kernels it exists on; empty: all.
    /// Kept out of the fragments, which serve every architecture: setting an option that
    /// does not exist makes Yocto's configuration audit warn.
    pub arches: &'static [&'static str],
}

const fn req(capability: Capability, name: &'static str, how: How) -> Requirement {
    Requirement {
        capability,
        name,
        how,
        arches: &[],
    }
}

const TRACER: How = How::Selected("CONFIG_FTRACE_SYSCALLS or any tracer");

/// Every option rec needs, by capability, in the order `--check` reports them.
pub const REQUIREMENTS: &[Requirement] = &[
    req(Capability::PerfEvents, "PERF_EVENTS", How::Set),
    // cpu-clock samples come from an hrtimer: without high resolution timers they come at
    // the tick (HZ), not at --freq.
    req(Capability::PerfEvents, "HIGH_RES_TIMERS", How::Set),
    Requirement {
        arches: &["ARM", "ARM64"],
        ..req(Capability::HardwarePmu, "ARM_PMU", How::Set)
    },
    Requirement {
        arches: &["RISCV"],
        ..req(Capability::HardwarePmu, "RISCV_PMU_SBI", How::Set)
    },
    req(Capability::UserStacks, "HAVE_PERF_REGS", How::Arch),
    req(
        Capability::UserStacks,
        "HAVE_PERF_USER_STACK_DUMP",
        How::Arch,
    ),
    // Trace events (and tracefs itself) come with TRACING, which the tracers select; the
    // syscall tracer is the one -e syscalls needs anyway. DEBUG_FS is not needed: tracefs
    // mounts on /sys/kernel/tracing.
    req(Capability::Tracepoints, "FTRACE", How::Set),
    req(Capability::Tracepoints, "EVENT_TRACING", TRACER),
    req(Capability::Syscalls, "FTRACE", How::Set),
    req(Capability::Syscalls, "FTRACE_SYSCALLS", How::Set),
    req(Capability::Syscalls, "EVENT_TRACING", TRACER),
    req(Capability::Syscalls, "HAVE_SYSCALL_TRACEPOINTS", How::Arch),
    // Function symbols are enough: KALLSYMS_ALL (data symbols) is not needed.
    req(Capability::KernelSymbols, "KALLSYMS", How::Set),
    req(Capability::KernelStacks, "STACKTRACE", How::Set),
    req(Capability::KernelConfig, "IKCONFIG", How::Set),
    req(Capability::KernelConfig, "IKCONFIG_PROC", How::Set),
];

/// The options `capability` needs.
pub fn of(capability: Capability) -> impl Iterator<Item = &'static Requirement> {
    REQUIREMENTS
        .iter()
        .filter(move |r| r.capability == capability)
}

/// A kernel configuration fragment that gives rec everything (`rec --print-kernel-options`):
/// the options users set, once each, for every architecture; the architecture-specific
/// ones as comments. The layer's and the package's fragments are exactly this text.
pub fn fragment() -> String {
    let mut out = String::from(
        "# Kernel options for crossprof's rec: perf events, tracepoints, kernel\n\
         # symbols and stacks, /proc/config.gz (for rec --check).\n\
         # Written by rec --print-kernel-options; README.md has why each is needed.\n",
    );
    let mut seen: Vec<&str> = Vec::new();
    for r in REQUIREMENTS {
        if r.how != How::Set || seen.contains(&r.name) {
            continue;
        }
        seen.push(r.name);
        if r.arches.is_empty() {
            out.push_str(&format!("CONFIG_{}=y\n", r.name));
        } else {
            out.push_str(&format!(
                "# on {} kernels also (the default): CONFIG_{}=y\n",
                r.arches.join(", "),
                r.name
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fragments the Yocto layer and the Buildroot package ship.
    const SHIPPED: [(&str, &str); 2] = [
        (
            "yocto-layer/recipes-kernel/linux/files/crossprof.cfg",
            include_str!("../../../../yocto-layer/recipes-kernel/linux/files/crossprof.cfg"),
        ),
        (
            "buildroot-pkg/board/crossprof/linux.fragment",
            include_str!("../../../../buildroot-pkg/board/crossprof/linux.fragment"),
        ),
    ];

    #[test]
    fn shipped_fragments_are_the_printed_options() {
        for (path, text) in SHIPPED {
            assert_eq!(
                text,
                fragment(),
                "{path} differs from the list in recorder/rec/src/check/options.rs: \
                 regenerate it with `rec --print-kernel-options > {path}`"
            );
        }
    }

    #[test]
    fn fragments_enable_every_option_a_user_sets() {
        let f = fragment();
        for r in REQUIREMENTS {
            let line = format!("CONFIG_{}=y", r.name);
            let wanted = r.how == How::Set && r.arches.is_empty();
            assert_eq!(f.lines().any(|l| l == line), wanted, "{line}");
        }
    }

    #[test]
    fn selected_options_name_a_settable_selector() {
        for r in REQUIREMENTS {
            if let How::Selected(by) = r.how {
                let first = by.split_whitespace().next().unwrap_or("");
                let name = first.trim_start_matches("CONFIG_");
                assert!(
                    REQUIREMENTS
                        .iter()
                        .any(|s| s.name == name && s.how == How::Set),
                    "{} is selected by {by}, which the fragments do not set",
                    r.name
                );
            }
        }
    }
}
