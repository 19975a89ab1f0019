//! i686 signal frames are not stepped through yet: glibc's `__restore_rt` carries CFI that
//! gimli may evaluate, and no board test covers it. An unwind that meets one ends as its
//! tables say.

use crate::arch::Trampoline;

/// No trampoline is recognised.
pub(super) const TRAMPOLINES: &[Trampoline] = &[];
