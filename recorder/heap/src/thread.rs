//! Per-thread state: the cached thread id, the stack's bounds (so the unwinder never reads
//! outside the stack) and a pass-through depth for calls the interposer makes itself.
//!
//! Only `const`-initialized `Cell`s of plain integers: such thread-locals need no destructor
//! and no lazy registration (which could allocate), so they are valid from the thread's first
//! instruction to its last, including inside TLS destructors that run after other state is
//! gone and in signal handlers.

use core::cell::Cell;

/// All per-thread fields in one thread-local: in a preloaded shared library every access
/// to a thread-local is a call to `__tls_get_addr`, so the event path reaches them all
/// through one access ([`begin_event`]).
struct Local {
    depth: Cell<u32>,
    tid: Cell<u32>,
    pass: Cell<u32>,
    stack: Cell<(usize, usize)>,
    /// Sampled mode: bytes left before the next sampling point (see [`crate::sample`]).
    until: Cell<u64>,
    /// Sampled mode: the thread's random state (0 until the first draw).
    rng: Cell<u64>,
}

thread_local! {
    static LOCAL: Local = const {
        Local {
            depth: Cell::new(0),
            tid: Cell::new(0),
            pass: Cell::new(0),
            stack: Cell::new((0, 0)),
            until: Cell::new(0),
            rng: Cell::new(0),
        }
    };
}

fn tid_of(t: &Local) -> u32 {
    match t.tid.get() {
        0 => {
            let id = crate::sys::gettid();
            t.tid.set(id);
            id
        }
        id => id,
    }
}

fn bounds_of(t: &Local) -> (usize, usize) {
    let cached = t.stack.get();
    if cached.1 != 0 {
        return cached;
    }
    t.pass.set(t.pass.get() + 1);
    let b = query_stack();
    t.pass.set(t.pass.get() - 1);
    t.stack.set(b);
    b
}

/// Starts an event on this thread: `None` when the interposer itself is the caller (its
/// allocations pass through unrecorded); else whether this interrupts another event on the
/// thread (a signal handler, which must not touch the lock), the thread id and the stack's
/// bounds. Pair with [`leave`].
pub fn begin_event() -> Option<(bool, u32, (usize, usize))> {
    with_local(|t| {
        if t.pass.get() != 0 {
            return None;
        }
        let was = t.depth.get();
        t.depth.set(was + 1);
        Some((was != 0, tid_of(t), bounds_of(t)))
    })
}

// ---- the thread-local without `__tls_get_addr` ------------------------------------------
//
// Sampled mode asks for the thread-local gap counter on every allocation, and in a shared
// library each access is a call to `__tls_get_addr` (about 14 instructions with the call):
// a third of an unsampled allocation's cost in the hook (Ninja makes 9.5 million). A library
// loaded with the program (LD_PRELOAD, how `rec --heap` launches) has its thread-locals in
// the static TLS block, at the same offset from the thread pointer in every thread (what the
// ELF TLS ABI's initial-exec model relies on). So the load-time initializer of a launched
// program learns that offset once, from its own thread, and the gap counter is reached with
// one register read and an add. A library `dlopen`ed by an attach may get dynamic TLS, whose
// offset differs per thread: it never learns the offset (the initializer learns it only
// where the launch's socket is in the environment, and the attach forgets it before any call
// slot points here), and goes through `__tls_get_addr` as before. x86_64 only: there a
// thread-local access is a call to `__tls_get_addr`; AArch64's shared libraries use TLS
// descriptors, a few instructions already (and the board tests do not run sampled mode).

/// This thread's `LOCAL` minus the thread pointer, in every thread; 0: not known, ask
/// `__tls_get_addr`.
#[cfg(target_arch = "x86_64")]
static TP_OFFSET: core::sync::atomic::AtomicIsize = core::sync::atomic::AtomicIsize::new(0);

/// The thread pointer: `%fs:0`, the TCB's pointer to itself, as glibc and musl set it.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn thread_pointer() -> isize {
    let tp: isize;
    // SAFETY: reads the thread pointer, which every thread of a glibc or musl process has.
    unsafe {
        core::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly, preserves_flags))
    };
    tp
}

/// Learns where `LOCAL` lies from the thread pointer. Only from the load-time initializer of
/// a library loaded with the program (static TLS, see above).
pub fn learn_static_tls() {
    #[cfg(target_arch = "x86_64")]
    LOCAL.with(|t| {
        let off = t as *const Local as isize - thread_pointer();
        TP_OFFSET.store(off, core::sync::atomic::Ordering::Relaxed);
    });
}

/// Forgets it: this library was `dlopen`ed, its thread-locals may be dynamic.
pub fn forget_static_tls() {
    #[cfg(target_arch = "x86_64")]
    TP_OFFSET.store(0, core::sync::atomic::Ordering::Relaxed);
}

/// This thread's `LOCAL` found from the thread pointer, when the offset is known (static
/// TLS, x86_64); `None`: ask `__tls_get_addr` (`LOCAL.with`).
#[inline(always)]
fn static_local() -> Option<&'static Local> {
    #[cfg(target_arch = "x86_64")]
    {
        let off = TP_OFFSET.load(core::sync::atomic::Ordering::Relaxed);
        if off != 0 {
            // SAFETY: static TLS: this thread's LOCAL lies at the thread pointer plus the
            // offset learnt in the initializer, for as long as the thread lives (the
            // reference never leaves it); only this thread touches it (Cells).
            return Some(unsafe { &*((thread_pointer() + off) as *const Local) });
        }
    }
    None
}

/// Runs `f` on this thread's `LOCAL`, without `__tls_get_addr` where the offset is known.
#[inline(always)]
fn with_local<R>(f: impl FnOnce(&Local) -> R) -> R {
    match static_local() {
        Some(t) => f(t),
        None => LOCAL.with(f),
    }
}

/// Sampled mode: counts `size` more bytes allocated on this thread and says whether they
/// cover a sampling point (then draws the next one). Lock-free, and cheap when they do not.
/// The interposer's own calls (pass-through) are no allocations of the program's: they
/// neither count nor consume a point (a point they took would be recorded by no one).
#[inline(always)]
pub fn sampled(size: usize, mean: u64) -> bool {
    // The common case inline, with the thread pointer: no point covered. Everything else
    // (`__tls_get_addr`, the interposer's own calls, drawing a point) out of line, so that
    // the hooks' common path needs no stack frame.
    if let Some(t) = static_local() {
        let left = t.until.get();
        if t.pass.get() == 0 && left > size as u64 {
            t.until.set(left - size as u64);
            return false;
        }
    }
    sampled_slow(size, mean)
}

/// [`sampled`] in full.
#[inline(never)]
fn sampled_slow(size: usize, mean: u64) -> bool {
    with_local(|t| {
        if t.pass.get() != 0 {
            return false;
        }
        let size = size as u64;
        let left = t.until.get();
        if left > size {
            t.until.set(left - size);
            return false;
        }
        first_or_next_point(t, size, mean)
    })
}

#[inline(never)]
fn first_or_next_point(t: &Local, size: u64, mean: u64) -> bool {
    let mut rng = t.rng.get();
    if rng == 0 {
        // The thread's first allocation: seed, draw the first point, and see again.
        let here = &rng as *const u64 as u64;
        rng = (crate::sys::now_ns() ^ here.rotate_left(29) ^ u64::from(tid_of(t)) << 40) | 1;
        let first = crate::sample::draw_gap(&mut rng, mean);
        t.rng.set(rng);
        if first > size {
            t.until.set(first - size);
            return false;
        }
    }
    // The process is memoryless: the next point lies a fresh gap past this block's end.
    let gap = crate::sample::draw_gap(&mut rng, mean);
    t.rng.set(rng);
    t.until.set(gap);
    true
}

/// The calling thread's id, cached after the first call.
pub fn tid() -> u32 {
    LOCAL.with(tid_of)
}

/// Leaves the event path.
pub fn leave() {
    with_local(|t| t.depth.set(t.depth.get().saturating_sub(1)));
}

/// Whether the thread is inside the event path.
pub fn inside() -> bool {
    LOCAL.with(|t| t.depth.get() != 0)
}

/// Forgets the cached id (in a fork child, whose only thread has a new id), and the
/// sampling state: a child that kept its parent's would sample at the very same points as
/// the parent when both run the same code (the next allocation seeds and draws anew).
pub fn reset_tid() {
    LOCAL.with(|t| {
        t.tid.set(0);
        t.rng.set(0);
        t.until.set(0);
    });
}

/// Runs `f` with recording off for this thread: for libc calls the interposer makes that may
/// allocate (the stack-bounds query on glibc's main thread reads /proc with stdio).
pub fn pass_through<R>(f: impl FnOnce() -> R) -> R {
    LOCAL.with(|t| t.pass.set(t.pass.get() + 1));
    let r = f();
    LOCAL.with(|t| t.pass.set(t.pass.get() - 1));
    r
}

fn query_stack() -> (usize, usize) {
    // SAFETY: attr is initialized by pthread_getattr_np before use and destroyed after;
    // pthread_getattr_np exists on glibc and musl.
    unsafe {
        let mut attr: libc::pthread_attr_t = core::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return (0, 0);
        }
        let mut addr: *mut libc::c_void = core::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        if !ok {
            return (0, 0);
        }
        (addr as usize, addr as usize + size)
    }
}

#[cfg(test)]
mod tests {
    /// 10^6 allocations of 32 bytes at a mean of 64 KiB: the number sampled is
    /// 10^6 × (1 − exp(−32/65536)) ≈ 488 within 3 standard deviations.
    #[test]
    fn small_allocations_are_sampled_with_the_stated_probability() {
        let (n, s, m) = (1_000_000u64, 32usize, 65_536u64);
        let got = std::thread::spawn(move || (0..n).filter(|_| super::sampled(s, m)).count())
            .join()
            .expect("thread");
        let p = -(-(s as f64) / m as f64).exp_m1();
        let (mu, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
        eprintln!("sampled {got}, expected {mu:.1} ± {sd:.1}");
        assert!(
            (got as f64 - mu).abs() <= 3.0 * sd,
            "{got} vs {mu:.1} ± {sd:.1}"
        );
    }
}
