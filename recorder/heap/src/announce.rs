//! The loaded modules described to `rec` (path as this process sees it, executable segments,
//! build-id), for a process whose maps do not show the code it runs: one emulated by
//! qemu-user, whose host maps hold the guest's code as data (`r--p`) and under the host's
//! paths. `rec` says in the ring's header whether it wants them (see the wire crate's
//! `module`); for a native process it reads its maps itself and the interposer stops
//! sending them once told.
//!
//! The list is taken with `dl_iterate_phdr` where the module list the unwinder uses is taken
//! (at load time and when `dlopen` (musl) or `dlclose` return, outside any allocation: see
//! `crate::dl`; not again once rec has said it does not want them), and sent whole after each
//! such rescan and after each connect (a fork child sends it on its own ring). A module
//! loaded since (glibc does not wrap `dlopen`) is found by address when a new trace-tree node
//! meets it ([`List::cover`]), with `_dl_find_object`, which takes no lock: nothing here
//! takes the loader's lock inside an allocation. Allocates from the interposer's arena only
//! (the copies of paths and build-ids).

// The ELF fields are u32 on 32-bit targets: the `as u64` casts are needed there.
#![allow(clippy::unnecessary_cast)]

use alloc::vec::Vec;
use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicBool, Ordering};

use crate::stack::modules::Phdr;
use crate::transport::Producer;

/// Cleared once rec has said it does not want this process's modules (a native process,
/// which never becomes an emulated one): rescans then stop describing them ([`wanted`]).
static WANTED: AtomicBool = AtomicBool::new(true);

/// Whether describing the modules may still be of use: rec has not said it does not want
/// them (as far as this process has seen).
pub fn wanted() -> bool {
    WANTED.load(Ordering::Relaxed)
}

/// Whether rec wants `p`'s module events, noting it when it does not.
fn still_wanted(p: &Producer) -> bool {
    let w = p.modules_wanted();
    if !w {
        WANTED.store(false, Ordering::Relaxed);
    }
    w
}

/// One executable segment: its page-aligned address range and file offset, as a mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    start: u64,
    len: u64,
    pgoff: u64,
    prot: u64,
}

impl Segment {
    /// Whether address `at` lies in the segment.
    fn contains(&self, at: u64) -> bool {
        self.start <= at && at - self.start < self.len
    }
}

/// One module as described to rec.
#[derive(Clone, Debug)]
struct Described {
    path: Vec<u8>,
    build_id: Vec<u8>,
    segments: Vec<Segment>,
}

/// The modules described, in the order the loader lists them.
pub struct List {
    modules: Vec<Described>,
}

impl List {
    /// No module.
    pub const fn new() -> List {
        List {
            modules: Vec::new(),
        }
    }

    /// The modules loaded now. Takes the loader's lock (`dl_iterate_phdr`): only from outside
    /// any allocation (load time, after `dlopen`/`dlclose` returned).
    pub fn take() -> List {
        let mut out = List::new();
        // SAFETY: the callback only reads what the loader hands it.
        unsafe {
            libc::dl_iterate_phdr(Some(collect), &mut out as *mut List as *mut c_void);
        }
        out
    }

    /// Sends every module. `false` when rec is gone.
    pub fn send(&self, p: &mut Producer, tid: u32, time: u64) -> bool {
        if !still_wanted(p) {
            return true;
        }
        self.modules.iter().all(|m| send_one(m, p, tid, time))
    }

    /// Makes sure the module that holds the return address `ip` (of a new trace-tree node)
    /// was described: when no module of the list holds it, finds it by address without a
    /// lock (glibc's `_dl_find_object`), adds it and sends it. Signal-safe but for the
    /// arena allocation of the copy. `false` when rec is gone.
    pub fn cover(&mut self, p: &mut Producer, tid: u32, time: u64, ip: u64) -> bool {
        // A return address may be one past its call's segment (a call that never returns).
        let at = ip.wrapping_sub(1);
        if crossprof_heap_wire::cut_short::name(ip).is_some()
            || cfg!(target_arch = "arm")
            || !still_wanted(p)
            || self.holds(at)
        {
            return true;
        }
        let Some(m) = by_address(at) else {
            return true;
        };
        let ok = send_one(&m, p, tid, time);
        self.modules.push(m);
        ok
    }

    fn holds(&self, at: u64) -> bool {
        self.modules
            .iter()
            .any(|m| m.segments.iter().any(|s| s.contains(at)))
    }
}

fn send_one(m: &Described, p: &mut Producer, tid: u32, time: u64) -> bool {
    m.segments.iter().all(|s| {
        p.module(
            tid,
            [time, s.start, s.len, s.pgoff, s.prot],
            &m.build_id,
            &m.path,
        )
    })
}

unsafe extern "C" fn collect(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
    // SAFETY: data is the List passed by `take`; info is valid for this call.
    let (out, info) = unsafe { (&mut *(data as *mut List), &*info) };
    if info.dlpi_phdr.is_null() {
        return 0;
    }
    // SAFETY: the loader gives dlpi_phnum headers at dlpi_phdr.
    let phdrs = unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    if let Some(m) = describe(info.dlpi_addr as u64, info.dlpi_name, phdrs) {
        out.modules.push(m);
    }
    0
}

/// The module loaded with bias `bias`, name `name` (the loader's) and program headers
/// `phdrs`; `None` when it has no executable segment or no file (the vDSO).
fn describe(bias: u64, name: *const c_char, phdrs: &[Phdr]) -> Option<Described> {
    let mut segments = Vec::new();
    for ph in phdrs {
        if ph.p_type != libc::PT_LOAD || ph.p_flags & libc::PF_X == 0 || ph.p_memsz == 0 {
            continue;
        }
        let (vaddr, offset, memsz) = (
            bias + ph.p_vaddr as u64,
            ph.p_offset as u64,
            ph.p_memsz as u64,
        );
        // Page-aligned like a mapping when address and offset agree modulo a page (they
        // agree modulo the segment's alignment, at least a page, for everything `ld` links).
        let page = 4096;
        let back = if vaddr.wrapping_sub(offset) % page == 0 {
            vaddr % page
        } else {
            0
        };
        segments.push(Segment {
            start: vaddr - back,
            len: memsz + back,
            pgoff: offset - back,
            prot: prot_of(ph.p_flags),
        });
    }
    if segments.is_empty() {
        return None;
    }
    let path = path_of(name, phdrs)?;
    Some(Described {
        path,
        build_id: build_id(bias, phdrs),
        segments,
    })
}

fn prot_of(flags: u32) -> u64 {
    let mut prot = 0;
    if flags & libc::PF_R != 0 {
        prot |= libc::PROT_READ;
    }
    if flags & libc::PF_W != 0 {
        prot |= libc::PROT_WRITE;
    }
    if flags & libc::PF_X != 0 {
        prot |= libc::PROT_EXEC;
    }
    prot as u64
}

/// The module's path as this process sees it: the loader's name; for the main program (whose
/// headers are the auxiliary vector's) `/proc/self/exe`, which qemu-user answers with the
/// guest's program; a relative name is made absolute with the working directory. `None` for
/// a name without a directory (the vDSO's `linux-vdso.so.1`).
fn path_of(name: *const c_char, phdrs: &[Phdr]) -> Option<Vec<u8>> {
    // SAFETY: getauxval has no preconditions.
    let main = unsafe { libc::getauxval(libc::AT_PHDR) } as usize == phdrs.as_ptr() as usize;
    let name: &[u8] = if name.is_null() {
        &[]
    } else {
        // SAFETY: the loader's NUL-terminated name of a loaded module.
        unsafe { core::ffi::CStr::from_ptr(name) }.to_bytes()
    };
    if main {
        return with_path_buffer(|buf| {
            // SAFETY: a plain system call into a buffer of the given size.
            let n = unsafe {
                libc::readlink(
                    c"/proc/self/exe".as_ptr(),
                    buf.as_mut_ptr() as *mut c_char,
                    buf.len(),
                )
            };
            (n > 0).then(|| buf[..n as usize].to_vec())
        });
    }
    if name.first() == Some(&b'/') {
        return Some(name.to_vec());
    }
    if !name.contains(&b'/') {
        return None;
    }
    with_path_buffer(|buf| {
        // SAFETY: getcwd writes at most buf.len() bytes, NUL included.
        let cwd = unsafe { libc::getcwd(buf.as_mut_ptr() as *mut c_char, buf.len()) };
        if cwd.is_null() {
            return Some(name.to_vec());
        }
        let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        let mut path = Vec::with_capacity(n + 1 + name.len());
        path.extend_from_slice(&buf[..n]);
        path.push(b'/');
        path.extend_from_slice(name.strip_prefix(b"./").unwrap_or(name));
        Some(path)
    })
}

/// Runs `f` with a path-sized buffer on the stack, in a frame of its own: the common case
/// (an absolute name, inside an allocation) does not take 4 KiB of the thread's stack.
#[inline(never)]
fn with_path_buffer<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    let mut buf = [0u8; crossprof_heap_wire::module::MAX_PATH];
    f(&mut buf)
}

/// The GNU build-id in the module's notes (read in place), empty when it has none.
fn build_id(bias: u64, phdrs: &[Phdr]) -> Vec<u8> {
    for ph in phdrs.iter().filter(|ph| ph.p_type == libc::PT_NOTE) {
        // SAFETY: a PT_NOTE segment lies inside a PT_LOAD one, which the loader mapped.
        let notes = unsafe {
            core::slice::from_raw_parts(
                (bias + ph.p_vaddr as u64) as usize as *const u8,
                ph.p_filesz as usize,
            )
        };
        if let Some(id) = gnu_build_id(notes) {
            return id.to_vec();
        }
    }
    Vec::new()
}

/// The descriptor of the `NT_GNU_BUILD_ID` note among `notes` (native byte order).
fn gnu_build_id(mut notes: &[u8]) -> Option<&[u8]> {
    let word = |b: &[u8], at: usize| -> Option<usize> {
        Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize)
    };
    let pad = |n: usize| n.div_ceil(4) * 4;
    while notes.len() >= 12 {
        let (namesz, descsz, kind) = (word(notes, 0)?, word(notes, 4)?, word(notes, 8)?);
        let name = notes.get(12..12 + namesz)?;
        let desc_at = 12 + pad(namesz);
        let desc = notes.get(desc_at..desc_at + descsz)?;
        if kind == 3 && name == b"GNU\0" {
            return Some(desc);
        }
        notes = notes.get(desc_at + pad(descsz)..)?;
    }
    None
}

// ---- by address, without the loader's lock (glibc) --------------------------------------

/// The module that holds `at`, described from the loader's data for it (lock-free); `None`
/// without `_dl_find_object` (musl, glibc before 2.35) or when no module holds it.
fn by_address(at: u64) -> Option<Described> {
    let (bias, name, phdrs) = crate::stack::find::loaded(at)?;
    let m = describe(bias, name, phdrs)?;
    m.segments.iter().any(|s| s.contains(at)).then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_describes_its_program_and_libc_with_build_ids() {
        let list = List::take();
        let me = this_process_describes_its_program_and_libc_with_build_ids as fn() as *const ()
            as usize;
        let own = list
            .modules
            .iter()
            .find(|m| {
                m.segments
                    .iter()
                    .any(|s| s.start <= me as u64 && (me as u64) < s.start + s.len)
            })
            .expect("the test program is listed");
        let exe = std::fs::read_link("/proc/self/exe").expect("exe");
        assert_eq!(own.path, exe.as_os_str().as_encoded_bytes());
        assert!(list
            .modules
            .iter()
            .any(|m| m.path.windows(4).any(|w| w == b"libc") && m.build_id.len() == 20));
        // Every segment is a mapping of the maps, with the same offset.
        let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
        for s in list.modules.iter().flat_map(|m| &m.segments) {
            let line = maps
                .lines()
                .find(|l| l.starts_with(&format!("{:x}-", s.start)))
                .unwrap_or_else(|| panic!("{s:?} not in {maps}"));
            let fields: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(
                u64::from_str_radix(fields[2], 16).ok(),
                Some(s.pgoff),
                "{line}"
            );
            assert!(fields[1].contains('x'), "{line}");
        }
    }

    #[test]
    #[cfg(target_env = "gnu")]
    fn a_module_is_found_by_address_as_the_list_has_it() {
        crate::stack::find::resolve();
        let me =
            a_module_is_found_by_address_as_the_list_has_it as fn() as *const () as usize as u64;
        let found = by_address(me).expect("own module");
        let listed = List::take()
            .modules
            .into_iter()
            .find(|m| m.path == found.path)
            .expect("listed");
        assert_eq!(found.segments, listed.segments);
        assert_eq!(found.build_id, listed.build_id);
        assert!(by_address(8).is_none());
    }

    #[test]
    fn notes_give_the_gnu_build_id() {
        let mut n = Vec::new();
        for (name, kind, desc) in [
            (&b"XY\0"[..], 1u32, &[1u8, 2, 3][..]),
            (b"GNU\0", 3, &[7; 20]),
        ] {
            n.extend_from_slice(&(name.len() as u32).to_ne_bytes());
            n.extend_from_slice(&(desc.len() as u32).to_ne_bytes());
            n.extend_from_slice(&kind.to_ne_bytes());
            n.extend_from_slice(name);
            n.resize(n.len().div_ceil(4) * 4, 0);
            n.extend_from_slice(desc);
            n.resize(n.len().div_ceil(4) * 4, 0);
        }
        assert_eq!(gnu_build_id(&n), Some(&[7u8; 20][..]));
        assert_eq!(gnu_build_id(&n[..20]), None);
    }
}
