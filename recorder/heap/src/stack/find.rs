//! One module by address, without the loader's lock: glibc's `_dl_find_object` (2.35 and
//! later), which glibc documents as lock-free and async-signal-safe and which libgcc's own
//! unwinder uses for the same reason. It is looked up once at load time ([`resolve`], with
//! `dlsym`, outside any allocation); where it is missing (musl, older glibc) [`find`] answers
//! `None` and modules loaded later are only picked up when `dlopen`/`dlclose` return
//! (`crate::dl`).
//!
//! The module's program headers are read from its ELF header, which its first loadable
//! segment maps at the start of the mapping `_dl_find_object` reports (as for every shared
//! object and executable that `ld` links); a header that does not check out gives `None`.

// The ELF fields are u32 on 32-bit targets: the `as u64` casts are needed there.
#![allow(clippy::unnecessary_cast)]

use core::ffi::{c_char, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

use super::modules::{from_phdrs, Loaded, Phdr};

/// glibc's `struct dl_find_object`: the fields read here, then room for the rest (the
/// architecture-specific fields and the reserved words, 64 bytes at most today).
#[repr(C)]
struct DlFindObject {
    flags: u64,
    map_start: *mut c_void,
    map_end: *mut c_void,
    link_map: *mut c_void,
    eh_frame: *mut c_void,
    rest: [u64; 16],
}

type FindFn = unsafe extern "C" fn(*mut c_void, *mut DlFindObject) -> i32;

static FIND: AtomicUsize = AtomicUsize::new(0);

/// Looks `_dl_find_object` up (load time only: `dlsym` takes the loader's lock).
pub fn resolve() {
    #[cfg(target_env = "gnu")]
    {
        // SAFETY: a NUL-terminated name; RTLD_DEFAULT lookups have no other precondition.
        let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"_dl_find_object".as_ptr()) };
        FIND.store(f as usize, Ordering::Release);
    }
}

/// The loaded module that holds `addr`, if any. Lock-free and async-signal-safe; allocates
/// nothing.
#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(dead_code)
)]
pub fn find(addr: u64) -> Option<Loaded> {
    let (bias, _, phdrs) = loaded(addr)?;
    from_phdrs(bias, phdrs)
}

/// The load bias, the loader's name (NUL-terminated, empty for the program) and the program
/// headers of the loaded module that holds `addr`, if any. Lock-free and
/// async-signal-safe, as [`find`].
pub fn loaded(addr: u64) -> Option<(u64, *const c_char, &'static [Phdr])> {
    let o = object(addr)?;
    if o.link_map.is_null() {
        return None;
    }
    // SAFETY: `l_addr` and `l_name`, the load bias and the name, are the first two fields
    // of every `struct link_map`, which stays valid while its module is loaded (the module
    // holding `addr` is).
    let (bias, name) = unsafe {
        let lm = o.link_map as *const usize;
        (*lm as u64, *(lm.add(1)) as *const c_char)
    };
    let phdrs = program_headers(o.map_start as usize, o.map_end as usize)?;
    Some((bias, name, phdrs))
}

/// The program headers (address and count) of the loaded module that holds `addr`, if any.
/// Lock-free and async-signal-safe, as [`find`].
#[cfg_attr(any(target_arch = "x86_64", target_arch = "aarch64"), allow(dead_code))]
pub fn headers(addr: u64) -> Option<(*const Phdr, u16)> {
    let o = object(addr)?;
    let p = program_headers(o.map_start as usize, o.map_end as usize)?;
    Some((p.as_ptr(), p.len() as u16))
}

/// `_dl_find_object`'s answer for `addr`, when it has one with a non-empty mapping.
/// Lock-free and async-signal-safe, as [`find`].
fn object(addr: u64) -> Option<DlFindObject> {
    let f = FIND.load(Ordering::Acquire);
    if f == 0 || addr == 0 || addr > usize::MAX as u64 {
        return None;
    }
    let mut o = empty();
    // SAFETY: the address came from dlsym("_dl_find_object"), whose signature this is; `o`
    // is larger than the structure it fills.
    if unsafe { core::mem::transmute::<usize, FindFn>(f)(addr as usize as *mut c_void, &mut o) }
        != 0
    {
        return None;
    }
    let (start, end) = (o.map_start as usize, o.map_end as usize);
    (start != 0 && end > start).then_some(o)
}

/// The program headers of the ELF image mapped at `[start, end)`, read in place.
fn program_headers(start: usize, end: usize) -> Option<&'static [Phdr]> {
    let wide = cfg!(target_pointer_width = "64");
    let header = if wide { 64 } else { 52 };
    if end - start < header {
        return None;
    }
    // SAFETY: `[start, start + header)` lies in the module's first mapped page.
    let h = unsafe { core::slice::from_raw_parts(start as *const u8, header) };
    if h[..4] != *b"\x7fELF" || h[4] != if wide { 2 } else { 1 } {
        return None;
    }
    let word = |at: usize, n: usize| -> usize {
        let mut v = 0usize;
        for (i, b) in h[at..at + n].iter().enumerate() {
            v |= (*b as usize) << (8 * i);
        }
        v
    };
    if cfg!(target_endian = "big") {
        return None;
    }
    let (phoff, phentsize, phnum) = if wide {
        (word(0x20, 8), word(0x36, 2), word(0x38, 2))
    } else {
        (word(0x1c, 4), word(0x2a, 2), word(0x2c, 2))
    };
    let bytes = phnum.checked_mul(core::mem::size_of::<Phdr>())?;
    if phentsize != core::mem::size_of::<Phdr>()
        || phoff % core::mem::align_of::<Phdr>() != 0
        || phoff.checked_add(bytes)? > end - start
        || phoff.checked_add(bytes)? > 4096
    {
        return None;
    }
    // SAFETY: the headers lie in the first page of the mapping (checked above), aligned.
    Some(unsafe { core::slice::from_raw_parts((start + phoff) as *const Phdr, phnum) })
}

fn empty() -> DlFindObject {
    DlFindObject {
        flags: 0,
        map_start: core::ptr::null_mut(),
        map_end: core::ptr::null_mut(),
        link_map: core::ptr::null_mut(),
        eh_frame: core::ptr::null_mut(),
        rest: [0; 16],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_env = "gnu")]
    fn finds_the_module_of_its_own_code_like_dl_iterate_phdr() {
        resolve();
        assert_ne!(
            FIND.load(Ordering::Acquire),
            0,
            "glibc 2.35 or later has _dl_find_object"
        );
        let me = finds_the_module_of_its_own_code_like_dl_iterate_phdr as fn() as usize as u64;
        let got = find(me).expect("own module");
        let want = super::super::modules::loaded()
            .into_iter()
            .find(|m| m.range.contains(&me))
            .expect("listed");
        assert_eq!((got.bias, got.range.clone()), (want.bias, want.range));
        assert_eq!(got.eh_frame_hdr, want.eh_frame_hdr);
        assert_eq!(got.eh_frame, want.eh_frame);
        assert!(find(8).is_none());
    }
}
