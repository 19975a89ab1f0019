//! The module list the unwinder works from: installed at load time, completed by address
//! when a stack meets a module loaded since ([`adopt`], glibc), read again when `dlopen`
//! (musl) or `dlclose` return ([`modules_changed`]). Never with the loader's lock taken from
//! inside an allocation once the interposer is initialized (see the crate docs).

use core::sync::atomic::{AtomicBool, Ordering};

use super::{active, state, stop, write_pending, State, LOCK, OWN_END, OWN_START};
use crate::announce;
use crate::stack::{self, Modules};
use crate::{sys, thread};

/// The module list is installed (by `init`, or by the first event when that came earlier).
pub(super) static HAVE_MODULES: AtomicBool = AtomicBool::new(false);

/// Puts `m` in place of the list (the memo's entries, unwound with the old one, go); returns
/// the old list, to be dropped after the lock is released.
pub(super) fn install_modules(st: &mut State, m: Modules) -> Option<Modules> {
    OWN_START.store(m.own.start, Ordering::Relaxed);
    OWN_END.store(m.own.end, Ordering::Relaxed);
    st.memo.invalidate();
    st.scratch.invalidate();
    st.modules.replace(m)
}

/// Installs the module list if no one has yet: from [`super::init`], or from the first event
/// when that comes before `init` (an allocation made by the initializer of a library loaded
/// before the interposer). Scans without the lock (`dl_iterate_phdr` takes the loader's). Safe that
/// early: the loader has mapped and relocated every initial module before it runs any
/// initializer, the scan allocates only from the interposer's arena, and the thread-locals it
/// touches are const-initialized (valid from the thread's first instruction). Only the first
/// events of a process (before `init` completes) can reach the scan: the loader runs the
/// initial initializers on the process's one thread, holding none of its locks that
/// `dl_iterate_phdr` takes (glibc), and musl's never calls the interposed malloc before it
/// runs them. This is the one `dl_iterate_phdr` inside an allocation; after `init`, modules
/// are found with [`stack::find`] or when `dlopen`/`dlclose` return (`crate::dl`).
pub(super) fn ensure_modules(tid: u32) {
    if HAVE_MODULES.load(Ordering::Acquire) {
        return;
    }
    let fresh = stack::rescan();
    let described = announce::List::take();
    LOCK.lock(tid);
    // SAFETY: LOCK is held.
    let st = unsafe { state() };
    // Two threads may race here (a library initializer that starts a thread): one list wins.
    let (spare, spare_described) = if st.modules.is_none() {
        install_modules(st, fresh);
        // Sent when the ring connects (this runs before the first one does).
        (None, core::mem::replace(&mut st.described, described))
    } else {
        (Some(fresh), described)
    };
    HAVE_MODULES.store(true, Ordering::Release);
    LOCK.unlock();
    drop(spare);
    drop(spare_described);
}

/// Adds the module that holds `ip` (an address a stack met outside every known module) to
/// the list, found with [`stack::find`] (lock-free, see there), and tells rec to read the
/// process's maps. Entries it overlaps (modules unloaded since) are dropped. Whether the
/// list changed. Only where the interposer unwinds itself (x86_64, aarch64); elsewhere the C
/// runtime's unwinder finds the modules. Call with the lock held.
pub(super) fn adopt(st: &mut State, ip: u64, tid: u32, now: u64) -> bool {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        // A module that does not hold `ip` after all would be added again at every event.
        let Some(new) = stack::find::find(ip).filter(|l| l.range.contains(&ip)) else {
            return false;
        };
        let Some(m) = st.modules.as_ref() else {
            return false;
        };
        let mut list: alloc::vec::Vec<_> = m
            .loaded
            .iter()
            .filter(|l| l.range.end <= new.range.start || l.range.start >= new.range.end)
            .cloned()
            .collect();
        list.push(new);
        let old = install_modules(st, stack::build(list));
        drop(old);
        if !st.producer.as_mut().is_none_or(|p| p.maps(tid, now)) {
            return false;
        }
        true
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = (st, ip, tid, now);
        false
    }
}

/// Reads the module list again and tells rec to read the process's maps (a `MAPS` event).
/// Takes the loader's lock, then the interposer's: only from outside both.
///
/// Runs as part of the event path (see [`thread::begin_event`]), so that a signal handler
/// that allocates meanwhile parks its event instead of waiting for a lock (the interposer's
/// or its arena's) that its own thread holds; the parked events are written here.
fn rescan_now(tid: u32, now: u64) {
    match thread::begin_event() {
        Some((false, _, _)) => {}
        Some(_) => {
            thread::leave();
            return;
        }
        None => return,
    }
    let fresh = stack::rescan();
    // A native process's modules are not described again once rec said it has them.
    let described = announce::wanted().then(announce::List::take);
    LOCK.lock(tid);
    // SAFETY: LOCK is held.
    let st = unsafe { state() };
    let old = install_modules(st, fresh);
    let old_described = described.map(|d| core::mem::replace(&mut st.described, d));
    HAVE_MODULES.store(true, Ordering::Release);
    let ok = st.producer.as_mut().is_none_or(|p| p.maps(tid, now));
    let described = &st.described;
    let ok = ok
        && st
            .producer
            .as_mut()
            .is_none_or(|p| described.send(p, tid, now));
    if !(ok && (st.producer.is_none() || write_pending(st))) {
        stop(st);
    }
    LOCK.unlock();
    drop(old);
    drop(old_described);
    thread::leave();
}

/// A library was loaded or unloaded (called after `dlopen`/`dlclose` returned, outside the
/// loader's lock and outside any allocation): the module list is read again at once.
pub fn modules_changed() {
    if !active() || thread::inside() {
        return;
    }
    rescan_now(thread::tid(), sys::now_ns());
}

/// A `dlclose` is about to start (called before the real call, outside any allocation): on
/// the architectures whose unwinder asks `dl_iterate_phdr`, it is told, under the lock, to
/// answer only the modules that cannot be unloaded until [`dlclose_ended`] (see
/// `stack::phdr_list`). Returns whether it was told; pass that to [`dlclose_ended`].
pub fn dlclose_starts() -> bool {
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        // As in `rescan_now`: a signal handler that allocates meanwhile parks its event.
        match thread::begin_event() {
            Some((false, _, _)) => {}
            Some(_) => {
                thread::leave();
                return false;
            }
            None => return false,
        }
        LOCK.lock(thread::tid());
        stack::phdr_list::closing(true);
        LOCK.unlock();
        thread::leave();
        true
    }
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    false
}

/// The `dlclose` that [`dlclose_starts`] announced returned and the list was read again.
pub fn dlclose_ended(told: bool) {
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    if told {
        stack::phdr_list::closing(false);
    }
    let _ = told;
}
