//! How one unwind ended, and why it stopped early when it did. Reports count both, so a weak
//! stack is never silent and a user can tell a too-small stack copy from a missing module.

/// How an unwind ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The outermost frame was reached: the unwind tables said the stack ends there (the
    /// program's start code, or a thread's `clone`/`clone3` whose return address is
    /// undefined), or the entry point's start code was reached.
    Complete,
    /// Stopped before the outermost frame; the frames found so far are kept.
    CutShort(CutShort),
}

/// Why an unwind stopped before the outermost frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CutShort {
    /// A frame needed stack bytes beyond the copy the board took (`rec --call-graph
    /// dwarf=SIZE` too small for this stack).
    StackCopyEnded,
    /// The address lies in a mapped file whose unwind tables are not available (module
    /// missing from the sysroot, mismatched, or without `.eh_frame`/`.debug_frame`).
    NoUnwindTables,
    /// The module's unwind tables do not cover the address (hand-written assembly without
    /// CFI, a linker stub).
    NoUnwindInfo,
    /// The next return address (or the sampled instruction) lies outside every executable
    /// mapping: garbage from a corrupt stack or a wrong rule. It is never shown as a frame.
    OutsideMappings,
    /// The unwind rule could not be applied or led nowhere (the stack pointer did not move
    /// up, a rule the unwinder does not evaluate, an overflow).
    BadFrame,
    /// [`crate::MAX_FRAMES`] frames without reaching the outermost one.
    TooDeep,
}

impl CutShort {
    /// Every reason, in report order.
    pub const ALL: [CutShort; 6] = [
        CutShort::StackCopyEnded,
        CutShort::NoUnwindTables,
        CutShort::NoUnwindInfo,
        CutShort::OutsideMappings,
        CutShort::BadFrame,
        CutShort::TooDeep,
    ];

    /// A stable snake_case name (the JSON report's key).
    pub fn name(self) -> &'static str {
        match self {
            CutShort::StackCopyEnded => "stack_copy_ended",
            CutShort::NoUnwindTables => "no_unwind_tables",
            CutShort::NoUnwindInfo => "no_unwind_info",
            CutShort::OutsideMappings => "outside_mappings",
            CutShort::BadFrame => "bad_frame",
            CutShort::TooDeep => "too_deep",
        }
    }

    /// What it means for the user, and what to do about it.
    pub fn explain(self) -> &'static str {
        match self {
            CutShort::StackCopyEnded => {
                "the stack copy ended (record with a larger --call-graph dwarf=SIZE)"
            }
            CutShort::NoUnwindTables => {
                "a module's unwind tables are missing (put the module in the sysroot)"
            }
            CutShort::NoUnwindInfo => "code without unwind info (assembly, linker stubs)",
            CutShort::OutsideMappings => {
                "an address outside every mapping (dropped; a sample inside execve has one)"
            }
            CutShort::BadFrame => "an unwind rule led nowhere (corrupt stack or tables)",
            CutShort::TooDeep => "deeper than the frame limit",
        }
    }
}
