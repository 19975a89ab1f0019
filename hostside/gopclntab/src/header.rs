//! The table's header (`runtime.pcHeader`): which Go version laid it out, and where its
//! sub-tables lie.

use crate::Error;

/// The table layouts this crate reads, by the magic number their header starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// Go 1.16 and 1.17 (`0xfffffffa`): absolute entry addresses in the function index.
    Go116,
    /// Go 1.18 and 1.19 (`0xfffffff0`): entries as 32-bit offsets from the text start.
    Go118,
    /// Go 1.20 and later (`0xfffffff1`): as 1.18, each function record adds its start line.
    Go120,
}

/// The header's fields, with every offset checked to lie inside the table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Header {
    pub version: Version,
    pub big_endian: bool,
    /// Minimum instruction size: 1 on x86, 4 on ARM, AArch64 and most RISC targets.
    pub quantum: u8,
    /// Pointer size, 4 or 8.
    pub ptr: u8,
    pub nfunc: usize,
    /// The address function offsets count from (1.18 and later); 0 when the linker left it
    /// to a dynamic relocation (position-independent executables).
    pub text_start: u64,
    pub funcnames: usize,
    pub cutab: usize,
    pub filetab: usize,
    pub pctab: usize,
    /// The function index (`pclntab`): `nfunc + 1` (entry, record offset) pairs, then the
    /// records the offsets point to.
    pub functab: usize,
}

/// Reads an unsigned integer of `size` bytes (1 to 8) at `at`.
pub(crate) fn uint(data: &[u8], at: usize, size: u8, big_endian: bool) -> Option<u64> {
    let bytes = data.get(at..at.checked_add(usize::from(size))?)?;
    let mut v = 0u64;
    for i in 0..bytes.len() {
        let b = if big_endian {
            bytes[i]
        } else {
            bytes[bytes.len() - 1 - i]
        };
        v = v << 8 | u64::from(b);
    }
    Some(v)
}

/// The layout a header's magic number names, if it is one this crate reads.
pub(crate) fn version(magic: u64) -> Option<Version> {
    match magic {
        0xffff_fffa => Some(Version::Go116),
        0xffff_fff0 => Some(Version::Go118),
        0xffff_fff1 => Some(Version::Go120),
        _ => None,
    }
}

/// The magic number at the start of `data` read in either byte order, and which one matched.
fn magic(data: &[u8]) -> Option<(Version, bool)> {
    let le = uint(data, 0, 4, false)?;
    if let Some(v) = version(le) {
        return Some((v, false));
    }
    version(uint(data, 0, 4, true)?).map(|v| (v, true))
}

impl Header {
    /// Parses and checks the header at the start of `data` (the whole table).
    pub fn parse(data: &[u8]) -> Result<Header, Error> {
        let (version, big_endian) = match magic(data) {
            Some(m) => m,
            None if uint(data, 0, 4, false) == Some(0xffff_fffb) => {
                return Err(Error::Unsupported("Go 1.2 to 1.15"))
            }
            None => return Err(Error::NotATable),
        };
        let (pad, quantum, ptr) = (
            data.get(4..6).ok_or(Error::Truncated)?,
            *data.get(6).ok_or(Error::Truncated)?,
            *data.get(7).ok_or(Error::Truncated)?,
        );
        if pad != [0, 0] || !matches!(quantum, 1 | 2 | 4) || !matches!(ptr, 4 | 8) {
            return Err(Error::NotATable);
        }
        let word = |i: usize| uint(data, 8 + i * usize::from(ptr), ptr, big_endian);
        let offset = |i: usize| -> Result<usize, Error> {
            let v = word(i).ok_or(Error::Truncated)?;
            usize::try_from(v)
                .ok()
                .filter(|&o| o < data.len())
                .ok_or(Error::Corrupt(
                    "a sub-table offset lies past the table's end",
                ))
        };
        let nfunc = usize::try_from(word(0).ok_or(Error::Truncated)?)
            .map_err(|_| Error::Corrupt("function count"))?;
        // 1.16 has no text start: the fields after nfiles are one word earlier.
        let (text_start, first_offset) = match version {
            Version::Go116 => (0, 2),
            _ => (word(2).ok_or(Error::Truncated)?, 3),
        };
        let h = Header {
            version,
            big_endian,
            quantum,
            ptr,
            nfunc,
            text_start,
            funcnames: offset(first_offset)?,
            cutab: offset(first_offset + 1)?,
            filetab: offset(first_offset + 2)?,
            pctab: offset(first_offset + 3)?,
            functab: offset(first_offset + 4)?,
        };
        // The index's nfunc + 1 entries must fit, which also bounds nfunc by the table size.
        let index = nfunc
            .checked_add(1)
            .and_then(|n| n.checked_mul(h.index_entry_size()))
            .and_then(|n| n.checked_add(h.functab))
            .ok_or(Error::Corrupt("function count"))?;
        if index > data.len() {
            return Err(Error::Corrupt(
                "the function index runs past the table's end",
            ));
        }
        Ok(h)
    }

    /// The size of one (entry, record offset) pair of the function index.
    pub fn index_entry_size(&self) -> usize {
        match self.version {
            Version::Go116 => 2 * usize::from(self.ptr),
            _ => 8,
        }
    }
}
