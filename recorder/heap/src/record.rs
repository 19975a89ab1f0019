//! The event path: what happens after the real allocator returned. Takes the global lock,
//! captures and interns the stack, and writes the event to the ring, so the ring holds the
//! process's events in one total order.
//!
//! The traps, and what this module does about them:
//! - recursion: calls the interposer makes itself run in "pass-through" mode (thread.rs),
//!   and its own Rust allocations never reach `malloc` (arena.rs);
//! - a signal handler that allocates while its thread is inside the event path (perhaps
//!   holding the lock): it must not wait for itself, so it parks its event in a small
//!   per-thread pending area that the interrupted event writes out after its own (stack from
//!   the frame-pointer chain, as the unwinder's state may be mid-update); more than
//!   [`PENDING`] nested events at once are counted as lost;
//! - fork: the lock is taken around `fork` so the child never inherits it held; the child
//!   drops the parent's ring and trace tree and connects anew with its own pid on its next
//!   event (the child keeps recording);
//! - `rec` dying: the ring push fails after rec's pid disappears and recording stops for good
//!   in this process; the application runs on;
//! - not started by `rec`: recording is off after one check; the hooks only forward.

use core::cell::{Cell, UnsafeCell};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossprof_heap_wire::kind;

use crate::announce;
use crate::lock::Lock;
use crate::stack::{self, InternFailed, Memo, Modules, Scratch};
use crate::transport::{NoRing, Producer};
use crate::trie::Trie;
use crate::{sample, sys, thread};

/// Off once we know nothing is listening (or rec is gone); then hooks only forward.
pub(crate) static ACTIVE: AtomicBool = AtomicBool::new(true);
pub(crate) static LOCK: Lock = Lock::new();
static FORK_LOCKED: AtomicBool = AtomicBool::new(false);

pub(crate) struct State {
    pub(crate) producer: Option<Producer>,
    /// Connecting failed for good.
    off: bool,
    trie: Trie,
    pub(crate) modules: Option<Modules>,
    /// The modules as described to rec (for emulated processes, see `crate::announce`).
    pub(crate) described: announce::List,
    /// Whole unwinds remembered by their entry registers and the stack words they read.
    pub(crate) memo: Memo,
    /// The trie generation the memo's ids belong to.
    memo_trie: u64,
    scratch: Scratch,
}

struct Global(UnsafeCell<State>);
// SAFETY: the state is only touched with LOCK held, or by a process's only thread (see
// `Lock::lock_if_threaded`; in a fork child too).
unsafe impl Sync for Global {}

static STATE: Global = Global(UnsafeCell::new(State {
    producer: None,
    off: false,
    trie: Trie::new(),
    modules: None,
    described: announce::List::new(),
    memo: Memo::new(),
    memo_trie: 0,
    scratch: Scratch::new(),
}));

/// # Safety
/// The caller holds LOCK (or is the only thread).
#[allow(clippy::mut_from_ref)]
pub(crate) unsafe fn state() -> &'static mut State {
    // SAFETY: per the function's contract.
    unsafe { &mut *STATE.0.get() }
}

// ---- nested events (signal handlers that interrupt the event path) ---------------------

/// Nested events a thread can park until its interrupted event finishes.
pub const PENDING: usize = 4;
const PENDING_FRAMES: usize = 16;

#[derive(Clone, Copy)]
struct Pending {
    kind: u8,
    tid: u32,
    time: u64,
    old: u64,
    addr: u64,
    size: u64,
    n: usize,
    ips: [u64; PENDING_FRAMES],
}

const EMPTY: Pending = Pending {
    kind: 0,
    tid: 0,
    time: 0,
    old: 0,
    addr: 0,
    size: 0,
    n: 0,
    ips: [0; PENDING_FRAMES],
};

thread_local! {
    /// Per thread: only that thread's signal handlers write it, only that thread drains it,
    /// and a handler runs to completion before the code it interrupted resumes.
    static PENDING_AREA: UnsafeCell<[Pending; PENDING]> = const { UnsafeCell::new([EMPTY; PENDING]) };
    static PENDING_USED: Cell<usize> = const { Cell::new(0) };
}
static PENDING_LOST: AtomicU64 = AtomicU64::new(0);
/// Whether any thread ever parked an event: until one does (most programs never allocate in
/// a signal handler), the drain before and after each event is one load of this, not a
/// thread-local access (a call to `__tls_get_addr` in a shared library). A thread that
/// parks sets it before the code it interrupted drains, so it never misses its own slots.
static EVER_PARKED: AtomicBool = AtomicBool::new(false);
/// The interposer's own code range, readable without the lock (for nested captures).
static OWN_START: AtomicU64 = AtomicU64::new(0);
static OWN_END: AtomicU64 = AtomicU64::new(0);

mod list;
use list::{adopt, ensure_modules, HAVE_MODULES};
pub use list::{dlclose_ended, dlclose_starts, modules_changed};

/// Kind used in pending slots for a realloc (a free and an alloc written together).
const REALLOC: u8 = 0xff;

// ---- public entry points ---------------------------------------------------------------

/// Called once at load time: find the real allocator, the modules, register fork handlers
/// and the exit handler ([`crate::freeres`]), and connect (so `rec` sees the process, and
/// reads its maps, at once).
///
/// Libraries the interposer depends on, or that were loaded before it (libstdc++, whose
/// start-up allocates its exception pool), run their initializers before this one: their
/// allocations arrive before `init`, and the first of them installs the module list itself
/// (see [`ensure_modules`]) so that they get their stacks too.
pub fn init() {
    crate::real::resolve();
    thread::pass_through(stack::find::resolve);
    if crate::attach::setting(crossprof_heap_wire::ENV_SOCKET).is_none() {
        ACTIVE.store(false, Ordering::Release);
        return;
    }
    // The launch's socket is in the environment: loaded with the program (LD_PRELOAD).
    thread::learn_static_tls();
    crate::lock::find_single_threaded_flag();
    thread::pass_through(|| {
        // SAFETY: the handlers are plain extern "C" functions that stay loaded.
        unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child)) };
    });
    crate::freeres::register();
    let tid = thread::tid();
    ensure_modules(tid);
    LOCK.lock(tid);
    // SAFETY: LOCK is held.
    let st = unsafe { state() };
    // An allocation before init (a library initializer's) may have connected already; a
    // second ring would look to rec like a new image (exec) of this process, whose live
    // blocks are gone.
    if st.producer.is_none() {
        connect(st);
    }
    LOCK.unlock();
}

/// Whether events are still being recorded in this process.
pub fn active() -> bool {
    ACTIVE.load(Ordering::Acquire)
}

/// Records an allocation of `size` bytes at `addr`, made by the code the hook entered at
/// `at` returns to ([`stack::entry::entry_return_address`] of the hook, 0 when unknown). Only
/// for a call [`sample::alloc_skipped`] chose.
#[inline(always)]
pub fn alloc(addr: *mut core::ffi::c_void, size: usize, at: stack::Entry) {
    if ACTIVE.load(Ordering::Relaxed) && !addr.is_null() {
        event(kind::ALLOC, 0, addr as u64, size as u64, at);
    }
}

/// Records a free of `addr` (not NULL). Only for a call [`sample::free_skipped`] chose.
#[inline(always)]
pub fn free(addr: *mut core::ffi::c_void) {
    if ACTIVE.load(Ordering::Relaxed) {
        event(kind::FREE, 0, addr as u64, 0, stack::Entry::default());
    }
}

/// Records a successful realloc as [`sample::realloc_plan`] planned it (`old`: the block to
/// record as freed, 0 for none; `keep`: whether the new block is recorded): `Free{old}` then
/// `Alloc{new, size}`, back to back under one lock, as heaptrack's realloc hook does. `at` as
/// for [`alloc`].
#[inline(always)]
pub fn realloc(old: u64, keep: bool, new: *mut core::ffi::c_void, size: usize, at: stack::Entry) {
    if !ACTIVE.load(Ordering::Relaxed) || new.is_null() {
        return;
    }
    match (old, keep) {
        (0, false) => {}
        (old, false) => event(kind::FREE, 0, old, 0, stack::Entry::default()),
        (old, true) => event(REALLOC, old, new as u64, size as u64, at),
    }
}

#[inline(never)]
fn event(k: u8, old: u64, addr: u64, size: u64, at: stack::Entry) {
    let Some((nested_call, tid, bounds)) = thread::begin_event() else {
        return;
    };
    if nested_call {
        nested(k, tid, old, addr, size, at, bounds);
    } else {
        locked_event(k, tid, old, addr, size, at, bounds);
    }
    thread::leave();
}

#[allow(clippy::too_many_arguments)]
fn locked_event(
    k: u8,
    tid: u32,
    old: u64,
    addr: u64,
    size: u64,
    at: stack::Entry,
    bounds: (usize, usize),
) {
    locked(tid, k != kind::FREE, |st, time| {
        write(st, k, tid, time, old, addr, size, at, bounds)
    });
}

/// Runs `write` (given the state and the event's time) under the lock with the ring
/// connected and the parked events written around it, as every event does; `stack`: the
/// event needs the module list. A `false` from `write` (rec is gone) stops recording.
#[inline(always)]
pub(crate) fn locked(tid: u32, stack: bool, write: impl FnOnce(&mut State, u64) -> bool) {
    if stack
        && !HAVE_MODULES.load(Ordering::Acquire)
        && crate::attach::setting(crossprof_heap_wire::ENV_SOCKET).is_some()
    {
        ensure_modules(tid);
    }
    let locked = LOCK.lock_if_threaded(tid);
    // SAFETY: LOCK is held, or this is the process's only thread.
    let st = unsafe { state() };
    if st.producer.is_none() && !connect(st) {
        LOCK.unlock_if(locked);
        return;
    }
    let time = sys::now_ns();
    let ok = write_pending(st) && write(st, time);
    let ok = ok && write_pending(st);
    if !ok {
        stop(st);
    }
    LOCK.unlock_if(locked);
}

/// Writes one event (with its stack for allocations). `false` when rec is gone.
#[allow(clippy::too_many_arguments)]
fn write(
    st: &mut State,
    k: u8,
    tid: u32,
    time: u64,
    old: u64,
    addr: u64,
    size: u64,
    at: stack::Entry,
    bounds: (usize, usize),
) -> bool {
    if k == kind::FREE {
        sample::forget(addr);
        return st
            .producer
            .as_mut()
            .is_some_and(|p| p.free(tid, time, addr));
    }
    match stack_of(st, tid, at, bounds) {
        Ok(leaf) => finish_alloc(st, tid, time, old, addr, size, leaf),
        Err(InternFailed) => false,
    }
}

/// The trace-tree id of the stack of the hook entered at `at` (unwound, or found in the
/// memo), sending the nodes that are new; 0 before the module list exists.
pub(crate) fn stack_of(
    st: &mut State,
    tid: u32,
    at: stack::Entry,
    bounds: (usize, usize),
) -> Result<u64, InternFailed> {
    let Some(m) = st.modules.as_mut() else {
        return intern(&mut st.trie, &mut st.producer, &mut st.described, tid, &[]);
    };
    if st.trie.generation() != st.memo_trie {
        st.memo.invalidate();
        st.scratch.invalidate();
        st.memo_trie = st.trie.generation();
    }
    let (trie, producer, described) = (&mut st.trie, &mut st.producer, &mut st.described);
    let found = stack::stack_id(at, m, &mut st.memo, &mut st.scratch, bounds, |ips| {
        intern(trie, producer, described, tid, ips)
    });
    match found {
        Ok((_, Some(ip))) if adopt(st, ip, tid, sys::now_ns()) => {
            // The stack met a module loaded since the list was built, now known: unwind
            // again, so that this allocation gets its whole stack too.
            let Some(m) = st.modules.as_mut() else {
                return intern(&mut st.trie, &mut st.producer, &mut st.described, tid, &[]);
            };
            let (trie, producer, described) = (&mut st.trie, &mut st.producer, &mut st.described);
            stack::stack_id(at, m, &mut st.memo, &mut st.scratch, bounds, |ips| {
                intern(trie, producer, described, tid, ips)
            })
            .map(|(leaf, _)| leaf)
        }
        other => other.map(|(leaf, _)| leaf),
    }
}

/// Interns a stack (innermost first), sending the nodes that are new, each after the
/// module that holds it when rec has not been told of that one yet ([`announce::List::cover`]);
/// its leaf id.
fn intern(
    trie: &mut Trie,
    producer: &mut Option<Producer>,
    described: &mut announce::List,
    tid: u32,
    ips: &[u64],
) -> Result<u64, InternFailed> {
    trie.intern_stack(ips, |id, parent, ip| {
        producer.as_mut().is_some_and(|p| {
            described.cover(p, tid, sys::now_ns(), ip) && p.node(tid, id, parent, ip)
        })
    })
    .map_err(|_| InternFailed)
}

/// An allocation whose stack is `ips` (a nested event's, captured without the lock).
#[allow(clippy::too_many_arguments)]
fn alloc_event(
    st: &mut State,
    tid: u32,
    time: u64,
    old: u64,
    addr: u64,
    size: u64,
    ips: &[u64],
) -> bool {
    match intern(&mut st.trie, &mut st.producer, &mut st.described, tid, ips) {
        Ok(leaf) => finish_alloc(st, tid, time, old, addr, size, leaf),
        Err(InternFailed) => false,
    }
}

/// Writes the free of a realloc's old block, if any, and the allocation with stack `leaf`.
#[allow(clippy::too_many_arguments)]
fn finish_alloc(
    st: &mut State,
    tid: u32,
    time: u64,
    old: u64,
    addr: u64,
    size: u64,
    leaf: u64,
) -> bool {
    let Some(p) = st.producer.as_mut() else {
        return false;
    };
    sample::replaced(old, addr);
    (old == 0 || p.free(tid, time, old)) && p.alloc(tid, time, addr, size, leaf)
}

fn connect(st: &mut State) -> bool {
    if st.off {
        return false;
    }
    match Producer::connect() {
        Ok(mut p) => {
            // A new ring (the process's first, or a fork child's): rec learns the modules.
            if !st.described.send(&mut p, thread::tid(), sys::now_ns()) {
                stop(st);
                return false;
            }
            st.producer = Some(p);
            true
        }
        Err(NoRing::NotRecording) | Err(NoRing::Sys(_)) => {
            stop(st);
            false
        }
    }
}

pub(crate) fn stop(st: &mut State) {
    st.off = true;
    st.producer = None;
    ACTIVE.store(false, Ordering::Release);
}

/// Writes the events this thread's signal handlers parked. `false` when rec is gone. The
/// check inline (twice per event): two plain loads, far cheaper than a call and the swap;
/// nothing is parked or lost unless a signal handler allocated inside this library.
#[inline(always)]
fn write_pending(st: &mut State) -> bool {
    if PENDING_LOST.load(Ordering::Relaxed) == 0 && !EVER_PARKED.load(Ordering::Relaxed) {
        return true;
    }
    drain_pending(st)
}

/// [`write_pending`] in full.
#[inline(never)]
fn drain_pending(st: &mut State) -> bool {
    if PENDING_LOST.load(Ordering::Relaxed) != 0 {
        let lost = PENDING_LOST.swap(0, Ordering::Relaxed);
        if let Some(p) = st.producer.as_ref() {
            p.lost(lost);
        }
    }
    if PENDING_USED.with(|u| u.get()) == 0 {
        return true;
    }
    let mut done = 0;
    loop {
        let used = PENDING_USED.with(|u| u.get()).min(PENDING);
        while done < used {
            // SAFETY: slot `done` was filled by a handler on this thread that has returned;
            // a handler that interrupts us now only writes slots past `used`.
            let p = PENDING_AREA.with(|a| unsafe { (*a.get())[done] });
            let ok = if p.kind == kind::FREE {
                sample::forget(p.addr);
                st.producer
                    .as_mut()
                    .is_some_and(|q| q.free(p.tid, p.time, p.addr))
            } else {
                alloc_event(st, p.tid, p.time, p.old, p.addr, p.size, &p.ips[..p.n])
            };
            if !ok {
                return false;
            }
            done += 1;
        }
        // Reset only if no handler added a slot meanwhile (it would have finished by now).
        let reset = PENDING_USED.with(|u| {
            if u.get().min(PENDING) == used {
                u.set(0);
                true
            } else {
                false
            }
        });
        if reset {
            return true;
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn nested(
    k: u8,
    tid: u32,
    old: u64,
    addr: u64,
    size: u64,
    at: stack::Entry,
    bounds: (usize, usize),
) {
    EVER_PARKED.store(true, Ordering::Relaxed);
    let i = PENDING_USED.with(|u| {
        let i = u.get();
        u.set(i + 1);
        i
    });
    if i >= PENDING {
        PENDING_LOST.fetch_add(
            if k == REALLOC && old != 0 { 2 } else { 1 },
            Ordering::Relaxed,
        );
        return;
    }
    let own = OWN_START.load(Ordering::Relaxed)..OWN_END.load(Ordering::Relaxed);
    let mut p = EMPTY;
    p.kind = if k == REALLOC { kind::ALLOC } else { k };
    p.tid = tid;
    p.time = sys::now_ns();
    p.old = old;
    p.addr = addr;
    p.size = size;
    p.n = if k == kind::FREE {
        0
    } else if cfg!(target_arch = "arm") {
        // The return address alone, as a sparse stack of unknown registers (the stack
        // words need the module list, which needs the lock): the host makes it the site
        // alone, counted as cut short.
        let _ = (own, bounds);
        p.ips[0] = crossprof_heap_wire::sparse::registers_low(0, 0);
        p.ips[1] = crossprof_heap_wire::sparse::registers_high(at.regs[0] as u32, 0);
        2
    } else {
        let n = stack::capture_fp(&mut p.ips, own.clone(), bounds);
        stack::put_first(at.ra, &own, &mut p.ips, n).0
    };
    // SAFETY: slot i is this thread's and no drain reads it before this handler returns.
    PENDING_AREA.with(|a| unsafe { (*a.get())[i] = p });
}

// ---- fork ------------------------------------------------------------------------------

extern "C" fn fork_prepare() {
    // A fork from a signal handler that interrupted the event path must not wait for a lock
    // its own thread may hold; the child resets the lock anyway.
    if !thread::inside() {
        LOCK.lock(thread::tid());
        FORK_LOCKED.store(true, Ordering::Relaxed);
    }
}

extern "C" fn fork_parent() {
    if FORK_LOCKED.swap(false, Ordering::Relaxed) {
        LOCK.unlock();
    }
}

extern "C" fn fork_child() {
    FORK_LOCKED.store(false, Ordering::Relaxed);
    thread::reset_tid();
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    stack::phdr_list::reset_after_fork();
    // SAFETY: the child has one thread; no one else can hold the lock.
    let st = unsafe { state() };
    // The parent's ring is shared memory: the child must not write to it. Producer has no
    // Drop, so the mapping simply stays (a few MiB of address space) and is never used.
    st.producer = None;
    st.trie.reset();
    st.memo.invalidate();
    st.scratch.invalidate();
    PENDING_USED.with(|u| u.set(0));
    LOCK.reset();
    if ACTIVE.load(Ordering::Relaxed) {
        st.off = false;
    }
}
