//! The heap profile's gaps as diagnostics: lost events, stacks cut short, unknown frees.

use crossprof_heap_wire::cut_short;

use super::{Diagnostic, Kind};
use crate::analysis::heap::HeapProfile;

/// Adds the heap profile's diagnostics (what `h.anomalies` counted).
pub(super) fn allocations(h: &HeapProfile, add: &mut impl FnMut(Kind, u64, String)) {
    let a = &h.anomalies;
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

/// The `heap-stack-cut-short` entries, one per reason the interposer recorded (count:
/// allocations), each named as `crossprof_heap_wire::cut_short` names it.
pub(super) fn cut_short(h: &HeapProfile, out: &mut Vec<Diagnostic>) {
    for (marker, n) in h.anomalies.cut_short_allocations.by_reason() {
        if n > 0 {
            out.push(Diagnostic {
                kind: Kind::HeapStackCutShort,
                reason: cut_short::name(marker),
                profile: None,
                count: n,
                message: format!(
                    "allocations whose stack the interposer's unwinder (on ARMv7, hostside's \
                     unwind of the stack words recorded) cut short {}: their outermost callers \
                     are missing",
                    cut_reason(marker)
                ),
            });
        }
    }
}

/// What a reason the interposer recorded means, for the diagnostic's message.
fn cut_reason(marker: u64) -> String {
    match marker {
        cut_short::TOO_DEEP => format!(
            "at its limit of {} frames ({} stack words on ARMv7)",
            crossprof_heap_wire::MAX_FRAMES,
            crossprof_heap_wire::MAX_SPARSE_ENTRIES - 3
        ),
        cut_short::NO_UNWIND_INFO => {
            "in code without unwind tables (the stack is the site alone)".into()
        }
        cut_short::BAD_FRAME => "where an unwind rule led nowhere".into(),
        _ => "at a read outside the thread's stack".into(),
    }
}
