//! The stack-copy unwinder's fallbacks and failures as diagnostics: every step it took
//! without a table, every join, every stack it could not finish.

use super::Kind;
use crate::unwinding::UnwindStats;

/// Adds the diagnostics of the stack copies' unwinding (`u`; `errors`: modules whose unwind
/// sections could not be read). The cut-short stacks, one entry per reason, are
/// [`super::gather`]'s.
pub(super) fn stack_copies(
    u: &UnwindStats,
    errors: &[String],
    add: &mut impl FnMut(Kind, u64, String),
) {
    add(
        Kind::UnwindNoRegisters,
        u.no_registers,
        "stack-copy samples carried no user registers (kernel threads, or a kernel without \
         perf user-register support): only their kernel frames are known"
            .into(),
    );
    add(
        Kind::UnwindSectionsFailed,
        errors.len() as u64,
        format!(
            "modules whose unwind sections could not be read (first: {}): stacks are cut short \
             in them; check that the sysroot's files are intact ELF files",
            errors.first().map_or("", |s| s.as_str())
        ),
    );
    add(
        Kind::CfiEntriesSkipped,
        u.cfi_entries_skipped,
        "unwind table entries (.eh_frame, .debug_frame) that did not parse were skipped: the \
         code they describe unwinds as code without unwind info; the tables are damaged"
            .into(),
    );
    add(
        Kind::UnwindWithoutTables,
        u.untabled_frames,
        "frames in code no unwind table covers (hand-written assembly without CFI, stubs) were \
         unwound by the return address at the stack pointer or link register (a sampled leaf) \
         or by the frame pointer, each landing in code and moving up the stack: right where \
         that code keeps the frame pointer, as SIMD assembly usually does"
            .into(),
    );
    add(
        Kind::UnwindStackScanned,
        u.scanned_frames,
        "frames in code without unwind tables or a frame pointer (SIMD assembly that uses the \
         frame pointer register for data, generated code) were found by scanning the stack for \
         the first word that follows a call instruction, as Breakpad does: a heuristic that a \
         saved register or stale data may rarely fool"
            .into(),
    );
    add(
        Kind::UnwindJoined,
        u.joined_stacks,
        "stacks the stack copy cut short were completed from a complete stack of the same \
         thread that holds the same two outermost frames at the same stack addresses (as \
         simpleperf joins call chains); recording with a larger --call-graph dwarf=SIZE makes \
         them whole without this"
            .into(),
    );
    add(
        Kind::GoStackSwitch,
        u.go_stack_switches,
        "stacks end where Go's runtime switched to the thread's system stack \
         (runtime.systemstack, mcall, morestack, asmcgocall): counted complete, as Go's own \
         profiler ends them, but the goroutine's frames above the switch are on its own stack, \
         which the sample did not copy"
            .into(),
    );
}
