//! The events `rec -e` samples, by the names DESIGN.md lists, and how each is opened.
//!
//! Clock events are sampled at `--freq`; fault and context-switch events count every event
//! (period 1), so a report's counts are the program's counts, and fault samples carry the
//! faulting data address. Hardware events need a PMU, which many boards and VMs lack.

use super::attr;

/// `PERF_TYPE_HARDWARE`.
const TYPE_HARDWARE: u32 = 0;

/// One sampleable event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `cpu-clock`: a timer per thread (the default; works without a PMU).
    CpuClock,
    /// `task-clock`: like cpu-clock, counting the task's own time.
    TaskClock,
    /// `page-faults`: every page fault.
    PageFaults,
    /// `minor-faults`: faults served without I/O.
    MinorFaults,
    /// `major-faults`: faults that read from disk.
    MajorFaults,
    /// `context-switches`: every switch away from a CPU (needs kernel profiling rights).
    ContextSwitches,
    /// `cycles` (hardware).
    Cycles,
    /// `instructions` (hardware).
    Instructions,
    /// `cache-misses` (hardware).
    CacheMisses,
    /// `branch-misses` (hardware).
    BranchMisses,
}

impl Kind {
    /// Every event, in the order `rec --help` lists them.
    pub const ALL: [Kind; 10] = [
        Kind::CpuClock,
        Kind::TaskClock,
        Kind::PageFaults,
        Kind::MinorFaults,
        Kind::MajorFaults,
        Kind::ContextSwitches,
        Kind::Cycles,
        Kind::Instructions,
        Kind::CacheMisses,
        Kind::BranchMisses,
    ];

    /// The event's name on the command line and in the recording's header.
    pub fn name(self) -> &'static str {
        match self {
            Kind::CpuClock => "cpu-clock",
            Kind::TaskClock => "task-clock",
            Kind::PageFaults => "page-faults",
            Kind::MinorFaults => "minor-faults",
            Kind::MajorFaults => "major-faults",
            Kind::ContextSwitches => "context-switches",
            Kind::Cycles => "cycles",
            Kind::Instructions => "instructions",
            Kind::CacheMisses => "cache-misses",
            Kind::BranchMisses => "branch-misses",
        }
    }

    /// Parses one name (`faults` is perf's alias of `page-faults`, `cs` of
    /// `context-switches`).
    pub fn parse(name: &str) -> Result<Kind, String> {
        let alias = match name {
            "faults" => "page-faults",
            "cs" => "context-switches",
            other => other,
        };
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == alias)
            .ok_or_else(|| {
                let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
                format!("-e {name}: unknown event (use {})", names.join(", "))
            })
    }

    /// `perf_event_attr` type and config.
    pub fn type_config(self) -> (u32, u64) {
        let sw = |c| (attr::TYPE_SOFTWARE, c);
        match self {
            Kind::CpuClock => sw(attr::SW_CPU_CLOCK),
            Kind::TaskClock => sw(1),
            Kind::PageFaults => sw(2),
            Kind::ContextSwitches => sw(attr::SW_CONTEXT_SWITCHES),
            Kind::MinorFaults => sw(5),
            Kind::MajorFaults => sw(6),
            Kind::Cycles => (TYPE_HARDWARE, 0),
            Kind::Instructions => (TYPE_HARDWARE, 1),
            Kind::CacheMisses => (TYPE_HARDWARE, 3),
            Kind::BranchMisses => (TYPE_HARDWARE, 5),
        }
    }

    /// Fault events: their samples carry the faulting address.
    pub fn is_fault(self) -> bool {
        matches!(
            self,
            Kind::PageFaults | Kind::MinorFaults | Kind::MajorFaults
        )
    }

    /// Hardware (PMU) events.
    pub fn is_hardware(self) -> bool {
        self.type_config().0 == TYPE_HARDWARE
    }

    /// Whether every event is sampled (period 1) rather than a frequency.
    pub fn every_event(self) -> bool {
        self.is_fault() || self == Kind::ContextSwitches
    }
}

/// Parses `-e`'s comma-separated list: at least one event, none twice.
pub fn parse_list(list: &str) -> Result<Vec<Kind>, String> {
    let mut kinds = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let k = Kind::parse(name)?;
        if kinds.contains(&k) {
            return Err(format!("-e {list}: {} is listed twice", k.name()));
        }
        kinds.push(k);
    }
    if kinds.is_empty() {
        return Err("-e needs at least one event (e.g. -e cpu-clock,minor-faults)".into());
    }
    Ok(kinds)
}

/// How the samples of `kind` are laid out with this call-graph mode.
pub fn layout(kind: Kind, call_graph: super::call_graph::CallGraph) -> super::parse::Layout {
    super::parse::Layout {
        regs_mask: match call_graph {
            super::call_graph::CallGraph::Fp => 0,
            super::call_graph::CallGraph::Dwarf(_) => super::regs::USER_MASK,
        },
        stack: matches!(call_graph, super::call_graph::CallGraph::Dwarf(_)),
        addr: kind.is_fault(),
        raw: None,
        no_callchain: false,
    }
}

/// A secondary sampling event (every event but the first of `-e`, and `--off-cpu`'s
/// blocking stacks): no side-band records (the main event reports maps, names and tasks),
/// the main event's sample fields, a stack copy of `stack_bytes` in `dwarf` mode.
pub struct Secondary {
    /// The event.
    pub kind: Kind,
    /// Samples per second for clock and hardware events.
    pub freq: u32,
    /// Call-graph mode.
    pub call_graph: super::call_graph::CallGraph,
    /// Stack copy size in `dwarf` mode.
    pub stack_bytes: u32,
    /// Enabled at the launched command's exec.
    pub on_exec: bool,
    /// Kernel frames allowed.
    pub kernel: bool,
    /// Ring size, for the wake-up watermark.
    pub ring_bytes: usize,
    /// Sample this tracepoint instead of `kind` (who woke whom, system calls: `kind` then
    /// only says how the samples are taken, at every event).
    pub tracepoint: Option<super::tracepoint::Tracepoint>,
    /// Samples carry only their time, thread, CPU and the tracepoint's field: no call chain,
    /// registers or stack (a system call's exit, whose stack is its entry's).
    pub stackless: bool,
    /// No kernel frames in the chain: the kernel's part is the same everywhere (a system
    /// call's entry path) and not worth its bytes.
    pub no_kernel_chain: bool,
}

impl Secondary {
    /// The event's name in the recording's header.
    pub fn name(&self) -> String {
        match &self.tracepoint {
            Some(tp) => tp.name.clone(),
            None => self.kind.name().to_string(),
        }
    }

    /// How its samples are laid out.
    pub fn layout(&self) -> super::parse::Layout {
        let mut l = layout(self.kind, self.call_graph);
        l.raw = self.tracepoint.as_ref().map(|tp| tp.field);
        if self.stackless {
            l.regs_mask = 0;
            l.stack = false;
            l.no_callchain = true;
        }
        l
    }

    /// The attribute to open it with.
    pub fn attr(&self) -> attr::PerfEventAttr {
        use attr::{flag, sample};
        let (type_, config) = self.kind.type_config();
        let mut flags = flag::INHERIT
            | flag::SAMPLE_ID_ALL
            | flag::USE_CLOCKID
            | flag::EXCLUDE_HV
            | flag::EXCLUDE_GUEST
            | flag::WATERMARK;
        if self.on_exec {
            flags |= flag::DISABLED | flag::ENABLE_ON_EXEC;
        }
        if !self.kernel {
            flags |= flag::EXCLUDE_KERNEL;
        }
        if !self.kind.every_event() {
            flags |= flag::FREQ;
        }
        let mut a = attr::PerfEventAttr {
            type_,
            size: attr::ATTR_SIZE,
            config,
            sample_period_or_freq: if self.kind.every_event() {
                1
            } else {
                self.freq.into()
            },
            sample_type: sample::IP
                | sample::TID
                | sample::TIME
                | sample::CPU
                | sample::PERIOD
                | sample::CALLCHAIN,
            flags,
            wakeup_watermark: (self.ring_bytes / 4) as u32,
            clockid: libc::CLOCK_MONOTONIC,
            ..Default::default()
        };
        if self.kind.is_fault() {
            a.sample_type |= sample::ADDR;
        }
        if self.no_kernel_chain {
            a.flags |= flag::EXCLUDE_CALLCHAIN_KERNEL;
        }
        if self.stackless {
            a.sample_type &= !sample::CALLCHAIN;
        } else if let super::call_graph::CallGraph::Dwarf(_) = self.call_graph {
            a.sample_type |= sample::REGS_USER | sample::STACK_USER;
            a.sample_regs_user = super::regs::USER_MASK;
            a.sample_stack_user = self.stack_bytes;
            a.flags |= flag::EXCLUDE_CALLCHAIN_USER;
        }
        match &self.tracepoint {
            Some(tp) => super::tracepoint::attr(tp, a),
            None => a,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_lists_parse() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.name()), Ok(k));
        }
        assert_eq!(
            parse_list("cpu-clock, minor-faults").unwrap(),
            vec![Kind::CpuClock, Kind::MinorFaults]
        );
        assert_eq!(parse_list("faults").unwrap(), vec![Kind::PageFaults]);
        assert!(parse_list("cycles,cycles").is_err());
        assert!(parse_list("").is_err());
        assert!(parse_list("l1-dcache-loads")
            .unwrap_err()
            .contains("minor-faults"));
        assert!(Kind::MinorFaults.every_event() && Kind::MinorFaults.is_fault());
        assert!(!Kind::CpuClock.every_event() && Kind::Cycles.is_hardware());
        assert_eq!(Kind::MajorFaults.type_config(), (attr::TYPE_SOFTWARE, 6));
    }
}
