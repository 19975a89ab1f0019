//! Redirecting a running program's malloc-family calls to this library by rewriting the
//! global offset table entries (`JUMP_SLOT` and `GLOB_DAT` relocations) of every loaded module,
//! for `rec --heap -p PID`: a library loaded with `dlopen` into a running process does not
//! interpose anything (every symbol is bound already), so the addresses the modules call
//! through are replaced instead, as heaptrack's injection does. Each replaced slot keeps its
//! original value, to put back at detach. glibc's own internal calls to `malloc` go through
//! its PLT too (so that replacement allocators see them), so its table is rewritten as well.
//!
//! The module list comes from `dl_iterate_phdr`; the relocations from each module's dynamic
//! section in memory. Writing a pointer-sized slot is atomic: a thread that calls `malloc`
//! meanwhile goes either to the allocator or to the hook, both correct.

use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The most slots rewritten in one process; more are left alone (and counted).
const MAX_SLOTS: usize = 4096;

/// A rewritten slot: its address and the value it held.
#[derive(Clone, Copy)]
struct Slot {
    addr: usize,
    original: usize,
    /// In the module's RELRO range: made read-only again after each write.
    read_only: bool,
}

/// The rewritten slots, in order; guarded by [`BUSY`].
static mut SLOTS: [Slot; MAX_SLOTS] = [Slot {
    addr: 0,
    original: 0,
    read_only: false,
}; MAX_SLOTS];
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// Slots that did not fit in [`SLOTS`].
static OVERFLOW: AtomicUsize = AtomicUsize::new(0);
static BUSY: AtomicBool = AtomicBool::new(false);
/// The loader's `dlopen` as the first rewritten slot held it: what the hook calls.
static REAL_DLOPEN: AtomicUsize = AtomicUsize::new(0);

/// Runs `f` holding [`BUSY`] (a spin lock: patching is rare and short).
fn locked<T>(f: impl FnOnce() -> T) -> T {
    while BUSY
        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        core::hint::spin_loop();
    }
    let r = f();
    BUSY.store(false, Ordering::Release);
    r
}

/// The function a slot for symbol `name` is pointed at, if it is one this library replaces.
fn hook_for(name: &[u8]) -> Option<usize> {
    use crate::hooks;
    Some(match name {
        b"malloc" => hooks::attached_malloc as *const () as usize,
        b"free" => hooks::attached_free as *const () as usize,
        b"cfree" => hooks::attached_cfree as *const () as usize,
        b"calloc" => hooks::attached_calloc as *const () as usize,
        b"realloc" => hooks::attached_realloc as *const () as usize,
        b"reallocarray" => hooks::attached_reallocarray as *const () as usize,
        b"posix_memalign" => hooks::attached_posix_memalign as *const () as usize,
        b"aligned_alloc" => hooks::attached_aligned_alloc as *const () as usize,
        b"memalign" => hooks::attached_memalign as *const () as usize,
        b"valloc" => hooks::attached_valloc as *const () as usize,
        b"pvalloc" => hooks::attached_pvalloc as *const () as usize,
        b"mmap" => crate::mmap::attached_mmap as *const () as usize,
        b"mmap64" => crate::mmap::attached_mmap64 as *const () as usize,
        b"munmap" => crate::mmap::attached_munmap as *const () as usize,
        b"mremap" => crate::mmap::attached_mremap as *const () as usize,
        b"dlopen" => dlopen_hook as *const () as usize,
        _ => return None,
    })
}

/// Rewrites the slots of every loaded module but this library and the dynamic loader;
/// slots already rewritten are left as they are. Returns how many slots are rewritten in all.
pub fn patch_all() -> usize {
    locked(|| {
        // SAFETY: the callback only reads the loader's module descriptions.
        unsafe { libc::dl_iterate_phdr(Some(patch_module), core::ptr::null_mut()) };
        COUNT.load(Ordering::Acquire)
    })
}

/// Puts every rewritten slot back; returns how many.
pub fn restore_all() -> usize {
    locked(|| {
        let n = COUNT.swap(0, Ordering::AcqRel);
        for i in 0..n {
            // SAFETY: BUSY is held; the slot addresses were writable when rewritten and stay
            // mapped while their module is loaded (a module unloaded since has no callers).
            unsafe {
                let s = (*core::ptr::addr_of!(SLOTS))[i];
                write_slot(s.addr, s.original);
                if s.read_only {
                    protect(s.addr, libc::PROT_READ);
                }
            }
        }
        n
    })
}

/// `dlopen` for modules loaded after the attach: the loader's, then the new modules' slots.
/// (glibc picks the search path from its caller; called from here, a library that relies on
/// its caller's RUNPATH to find a dependency by bare name may not be found.)
unsafe extern "C" fn dlopen_hook(file: *const c_char, mode: c_int) -> *mut c_void {
    type Dlopen = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;
    let real = REAL_DLOPEN.load(Ordering::Acquire);
    if real == 0 {
        return core::ptr::null_mut();
    }
    // SAFETY: the address is the loader's dlopen, as the slot held it.
    let h = unsafe { core::mem::transmute::<usize, Dlopen>(real)(file, mode) };
    if crate::record::active() {
        patch_all();
    }
    h
}

/// Word reads of the module's memory.
unsafe fn word(addr: usize) -> usize {
    // SAFETY: the caller passes an address inside a loaded module's dynamic data.
    unsafe { core::ptr::read_unaligned(addr as *const usize) }
}

unsafe extern "C" fn patch_module(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    _data: *mut c_void,
) -> c_int {
    // SAFETY: the loader passes a valid description for the call's duration.
    let info = unsafe { &*info };
    let name = if info.dlpi_name.is_null() {
        &b""[..]
    } else {
        // SAFETY: a NUL-terminated name owned by the loader.
        unsafe { core::ffi::CStr::from_ptr(info.dlpi_name) }.to_bytes()
    };
    let own = patch_module as *const () as usize;
    let base = info.dlpi_addr as usize;
    let mut dynamic = 0usize;
    let mut relro = (0usize, 0usize);
    let mut is_own = false;
    for i in 0..info.dlpi_phnum as usize {
        // SAFETY: dlpi_phdr has dlpi_phnum entries.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        let (start, len) = (base + ph.p_vaddr as usize, ph.p_memsz as usize);
        match ph.p_type {
            libc::PT_DYNAMIC => dynamic = start,
            libc::PT_GNU_RELRO => relro = (start, start + len),
            libc::PT_LOAD if own >= start && own < start + len => is_own = true,
            _ => {}
        }
    }
    let is_loader = name.windows(3).any(|w| w == b"ld-") || name.windows(6).any(|w| w == b"ld.so.");
    if dynamic == 0 || is_own || is_loader {
        return 0;
    }
    // SAFETY: the dynamic section of a loaded module, terminated by DT_NULL.
    unsafe { patch_dynamic(base, dynamic, relro) };
    0
}

/// The relocation tables of one module's dynamic section, and the slots they name rewritten.
unsafe fn patch_dynamic(base: usize, dynamic: usize, relro: (usize, usize)) {
    const W: usize = core::mem::size_of::<usize>();
    let (mut strtab, mut symtab, mut jmprel, mut pltrelsz, mut pltrel) = (0, 0, 0, 0, 0);
    let (mut rela, mut relasz, mut rel, mut relsz) = (0, 0, 0, 0);
    let mut at = dynamic;
    for _ in 0..4096 {
        // SAFETY: within the dynamic section until DT_NULL.
        let (tag, val) = unsafe { (word(at), word(at + W)) };
        at += 2 * W;
        // Most loaders relocate the pointers in place; some (read-only dynamic sections)
        // leave them as offsets from the load address.
        let ptr = if val < base { val + base } else { val };
        match tag as i64 {
            0 => break,
            5 => strtab = ptr,   // DT_STRTAB
            6 => symtab = ptr,   // DT_SYMTAB
            23 => jmprel = ptr,  // DT_JMPREL
            2 => pltrelsz = val, // DT_PLTRELSZ
            20 => pltrel = val,  // DT_PLTREL
            7 => rela = ptr,     // DT_RELA
            8 => relasz = val,   // DT_RELASZ
            17 => rel = ptr,     // DT_REL
            18 => relsz = val,   // DT_RELSZ
            _ => {}
        }
    }
    if strtab == 0 || symtab == 0 {
        return;
    }
    let table = Tables {
        base,
        strtab,
        symtab,
        relro,
    };
    // SAFETY: the tables the dynamic section names, of the sizes it gives.
    unsafe {
        if jmprel != 0 {
            table.relocations(jmprel, pltrelsz, pltrel == 7); // DT_RELA = 7
        }
        if rela != 0 {
            table.relocations(rela, relasz, true);
        }
        if rel != 0 {
            table.relocations(rel, relsz, false);
        }
    }
}

/// One module's symbol and string tables.
struct Tables {
    base: usize,
    strtab: usize,
    symtab: usize,
    relro: (usize, usize),
}

/// Whether relocation type `t` fills a slot with a symbol's address (GLOB_DAT, JUMP_SLOT).
fn is_slot_type(t: usize) -> bool {
    #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
    return t == 6 || t == 7;
    #[cfg(target_arch = "aarch64")]
    return t == 1025 || t == 1026;
    #[cfg(target_arch = "arm")]
    return t == 21 || t == 22;
    #[cfg(target_arch = "riscv64")]
    return t == 5 || t == 2;
    #[allow(unreachable_code)]
    false
}

impl Tables {
    /// Rewrites the slots of the `size` bytes of relocations at `at` (with addends: RELA).
    unsafe fn relocations(&self, at: usize, size: usize, with_addend: bool) {
        const W: usize = core::mem::size_of::<usize>();
        let entry = if with_addend { 3 * W } else { 2 * W };
        let mut off = 0;
        while off + entry <= size {
            // SAFETY: inside the relocation table.
            let (r_offset, r_info) = unsafe { (word(at + off), word(at + off + W)) };
            off += entry;
            // ELF64_R_SYM/ELF64_R_TYPE, or the 32-bit forms.
            #[cfg(target_pointer_width = "64")]
            let (sym, kind) = (r_info >> 32, r_info & 0xffff_ffff);
            #[cfg(target_pointer_width = "32")]
            let (sym, kind) = (r_info >> 8, r_info & 0xff);
            if sym == 0 || !is_slot_type(kind) {
                continue;
            }
            // SAFETY: a symbol index of this module's table.
            let Some(hook) = (unsafe { self.symbol_name(sym) }).and_then(hook_for) else {
                continue;
            };
            // SAFETY: the slot is in this module's relocated data.
            unsafe { self.rewrite(self.base + r_offset, hook) };
        }
    }

    /// The name of symbol `index`.
    unsafe fn symbol_name(&self, index: usize) -> Option<&'static [u8]> {
        const W: usize = core::mem::size_of::<usize>();
        // Elf64_Sym is 24 bytes with the name first; Elf32_Sym 16.
        let size = if W == 8 { 24 } else { 16 };
        // SAFETY: st_name is the first 32-bit word of the entry.
        let st_name =
            unsafe { core::ptr::read_unaligned((self.symtab + index * size) as *const u32) };
        let p = (self.strtab + st_name as usize) as *const c_char;
        // SAFETY: a NUL-terminated string of the module's string table.
        Some(unsafe { core::ffi::CStr::from_ptr(p) }.to_bytes())
    }

    /// Points `slot` at `hook`, remembering what it held, unless it is ours already.
    unsafe fn rewrite(&self, slot: usize, hook: usize) {
        // SAFETY: a relocated slot of a loaded module.
        let old = unsafe { word(slot) };
        if old == hook || old == 0 {
            return;
        }
        let n = COUNT.load(Ordering::Acquire);
        if n >= MAX_SLOTS {
            OVERFLOW.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if hook == dlopen_hook as *const () as usize {
            let _ = REAL_DLOPEN.compare_exchange(0, old, Ordering::AcqRel, Ordering::Acquire);
        }
        let read_only = slot >= self.relro.0 && slot < self.relro.1;
        // SAFETY: BUSY is held by patch_all, the only caller.
        unsafe {
            if write_slot(slot, hook) {
                (*core::ptr::addr_of_mut!(SLOTS))[n] = Slot {
                    addr: slot,
                    original: old,
                    read_only,
                };
                COUNT.store(n + 1, Ordering::Release);
            }
            if read_only {
                protect(slot, libc::PROT_READ);
            }
        }
    }
}

/// Writes `value` into the slot, making its page writable first; false when that failed.
unsafe fn write_slot(slot: usize, value: usize) -> bool {
    // SAFETY: the caller passes a slot of a loaded module.
    unsafe {
        if !protect(slot, libc::PROT_READ | libc::PROT_WRITE) {
            return false;
        }
        core::ptr::write_volatile(slot as *mut usize, value);
    }
    true
}

/// mprotect of the page holding `addr`.
unsafe fn protect(addr: usize, prot: c_int) -> bool {
    // SAFETY: sysconf has no preconditions.
    let page = (unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize).max(4096);
    let start = addr & !(page - 1);
    // SAFETY: changing the protection of a page of a loaded module.
    unsafe { libc::mprotect(start as *mut c_void, page, prot) == 0 }
}
