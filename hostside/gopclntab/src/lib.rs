//! crossprof-gopclntab: Go's own function table, read on the host.
//!
//! Go binaries carry no `.eh_frame` for Go code, and a stripped one (as distributions ship
//! them, and as `go build -ldflags=-s` makes them) has no `.symtab` or DWARF either. What every
//! Go binary keeps, stripped or not, is the table the Go runtime itself uses for tracebacks
//! and `runtime.Callers`: `.gopclntab`. It names every function as Go prints it, maps each
//! instruction to its file and line, and gives each instruction's stack-frame size, which is
//! exactly what unwinding a Go frame needs (the return address lies just above the frame). It
//! also marks the functions where a stack ends (`runtime.goexit`, `runtime.mstart`) and those
//! that switch stacks (`runtime.systemstack`, `runtime.mcall`).
//!
//! No well-kept Rust crate reads this format (Go's own `debug/gosym` is the reference reader),
//! so it is written here, bounds-checked throughout: every lookup on a damaged table yields
//! `None`, never a panic, and costs at most one pass over the bytes it reads. Go 1.16 and
//! later are read (the layouts with magic `0xfffffffa`, `0xfffffff0` and `0xfffffff1`); older
//! tables are reported as unsupported.
//!
//! ```no_run
//! # fn f(elf: &[u8]) -> Option<()> {
//! let file = object::File::parse(elf).ok()?;
//! let at = crossprof_gopclntab::locate(&file, elf)?;
//! let table = crossprof_gopclntab::GoTable::new(&elf[at.file_range.clone()], at.text_start).ok()?;
//! let f = table.func_at(0x48_1234)?;
//! println!("{} at {:?}, frame {:?}", f.name()?, f.file_line(0x48_1234), f.sp_delta(0x48_1234));
//! # Some(()) }
//! ```
#![deny(missing_docs)]

mod func;
mod header;
mod locate;
mod pcvalue;

pub use func::Func;
pub use header::Version;
pub use locate::{locate, Location};

use header::{uint, Header};

/// Why bytes are not a usable Go function table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The bytes do not start with a Go function table's header.
    #[error("not a Go function table")]
    NotATable,
    /// A Go table of a layout this crate does not read.
    #[error("a Go function table of {0}, which is not supported")]
    Unsupported(&'static str),
    /// The table ends inside its header.
    #[error("the Go function table is truncated")]
    Truncated,
    /// A header field points outside the table.
    #[error("the Go function table is corrupt: {0}")]
    Corrupt(&'static str),
}

/// A Go function table over bytes `D` (a slice, or a handle into a mapped file).
#[derive(Debug, Clone)]
pub struct GoTable<D> {
    data: D,
    h: Header,
}

impl<D: std::ops::Deref<Target = [u8]>> GoTable<D> {
    /// Checks the header of the table `data` holds (from its magic number to at least its
    /// last sub-table). `text_start` is the address function offsets count from when the
    /// header leaves it to a dynamic relocation (see [`Location::text_start`]). Reads nothing
    /// past the header: lookups read what they need.
    pub fn new(data: D, text_start: Option<u64>) -> Result<GoTable<D>, Error> {
        let mut h = Header::parse(&data)?;
        if h.text_start == 0 {
            h.text_start = text_start.unwrap_or(0);
        }
        Ok(GoTable { data, h })
    }

    /// The layout the table has, which tells the Go release range that linked it.
    pub fn version(&self) -> Version {
        self.h.version
    }

    /// Number of functions.
    pub fn len(&self) -> usize {
        self.h.nfunc
    }

    /// Whether the table lists no function.
    pub fn is_empty(&self) -> bool {
        self.h.nfunc == 0
    }

    /// The i-th (entry, record offset) pair of the function index.
    fn index(&self, i: usize) -> Option<(u64, usize)> {
        let data: &[u8] = &self.data;
        let at = self
            .h
            .functab
            .checked_add(i.checked_mul(self.h.index_entry_size())?)?;
        let (entry, record) = match self.h.version {
            Version::Go116 => {
                let p = self.h.ptr;
                (
                    uint(data, at, p, self.h.big_endian)?,
                    uint(data, at + usize::from(p), p, self.h.big_endian)?,
                )
            }
            _ => (
                self.h
                    .text_start
                    .checked_add(uint(data, at, 4, self.h.big_endian)?)?,
                uint(data, at + 4, 4, self.h.big_endian)?,
            ),
        };
        Some((entry, usize::try_from(record).ok()?))
    }

    /// The stated address range the table covers: from the first function's entry to the end
    /// of the last.
    pub fn range(&self) -> Option<std::ops::Range<u64>> {
        Some(self.index(0)?.0..self.index(self.h.nfunc)?.0)
    }

    /// The function containing the stated address `pc`. A binary search over the index:
    /// O(log n) reads, whatever the bytes hold.
    pub fn func_at(&self, pc: u64) -> Option<Func<'_>> {
        let (mut lo, mut hi) = (0usize, self.h.nfunc);
        if pc < self.index(0)?.0 || pc >= self.index(hi)?.0 {
            return None;
        }
        // Invariant: entry(lo) <= pc < entry(hi).
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.index(mid)?.0 <= pc {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let (entry, record) = self.index(lo)?;
        let end = self.index(lo + 1)?.0;
        let record = self.h.functab.checked_add(record)?;
        Some(Func {
            data: &self.data,
            h: &self.h,
            entry,
            end,
            record,
        })
    }
}

#[cfg(test)]
mod tests;
