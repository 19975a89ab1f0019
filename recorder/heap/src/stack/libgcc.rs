//! Capture through the C runtime's `_Unwind_Backtrace` for architectures framehop does not
//! cover and ARMv7 does not use (i686, RISC-V). Correct but slow (no rule cache). The
//! unwinder finds modules itself, with `dl_iterate_phdr`, which is answered without the
//! loader's lock from the list kept here while it unwinds ([`super::phdr_list`]).

use core::ffi::c_void;
use core::ops::Range;

use crossprof_heap_wire::cut_short;

use super::phdr_list::{self, Entry};

#[repr(C)]
struct Context {
    _private: [u8; 0],
}

extern "C" {
    fn _Unwind_Backtrace(
        trace: extern "C" fn(*mut Context, *mut c_void) -> i32,
        arg: *mut c_void,
    ) -> i32;
    fn _Unwind_GetIP(ctx: *mut Context) -> usize;
}

/// The interposer's own range (frames inside it are skipped), and the modules the unwinder
/// is told of.
pub struct Modules {
    /// The interposer's own code.
    pub own: Range<u64>,
    list: alloc::vec::Vec<Entry>,
}

impl Modules {
    /// Whether `ip` lies in a known module: not tracked here (`_Unwind_Backtrace` finds the
    /// modules itself); only the unwind memo asks, which these architectures do not use.
    pub fn known(&self, _ip: u64) -> bool {
        false
    }
}

/// Takes the module list (call outside any allocation, see [`phdr_list`]); the first call
/// notes the modules loaded at start.
pub fn rescan() -> Modules {
    let me = rescan as fn() -> Modules as usize as u64;
    let (list, own) = phdr_list::take_with_own(me);
    Modules { own, list }
}

struct Walk<'a> {
    out: &'a mut [u64],
    n: usize,
    own: Range<u64>,
    /// The stack had more frames than `out` holds.
    full: bool,
}

/// `_Unwind_Backtrace`'s code for a walk that reached the outermost frame.
const URC_END_OF_STACK: i32 = 5;

extern "C" fn step(ctx: *mut Context, arg: *mut c_void) -> i32 {
    // SAFETY: arg is the Walk passed to _Unwind_Backtrace; ctx is valid during the callback.
    let (w, ip) = unsafe { (&mut *(arg as *mut Walk<'_>), _Unwind_GetIP(ctx) as u64) };
    if ip == 0 {
        return URC_END_OF_STACK;
    }
    if w.n >= w.out.len() {
        w.full = true;
        return URC_END_OF_STACK;
    }
    if !w.own.contains(&ip) {
        w.out[w.n] = ip;
        w.n += 1;
    }
    0
}

/// Captures the calling thread's stack (see the framehop variant).
#[inline(never)]
pub fn capture(
    m: &mut Modules,
    out: &mut [u64],
    _start: &super::Start,
    _tap: Option<super::Tap<'_>>,
) -> (usize, Option<u64>, Option<u64>) {
    let mut w = Walk {
        out,
        n: 0,
        own: m.own.clone(),
        full: false,
    };
    // SAFETY: the callback matches the expected signature and only writes into `w`.
    let code = phdr_list::serve(&m.list, || unsafe {
        _Unwind_Backtrace(step, &mut w as *mut Walk<'_> as *mut c_void)
    });
    // ARM's EHABI unwinder ends every walk with `_URC_FAILURE`, the outermost frame's
    // (`EXIDX_CANTUNWIND`) included: there only a full buffer tells.
    let cut = if w.full {
        Some(cut_short::TOO_DEEP)
    } else if code != URC_END_OF_STACK && !cfg!(target_arch = "arm") {
        Some(cut_short::BAD_FRAME)
    } else {
        None
    };
    (w.n, None, cut)
}
