//! The loaded modules, from `dl_iterate_phdr`: each one's address range and, for unwinding,
//! its `.eh_frame_hdr` and `.eh_frame` as they sit in memory (no file is read).
//!
//! `dl_iterate_phdr` takes the loader's lock, and the loader allocates and frees with it held,
//! so it is never called from inside an allocation once the interposer is initialized: the
//! list is taken at load time and again each time `dlopen` (musl) or `dlclose` returns
//! (`crate::dl`); on glibc a module loaded since is found by address with the lock-free
//! `_dl_find_object` ([`super::find`]).

// The ELF fields are u32 on 32-bit targets: the `as u64` casts are needed there.
#![allow(clippy::unnecessary_cast)]

use alloc::vec::Vec;

/// A program header of this target's ELF class.
#[cfg(target_pointer_width = "64")]
pub(crate) type Phdr = libc::Elf64_Phdr;
/// A program header of this target's ELF class.
#[cfg(target_pointer_width = "32")]
pub(crate) type Phdr = libc::Elf32_Phdr;

/// One loaded module. (Only framehop reads the unwind fields; `_Unwind_Backtrace` finds
/// the tables itself.)
#[derive(Clone, Debug)]
#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(dead_code)
)]
pub struct Loaded {
    /// Load bias (`dlpi_addr`).
    pub bias: u64,
    /// Lowest and one-past-highest address of its PT_LOAD segments.
    pub range: core::ops::Range<u64>,
    /// `.eh_frame_hdr` (address, length) in memory, if present.
    pub eh_frame_hdr: Option<(u64, u64)>,
    /// `.eh_frame` (address, length up to the end of its segment), if found.
    pub eh_frame: Option<(u64, u64)>,
}

/// All modules now loaded.
#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(dead_code)
)]
pub fn loaded() -> Vec<Loaded> {
    let mut out: Vec<Loaded> = Vec::new();
    // SAFETY: the callback only reads the phdr array the loader hands it.
    unsafe {
        libc::dl_iterate_phdr(
            Some(callback),
            &mut out as *mut Vec<Loaded> as *mut libc::c_void,
        )
    };
    out
}

#[cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(dead_code)
)]
unsafe extern "C" fn callback(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: data is the Vec passed by `loaded`; info is valid for this call.
    let (out, info) = unsafe { (&mut *(data as *mut Vec<Loaded>), &*info) };
    if info.dlpi_phdr.is_null() {
        return 0;
    }
    // SAFETY: the loader gives dlpi_phnum headers at dlpi_phdr.
    let phdrs = unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    if let Some(l) = from_phdrs(info.dlpi_addr as u64, phdrs) {
        out.push(l);
    }
    0
}

/// The module with load bias `bias` and program headers `phdrs`, which the loader has mapped
/// (its `.eh_frame_hdr` is read in place); `None` when it has no loadable segment.
pub(crate) fn from_phdrs(bias: u64, phdrs: &[Phdr]) -> Option<Loaded> {
    let mut lo = u64::MAX;
    let mut hi = 0;
    let mut hdr = None;
    for ph in phdrs {
        if ph.p_type == libc::PT_LOAD {
            lo = lo.min(bias + ph.p_vaddr as u64);
            hi = hi.max(bias + ph.p_vaddr as u64 + ph.p_memsz as u64);
        } else if ph.p_type == libc::PT_GNU_EH_FRAME {
            hdr = Some((bias + ph.p_vaddr as u64, ph.p_memsz as u64));
        }
    }
    if lo >= hi {
        return None;
    }
    let eh_frame = hdr.and_then(|(a, len)| {
        // SAFETY: the header lies in mapped memory (PT_GNU_EH_FRAME is inside a PT_LOAD).
        let bytes = unsafe { core::slice::from_raw_parts(a as *const u8, len as usize) };
        let start = eh_frame_ptr(bytes, a)?;
        // The section's length is not in the header: give everything to the end of the
        // segment that holds it; the parser stops at the terminator or at what it needs.
        let end = phdrs
            .iter()
            .filter(|ph| ph.p_type == libc::PT_LOAD)
            .map(|ph| {
                (
                    bias + ph.p_vaddr as u64,
                    bias + ph.p_vaddr as u64 + ph.p_filesz as u64,
                )
            })
            .find(|&(s, e)| start >= s && start < e)?
            .1;
        Some((start, end - start))
    });
    Some(Loaded {
        bias,
        range: lo..hi,
        eh_frame_hdr: hdr,
        eh_frame,
    })
}

/// Decodes `eh_frame_ptr` from an `.eh_frame_hdr` at address `at`.
pub fn eh_frame_ptr(hdr: &[u8], at: u64) -> Option<u64> {
    let (&version, &enc) = (hdr.first()?, hdr.get(1)?);
    if version != 1 {
        return None;
    }
    let field = 4;
    let rel = match enc & 0x70 {
        0x00 => 0,
        0x10 => at + field as u64, // pcrel
        _ => return None,
    };
    let v = match enc & 0x0f {
        0x03 => u32::from_ne_bytes(hdr.get(field..field + 4)?.try_into().ok()?) as u64,
        0x0b => i32::from_ne_bytes(hdr.get(field..field + 4)?.try_into().ok()?) as i64 as u64,
        0x04 | 0x0c => u64::from_ne_bytes(hdr.get(field..field + 8)?.try_into().ok()?),
        0x00 if core::mem::size_of::<usize>() == 8 => {
            u64::from_ne_bytes(hdr.get(field..field + 8)?.try_into().ok()?)
        }
        0x00 => u32::from_ne_bytes(hdr.get(field..field + 4)?.try_into().ok()?) as u64,
        _ => return None,
    };
    Some(rel.wrapping_add(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcrel_sdata4_pointer_decodes() {
        let mut h = vec![1u8, 0x1b, 0x03, 0x3b];
        h.extend_from_slice(&(-0x100i32).to_ne_bytes());
        assert_eq!(eh_frame_ptr(&h, 0x1000), Some(0x1004 - 0x100));
        assert_eq!(eh_frame_ptr(&[2, 0x1b, 0, 0, 0, 0, 0, 0], 0), None);
    }

    #[test]
    fn this_process_has_modules_with_unwind_info() {
        let m = loaded();
        assert!(!m.is_empty());
        assert!(m.iter().any(|l| l.eh_frame.is_some()));
    }
}
