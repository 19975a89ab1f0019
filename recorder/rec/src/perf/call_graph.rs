//! How user call stacks are captured (`--call-graph`): the perf layer's choice, which the
//! command line parses and the header names.

use super::kind::Kind;

/// How user call stacks are captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallGraph {
    /// Frame-pointer chains walked by the kernel.
    Fp,
    /// Registers plus a copy of this many bytes of user stack, unwound on the host.
    Dwarf(u32),
}

impl CallGraph {
    /// The largest stack copy the kernel accepts (`sample_stack_user` must fit in a u16
    /// record size with the rest of the sample, and be a multiple of 8).
    pub const MAX_STACK: u32 = 65528;
    /// The stack copy `dwarf` takes when no size is given: four times perf's 8 KiB, chosen
    /// by measurement on real programs (bench/RESULTS.md): SQLite's shell needs 16 KiB to
    /// reach its entry on x86_64 (8 KiB: 0% of its stacks, 16 KiB: 99%) and 24 KiB on the
    /// AArch64 board, whose frames are larger (16 KiB: 94-96%, 24 KiB: 99.4-99.7%); a
    /// GStreamer Vorbis encoding thread, whose encoder keeps arrays of a block's size on the
    /// stack, 28 KiB (24 KiB: 88.5%, 28 KiB and 32 KiB: 99.9%). Only Lua's 60-deep pcall
    /// recursion, 1-2% of its samples, needs 48 KiB (x86_64) to 60 KiB (AArch64); deeper
    /// chains are joined on the host (hostside's stack_join). The ring grows with the size,
    /// in powers of two: 32 KiB still fits the 4 MiB per CPU that 24 KiB took; the file
    /// grows only where stacks are deeper.
    pub const DEFAULT_STACK: u32 = 32768;

    /// The default on every architecture, from measurement (bench/RESULTS.md): stock
    /// Yocto/Buildroot code has no frame pointers, the stack copy costs the board about what an
    /// fp chain costs, and hostside unwinds the copy for every architecture rec ships for.
    pub fn default_for_target() -> CallGraph {
        CallGraph::Dwarf(Self::DEFAULT_STACK)
    }

    /// The default when the first event is `main`. Events sampled at every occurrence (faults,
    /// context switches) come in bursts at memory speed, a record per page of a new buffer,
    /// which no drain keeps up with when each record carries a stack copy: measured on 16,384
    /// faults of a 64 MiB first touch, copies of 24 KiB lose 95% of them, 1 KiB still 54%,
    /// while frame-pointer chains (a few hundred bytes) lose none. So these take `fp`.
    pub fn default_for(main: Kind) -> CallGraph {
        if main.every_event() {
            CallGraph::Fp
        } else {
            Self::default_for_target()
        }
    }

    /// What to say when the kernel dropped samples of a recording made with this call graph
    /// and main event: the change that helps for that kind of event.
    pub fn lost_advice(self, main: Kind) -> &'static str {
        match (main.every_event(), self) {
            (true, CallGraph::Dwarf(_)) => {
                "every fault or switch is a sample and stack copies overflow the ring in a burst: --call-graph fp (their default) keeps them all"
            }
            (true, CallGraph::Fp) => {
                "the events came faster than rec could drain them: record one program, or fewer events at once"
            }
            (false, CallGraph::Dwarf(_)) => {
                "try a lower --freq or a smaller stack copy (--call-graph dwarf=SIZE)"
            }
            (false, CallGraph::Fp) => "try a lower --freq",
        }
    }

    /// Parses `fp`, `dwarf` or `dwarf=BYTES`.
    pub fn parse(mode: &str) -> Result<CallGraph, String> {
        match mode.split_once('=') {
            None if mode == "fp" => Ok(CallGraph::Fp),
            None if mode == "dwarf" => Ok(CallGraph::Dwarf(Self::DEFAULT_STACK)),
            Some(("dwarf", size)) => {
                let n: u32 = size
                    .parse()
                    .map_err(|_| format!("--call-graph {mode}: SIZE must be a number of bytes"))?;
                if !(8..=Self::MAX_STACK).contains(&n) {
                    return Err(format!(
                        "--call-graph {mode}: SIZE must be 8 to {}",
                        Self::MAX_STACK
                    ));
                }
                // The kernel wants a multiple of 8.
                Ok(CallGraph::Dwarf(n & !7))
            }
            _ => Err(format!(
                "--call-graph {mode}: unknown mode (use fp or dwarf[=SIZE])"
            )),
        }
    }

    /// The header's name for the mode (`fp`, `dwarf=24576`).
    pub fn name(self) -> String {
        match self {
            CallGraph::Fp => "fp".into(),
            CallGraph::Dwarf(n) => format!("dwarf={n}"),
        }
    }
}
