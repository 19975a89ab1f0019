//! A `dl_iterate_phdr` that takes no lock, for the C runtime's unwinder that ARMv7, i686 and
//! RISC-V builds link (LLVM's libunwind, bundled into the library): it looks each frame's
//! module up with `dl_iterate_phdr`, which takes the loader's lock, from inside `malloc`. The
//! loader allocates and frees with that lock held (musl's `dlopen`, glibc's `dlclose`), so a
//! thread in `dlopen` waiting for the interposer's lock and a thread in `malloc` waiting for
//! the loader's would wait for ever.
//!
//! The library defines `dl_iterate_phdr` itself. While its own thread unwinds ([`serve`]),
//! the call is answered from the module list the interposer took outside any allocation (at
//! load time, and when `dlopen` (musl) or `dlclose` return: `crate::dl`), then, on glibc,
//! from the loader's list of modules (`_r_debug`) read without its lock, each one's headers
//! found with the lock-free `_dl_find_object`: modules loaded since the list was taken. Every
//! other call goes to the C library's.
//!
//! Why reading without the lock is safe: a module's headers are read only while no `dlclose`
//! is under way. `dlclose` is wrapped: it says it is [`closing`] under the interposer's lock
//! before the real call, so an unwind (which holds that lock) either ends before the real
//! call starts or starts after the flag is set; with the flag set only the modules loaded at
//! start, which are never unloaded, are answered. (A module that glibc unloads by itself, a
//! `dlopen` that fails half-way, is not covered.)
//!
//! Known gap: attached to a running process (`rec --heap -p`), the interposer is loaded after
//! the C library, whose `dl_iterate_phdr` then comes first in the symbol search, so the
//! unwinder calls that one (with its lock) as before.

use alloc::vec::Vec;
use core::cell::Cell;
use core::ffi::{c_char, c_int, c_void};
use core::ops::Range;
use core::sync::atomic::{AtomicUsize, Ordering};

use super::modules::Phdr;

/// One module as `dl_iterate_phdr` describes it, kept while the module is loaded.
#[derive(Clone)]
pub struct Entry {
    addr: usize,
    name: *const c_char,
    phdr: *const Phdr,
    phnum: u16,
    /// Where its loadable segments lie.
    pub range: Range<u64>,
}

/// [`take`], noted for the unwinder ([`resolve`]), with the range of the module that holds
/// `me` (an address of the interposer's own code): its frames are skipped. What both 32-bit
/// captures (`libgcc`, `sparse`) start a rescan with.
pub fn take_with_own(me: u64) -> (Vec<Entry>, Range<u64>) {
    let list = take();
    resolve(list.len());
    let own = list
        .iter()
        .find(|m| m.range.contains(&me))
        .map_or(0..0, |m| m.range.clone());
    (list, own)
}

/// The modules loaded now, as the C library lists them (call outside any allocation).
pub fn take() -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    // SAFETY: the callback only reads what the loader hands it.
    unsafe { real(Some(collect), &mut out as *mut Vec<Entry> as *mut c_void) };
    out
}

unsafe extern "C" fn collect(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
    // SAFETY: data is the Vec passed by `take`; info is valid for this call.
    let (out, info) = unsafe { (&mut *(data as *mut Vec<Entry>), &*info) };
    if let Some(e) = entry(
        info.dlpi_addr as usize,
        info.dlpi_name,
        info.dlpi_phdr,
        info.dlpi_phnum,
    ) {
        out.push(e);
    }
    0
}

impl Entry {
    /// The address ranges of its executable segments (`PF_X` loads), as mapped.
    #[cfg_attr(not(target_arch = "arm"), allow(dead_code))]
    pub fn exec_ranges(&self) -> impl Iterator<Item = Range<u64>> + '_ {
        // SAFETY: the loader's headers of a module still loaded (the list is retaken when
        // one is unloaded).
        let phdrs = unsafe { core::slice::from_raw_parts(self.phdr, self.phnum as usize) };
        let bias = self.addr as u64;
        phdrs
            .iter()
            .filter(|ph| ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0)
            .map(move |ph| {
                // Program headers' fields are 32-bit on 32-bit targets.
                #[allow(clippy::unnecessary_cast)]
                let (vaddr, memsz) = (ph.p_vaddr as u64, ph.p_memsz as u64);
                let start = bias + vaddr;
                start..start + memsz
            })
    }
}

fn entry(addr: usize, name: *const c_char, phdr: *const Phdr, phnum: u16) -> Option<Entry> {
    if phdr.is_null() {
        return None;
    }
    // SAFETY: the loader's headers of a loaded module.
    let phdrs = unsafe { core::slice::from_raw_parts(phdr, phnum as usize) };
    let range = super::modules::from_phdrs(addr as u64, phdrs)?.range;
    Some(Entry {
        addr,
        name,
        phdr,
        phnum,
        range,
    })
}

/// Modules loaded at start (never unloaded): the first this many entries of any list.
static INITIAL: AtomicUsize = AtomicUsize::new(usize::MAX);
/// `dlclose` calls under way.
static CLOSING: AtomicUsize = AtomicUsize::new(0);
static REAL: AtomicUsize = AtomicUsize::new(0);
static R_DEBUG: AtomicUsize = AtomicUsize::new(0);

/// Looks the C library's `dl_iterate_phdr` and (glibc) `_r_debug` up, and notes how many
/// modules were loaded at start. Load time only.
pub fn resolve(initial: usize) {
    // SAFETY: NUL-terminated names; the lookups have no other precondition.
    unsafe {
        REAL.store(
            libc::dlsym(libc::RTLD_NEXT, c"dl_iterate_phdr".as_ptr()) as usize,
            Ordering::Release,
        );
        if cfg!(target_env = "gnu") {
            R_DEBUG.store(
                libc::dlsym(libc::RTLD_DEFAULT, c"_r_debug".as_ptr()) as usize,
                Ordering::Release,
            );
        }
    }
    let _ = INITIAL.compare_exchange(usize::MAX, initial, Ordering::AcqRel, Ordering::Acquire);
}

/// A `dlclose` starts (`true`, call with the interposer's lock held) or has ended and the
/// list was taken again (`false`).
pub fn closing(starts: bool) {
    if starts {
        CLOSING.fetch_add(1, Ordering::AcqRel);
    } else {
        CLOSING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// In a fork child: the threads that were in `dlclose` did not come along.
pub fn reset_after_fork() {
    CLOSING.store(0, Ordering::Release);
}

type Callback = Option<unsafe extern "C" fn(*mut libc::dl_phdr_info, usize, *mut c_void) -> c_int>;
type IterateFn = unsafe extern "C" fn(Callback, *mut c_void) -> c_int;

unsafe fn real(cb: Callback, data: *mut c_void) -> c_int {
    let mut f = REAL.load(Ordering::Acquire);
    if f == 0 {
        // SAFETY: a NUL-terminated name (only before `resolve`, outside the unwinder).
        f = unsafe { libc::dlsym(libc::RTLD_NEXT, c"dl_iterate_phdr".as_ptr()) } as usize;
        REAL.store(f, Ordering::Release);
    }
    if f == 0 {
        return 0;
    }
    // SAFETY: the C library's function of this signature; arguments passed through.
    unsafe { core::mem::transmute::<usize, IterateFn>(f)(cb, data) }
}

thread_local! {
    /// The list this thread's unwinder is answered from, while it unwinds.
    static SERVING: Cell<*const Vec<Entry>> = const { Cell::new(core::ptr::null()) };
}

/// Runs `f` (an unwind, with the interposer's lock held) with `dl_iterate_phdr` answered from
/// `list` on this thread.
pub fn serve<R>(list: &Vec<Entry>, f: impl FnOnce() -> R) -> R {
    SERVING.with(|s| s.set(list));
    let r = f();
    SERVING.with(|s| s.set(core::ptr::null()));
    r
}

/// `dl_iterate_phdr`, see the module docs.
///
/// # Safety
/// As for the C function.
#[no_mangle]
pub unsafe extern "C" fn dl_iterate_phdr(cb: Callback, data: *mut c_void) -> c_int {
    let list = SERVING.with(|s| s.get());
    if list.is_null() {
        // SAFETY: passed through.
        return unsafe { real(cb, data) };
    }
    let Some(f) = cb else { return 0 };
    // SAFETY: set by `serve` for the duration of the unwind, from a list it borrows.
    let list = unsafe { &*list };
    let closing = CLOSING.load(Ordering::Acquire) != 0;
    let n = if closing {
        list.len().min(INITIAL.load(Ordering::Acquire))
    } else {
        list.len()
    };
    for e in &list[..n] {
        // SAFETY: the module is loaded (see the module docs).
        let r = unsafe { call(f, e, data) };
        if r != 0 {
            return r;
        }
    }
    if closing {
        return 0;
    }
    // SAFETY: no dlclose is under way (see the module docs).
    unsafe { loaded_since(list, f, data) }
}

unsafe fn call(
    f: unsafe extern "C" fn(*mut libc::dl_phdr_info, usize, *mut c_void) -> c_int,
    e: &Entry,
    data: *mut c_void,
) -> c_int {
    // SAFETY: all-zero is a valid dl_phdr_info (integers and null pointers).
    let mut info: libc::dl_phdr_info = unsafe { core::mem::zeroed() };
    info.dlpi_addr = e.addr as _;
    info.dlpi_name = e.name;
    info.dlpi_phdr = e.phdr;
    info.dlpi_phnum = e.phnum as _;
    // SAFETY: the callback's contract.
    unsafe { f(&mut info, core::mem::size_of::<libc::dl_phdr_info>(), data) }
}

/// glibc's `struct link_map`, its public part.
#[repr(C)]
struct LinkMap {
    addr: usize,
    name: *const c_char,
    ld: *const c_void,
    next: *const LinkMap,
    prev: *const LinkMap,
}

/// The modules glibc lists that `list` lacks, answered in turn.
unsafe fn loaded_since(
    list: &[Entry],
    f: unsafe extern "C" fn(*mut libc::dl_phdr_info, usize, *mut c_void) -> c_int,
    data: *mut c_void,
) -> c_int {
    let r = R_DEBUG.load(Ordering::Acquire);
    if r == 0 {
        return 0;
    }
    // SAFETY: `_r_debug` is { int r_version; struct link_map *r_map; ... }.
    let mut map = unsafe { *((r + core::mem::size_of::<usize>()) as *const *const LinkMap) };
    let mut hops = 0;
    while !map.is_null() && hops < 4096 {
        hops += 1;
        // SAFETY: a link_map on glibc's list, not freed while no dlclose is under way.
        let m = unsafe { &*map };
        map = m.next;
        let ld = m.ld as u64;
        if ld == 0 || list.iter().any(|e| e.range.contains(&ld)) {
            continue;
        }
        let Some((phdr, phnum)) = super::find::headers(ld) else {
            continue;
        };
        let Some(e) = entry(m.addr, m.name, phdr, phnum) else {
            continue;
        };
        // SAFETY: as above.
        let r = unsafe { call(f, &e, data) };
        if r != 0 {
            return r;
        }
    }
    0
}
