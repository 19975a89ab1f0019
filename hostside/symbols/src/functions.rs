//! Where each function of a binary starts and ends, from its unwind tables: the `.eh_frame`
//! entries (FDEs) every binary but a bare 32-bit ARM one carries, stripped or not, and ARM's
//! `.ARM.exidx`. Code no symbol names is grouped by these ranges (as `module+0xSTART`), so a
//! stripped library's hot function is one row of a report instead of one row per sampled
//! instruction.
//!
//! Built once per module from the image; costs 16 bytes per function, at most
//! [`MAX_FUNCTIONS`] of them whatever the file holds. Damaged entries are skipped.

use gimli::{BaseAddresses, CieOrFde, EhFrame, RunTimeEndian, UnwindSection};
use object::{Object, ObjectSection};

/// The most function ranges kept per module (a large C++ library has a few hundred
/// thousand FDEs): a bound on what a hostile file costs.
pub(crate) const MAX_FUNCTIONS: usize = 4_000_000;

/// Function ranges, sorted by start, in the file's stated addresses.
#[derive(Debug, Default)]
pub(crate) struct FunctionRanges {
    ranges: Vec<(u64, u64)>,
}

impl FunctionRanges {
    /// The ranges of `file`'s `.eh_frame`, else its `.ARM.exidx`.
    pub(crate) fn of(file: &object::File<'_>) -> FunctionRanges {
        let mut ranges = eh_frame(file);
        if ranges.is_empty() {
            ranges = arm_exidx(file);
        }
        ranges.sort_unstable();
        ranges.dedup_by_key(|r| r.0);
        FunctionRanges { ranges }
    }

    /// The start of the function containing `svma`.
    pub(crate) fn start_of(&self, svma: u64) -> Option<u64> {
        let i = self.ranges.partition_point(|&(start, _)| start <= svma);
        let (start, end) = *self.ranges.get(i.checked_sub(1)?)?;
        (svma < end).then_some(start)
    }

    /// Number of functions.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.ranges.len()
    }
}

/// The (start, end) of every FDE of `.eh_frame`.
fn eh_frame(file: &object::File<'_>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let Some(section) = file.section_by_name(".eh_frame") else {
        return out;
    };
    let Ok(data) = section.data() else {
        return out;
    };
    let endian = if file.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let mut eh = EhFrame::new(data, endian);
    eh.set_address_size(if file.is_64() { 8 } else { 4 });
    let mut bases = BaseAddresses::default().set_eh_frame(section.address());
    if let Some(text) = file.section_by_name(".text") {
        bases = bases.set_text(text.address());
    }
    if let Some(got) = file.section_by_name(".got") {
        bases = bases.set_got(got.address());
    }
    let mut entries = eh.entries(&bases);
    // Each entry consumes its own length, so this ends; the count bounds the rest.
    while out.len() < MAX_FUNCTIONS {
        match entries.next() {
            Ok(Some(CieOrFde::Fde(partial))) => {
                if let Ok(fde) = partial.parse(|s, b, o| s.cie_from_offset(b, o)) {
                    let start = fde.initial_address();
                    if let Some(end) = start.checked_add(fde.len()).filter(|&e| e > start) {
                        out.push((start, end));
                    }
                }
            }
            Ok(Some(CieOrFde::Cie(_))) => {}
            Ok(None) | Err(_) => break,
        }
    }
    out
}

/// The functions `.ARM.exidx` lists: each entry's start (a 31-bit place-relative offset) to
/// the next entry's start.
fn arm_exidx(file: &object::File<'_>) -> Vec<(u64, u64)> {
    let Some(section) = file.section_by_name(".ARM.exidx") else {
        return Vec::new();
    };
    let Ok(data) = section.data() else {
        return Vec::new();
    };
    let big_endian = !file.is_little_endian();
    let mut starts: Vec<u64> = data
        .chunks_exact(8)
        .take(MAX_FUNCTIONS)
        .enumerate()
        .map(|(i, e)| {
            let w = [e[0], e[1], e[2], e[3]];
            let word = if big_endian {
                u32::from_be_bytes(w)
            } else {
                u32::from_le_bytes(w)
            };
            // prel31: sign-extend bit 30.
            let offset = (((word << 1) as i32) >> 1) as i64;
            let place = section.address().wrapping_add(8 * i as u64);
            place.wrapping_add(offset as u64) & 0xffff_ffff
        })
        .collect();
    starts.sort_unstable();
    starts.dedup();
    starts.windows(2).map(|w| (w[0], w[1])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_binary_s_functions_have_ranges() {
        let data = std::fs::read("/proc/self/exe").unwrap();
        let file = object::File::parse(&*data).unwrap();
        let f = FunctionRanges::of(&file);
        assert!(f.len() > 100, "{} functions", f.len());
        let (start, end) = f.ranges[f.len() / 2];
        assert_eq!(f.start_of(start), Some(start));
        assert_eq!(f.start_of(end - 1), Some(start));
        assert_eq!(f.start_of(0), None);
    }

    #[test]
    fn damaged_tables_give_fewer_ranges_never_a_panic() {
        let data = std::fs::read("/proc/self/exe").unwrap();
        let file = object::File::parse(&*data).unwrap();
        let section = file.section_by_name(".eh_frame").unwrap();
        let (off, len) = section.file_range().unwrap();
        let mut rng = 0x9e37_79b9u64;
        for _ in 0..200 {
            let mut d = data.clone();
            for _ in 0..8 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let at = off + rng % len.max(1);
                d[at as usize] = rng as u8;
            }
            if let Ok(file) = object::File::parse(&*d) {
                let _ = FunctionRanges::of(&file).start_of(0x1000);
            }
        }
    }
}
