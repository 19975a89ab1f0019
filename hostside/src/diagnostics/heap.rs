//! The heap profile's gaps as diagnostics: lost events, stacks cut short, unknown frees.

use super::Kind;
use crate::analysis::heap::HeapProfile;

/// Adds the heap profile's diagnostics (what `h.anomalies` counted).
pub(super) fn allocations(h: &HeapProfile, add: &mut impl FnMut(Kind, u64, String)) {
    let a = &h.anomalies;
    add(
        Kind::HeapStackCutShort,
        a.depth_limited_allocations,
        format!(
            "allocations whose stack reached the interposer's limit of {} frames: their \
             outermost callers are missing",
            crossprof_heap_wire::MAX_FRAMES
        ),
    );
    add(
        Kind::HeapStackUnknown,
        a.unknown_stack_allocations,
        format!(
            "allocations recorded without a stack are counted under \"{}\"",
            crate::analysis::heap::UNKNOWN_STACK
        ),
    );
    add(
        Kind::HeapUnknownFrees,
        a.unknown_frees,
        "frees of blocks that were not live (allocated before recording began, or double \
         frees) were ignored"
            .into(),
    );
    add(
        Kind::HeapTraceTreeDamaged,
        a.tree.unknown_ids + a.tree.truncated,
        "allocation stacks referred to unknown trace-tree nodes or looped; they were cut there"
            .into(),
    );
    if let Some(e) = &h.events {
        let hidden = e.not_shown();
        add(
            Kind::HeapEventsSampled,
            hidden,
            format!(
                "the export shows {} of {} allocations at their times (one in {}, at most {}), \
                 each with its free; the rest count in the totals only",
                e.allocations - hidden,
                e.allocations,
                e.every,
                e.cap
            ),
        );
    }
}
