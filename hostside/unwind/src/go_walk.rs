//! Go frames, unwound with Go's own function table (`.gopclntab`), as the Go runtime's
//! traceback does (`runtime.gentraceback` in `runtime/traceback.go`).
//!
//! Go code has no `.eh_frame`, and a stripped Go binary no `.debug_frame`, but its function
//! table gives each instruction's frame size (the `pcsp` table), which places the return
//! address exactly, in prologues and leaf functions too, where frame pointers are not yet
//! (or never) set up. The table also marks where a stack ends (`runtime.goexit` under every
//! goroutine, `runtime.mstart` under every thread, `runtime.rt0_go`, `runtime.sigtramp`) and
//! the functions that switch stacks (`runtime.systemstack`, `runtime.mcall`,
//! `runtime.morestack`, `runtime.asmcgocall`): the frames above a switch lie on another stack
//! (the goroutine's, when a sample fell on the thread's system stack), which the sample did
//! not copy, so Go's own profiler ends such a stack there and so does this walk (counted).

use crossprof_gopclntab::Func;

use crate::framehop_walk::{failure, FramehopArch};
use crate::outcome::CutShort;
use crate::stack::StackCopy;

/// How a Go frame's walk goes on.
pub(crate) enum GoStep {
    /// The caller's return address (the registers now describe the caller).
    Caller(u64),
    /// The outermost frame of this stack.
    Top,
    /// A function that switched stacks: the rest of the chain is on a stack not copied.
    Switch,
}

/// One step out of the Go function `f` at instruction `pc` (stated address `svma`).
/// `first` is the sampled frame, whose return address may still be in the link register.
pub(crate) fn step_go<A: FramehopArch>(
    f: &Func<'_>,
    svma: u64,
    first: bool,
    state: &mut A::Regs,
    copy: &StackCopy<'_>,
) -> Result<GoStep, CutShort> {
    if f.is_top_frame() {
        return Ok(GoStep::Top);
    }
    if f.switches_stacks() {
        return Ok(GoStep::Switch);
    }
    copy.reset();
    let delta = f.sp_delta(svma).ok_or(CutShort::BadFrame)?;
    let sp = A::sp(state);
    let word = |a: u64| copy.u64(a).ok_or_else(|| failure(copy));
    let (ra, caller_sp, fp) = if A::LINK_REGISTER {
        // Go's prologue on ARM64 stores the link register at the bottom of the new frame
        // and the caller's frame pointer just below it; a frame of size 0 has not stored
        // it (the sampled leaf's entry, or a function without a frame).
        if delta == 0 {
            if !first {
                return Err(CutShort::BadFrame);
            }
            return match A::plt_return(state, copy)? {
                Some(ra) => Ok(GoStep::Caller(ra)),
                None => Err(CutShort::BadFrame),
            };
        }
        let fp = sp.checked_sub(8).and_then(|a| copy.u64(a));
        (word(sp)?, sp.checked_add(delta), fp)
    } else {
        // x86: `call` pushed the return address just above the frame; a function with a
        // frame saved the caller's frame pointer just below it.
        let at = sp.checked_add(delta).ok_or(CutShort::BadFrame)?;
        let caller_sp = at.checked_add(8);
        let fp = (delta >= 8)
            .then(|| at.checked_sub(8).and_then(|a| copy.u64(a)))
            .flatten();
        (word(at)?, caller_sp, fp)
    };
    let caller_sp = caller_sp.ok_or(CutShort::BadFrame)?;
    if caller_sp <= sp {
        return Err(CutShort::BadFrame);
    }
    let fp = fp.unwrap_or_else(|| A::dwarf(state, A::FP_REG, svma).unwrap_or(0));
    A::restore(state, ra, caller_sp, fp, ra);
    Ok(GoStep::Caller(A::strip(state, ra)))
}
