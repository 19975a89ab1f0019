//! The kernel's per-CPU ring buffer of perf records, read in place (a record that wraps
//! around the end of the buffer is copied).
//!
//! Layout: one metadata page (`struct perf_event_mmap_page`) followed by 2^n data pages. The
//! kernel advances `data_head`; we read records between our tail and the head and then publish
//! the new `data_tail`, which lets the kernel reuse the space. When we fall behind, the kernel
//! drops records and says so with a LOST record instead of stalling the application.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicU64, Ordering};

// Offsets in `struct perf_event_mmap_page`, stable kernel ABI.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;
const DATA_OFFSET: usize = 1040;
const DATA_SIZE: usize = 1048;

/// A mapped ring buffer. Owns the mapping, not the event descriptor.
pub struct Ring {
    base: *mut u8,
    map_len: usize,
    data: *const u8,
    size: u64,
}

// SAFETY: the mapping is only touched through &mut self, from one thread at a time.
unsafe impl Send for Ring {}

impl Ring {
    /// Maps the ring of `fd` with `data_pages` (a power of two) data pages.
    pub fn map(fd: &OwnedFd, data_pages: usize, page_size: usize) -> io::Result<Ring> {
        let map_len = (data_pages + 1) * page_size;
        // SAFETY: a fresh shared mapping of a perf fd; the kernel validates the size.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = base as *mut u8;
        // Kernels before 4.1 leave data_offset/data_size zero: data starts at the second page.
        // SAFETY: the metadata page is mapped and at least one page long.
        let (offset, size) = unsafe {
            let off = std::ptr::read_volatile(base.add(DATA_OFFSET) as *const u64) as usize;
            let size = std::ptr::read_volatile(base.add(DATA_SIZE) as *const u64);
            (off, size)
        };
        let (offset, size) = if offset == 0 || size == 0 {
            (page_size, (data_pages * page_size) as u64)
        } else {
            (offset, size)
        };
        Ok(Ring {
            base,
            map_len,
            // SAFETY: offset lies within the mapping (kernel ABI).
            data: unsafe { base.add(offset) },
            size,
        })
    }

    fn head(&self) -> &AtomicU64 {
        // SAFETY: aligned u64 in the mapped metadata page, written by the kernel.
        unsafe { &*(self.base.add(DATA_HEAD) as *const AtomicU64) }
    }

    fn tail(&self) -> &AtomicU64 {
        // SAFETY: aligned u64 in the mapped metadata page, written by us.
        unsafe { &*(self.base.add(DATA_TAIL) as *const AtomicU64) }
    }

    /// Calls `f` with each complete record (header included) now in the ring, then releases
    /// its space. A record is handed over where it lies in the ring, without a copy; only
    /// one that wraps around the end of the buffer is copied into `scratch` first. Returns
    /// true when a record header was impossible and the rest of the ring was skipped (a
    /// resynchronization: the caller reports the loss).
    pub fn drain(&mut self, scratch: &mut Vec<u8>, mut f: impl FnMut(&[u8])) -> bool {
        let mut resynced = false;
        let head = self.head().load(Ordering::Acquire);
        let mut tail = self.tail().load(Ordering::Relaxed);
        while tail < head {
            let mut hdr = [0u8; 8];
            self.copy(tail, &mut hdr);
            let size = u16::from_ne_bytes([hdr[6], hdr[7]]) as u64;
            if size < 8 || tail + size > head {
                // Cannot happen with a sane kernel; resynchronize rather than loop.
                tail = head;
                resynced = true;
                break;
            }
            let start = (tail % self.size) as usize;
            if start + size as usize <= self.size as usize {
                // SAFETY: the record lies inside the data area, between our tail and the
                // kernel's head, so the kernel does not write there until we move the tail.
                f(unsafe { std::slice::from_raw_parts(self.data.add(start), size as usize) });
            } else {
                scratch.clear();
                scratch.resize(size as usize, 0);
                self.copy(tail, scratch);
                f(scratch);
            }
            tail += size;
            // Each record's space goes back at once: the kernel writes on while we work.
            self.tail().store(tail, Ordering::Release);
        }
        fence(Ordering::Release);
        self.tail().store(tail, Ordering::Release);
        resynced
    }

    fn copy(&self, pos: u64, out: &mut [u8]) {
        let start = (pos % self.size) as usize;
        let first = out.len().min(self.size as usize - start);
        // SAFETY: both ranges lie inside the data area of `size` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(self.data.add(start), out.as_mut_ptr(), first);
            if first < out.len() {
                std::ptr::copy_nonoverlapping(
                    self.data,
                    out.as_mut_ptr().add(first),
                    out.len() - first,
                );
            }
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what map() mapped.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.map_len);
        }
    }
}
