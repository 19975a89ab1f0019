//! The index table: which unwind entry covers an address.

/// Where a function's unwind instructions are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// `EXIDX_CANTUNWIND`: the function says the stack ends here (e.g. `_start`).
    CantUnwind,
    /// The instruction bytes, in execution order.
    Instructions(Vec<u8>),
}

/// A module's `.ARM.exidx` (and `.ARM.extab`) with their stated addresses.
#[derive(Debug, Clone, Default)]
pub struct ExidxTable {
    exidx_svma: u64,
    exidx: Vec<u8>,
    extab_svma: u64,
    extab: Vec<u8>,
    big_endian: bool,
}

/// Decodes a 31-bit place-relative offset.
fn prel31(word: u32, at: u64) -> u64 {
    let offset = ((word << 1) as i32 >> 1) as i64;
    at.wrapping_add(offset as u64) & 0xffff_ffff
}

impl ExidxTable {
    /// Wraps the sections' bytes (`extab` may be empty).
    pub fn new(
        exidx_svma: u64,
        exidx: &[u8],
        extab_svma: u64,
        extab: &[u8],
        big_endian: bool,
    ) -> Self {
        ExidxTable {
            exidx_svma,
            exidx: exidx.to_vec(),
            extab_svma,
            extab: extab.to_vec(),
            big_endian,
        }
    }

    fn word(&self, data: &[u8], off: usize) -> Option<u32> {
        let b: [u8; 4] = data.get(off..off.checked_add(4)?)?.try_into().ok()?;
        Some(if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }

    fn len(&self) -> usize {
        self.exidx.len() / 8
    }

    /// Function start of table entry `i`.
    fn start(&self, i: usize) -> Option<u64> {
        let w = self.word(&self.exidx, i * 8)?;
        Some(prel31(w, self.exidx_svma + (i * 8) as u64))
    }

    /// The entry covering stated address `svma`, if any. Bounded: a binary search, and at
    /// most 256 extra instruction words read.
    pub fn lookup(&self, svma: u64) -> Option<Entry> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        // The table is sorted by function start; find the last start <= svma.
        let (mut lo, mut hi) = (0usize, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.start(mid)? <= svma {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == 0 {
            return None;
        }
        let i = lo - 1;
        let at = self.exidx_svma + (i * 8) as u64 + 4;
        let w = self.word(&self.exidx, i * 8 + 4)?;
        if w == 1 {
            return Some(Entry::CantUnwind);
        }
        if w & 0x8000_0000 != 0 {
            // Inline compact model: personality 0, three instruction bytes.
            if (w >> 24) & 0x0f != 0 {
                return None;
            }
            return Some(Entry::Instructions(vec![
                (w >> 16) as u8,
                (w >> 8) as u8,
                w as u8,
            ]));
        }
        let extab_addr = prel31(w, at);
        let off = usize::try_from(extab_addr.checked_sub(self.extab_svma)?).ok()?;
        let first = self.word(&self.extab, off)?;
        let mut bytes = Vec::new();
        let (words_after, mut pos) = if first & 0x8000_0000 != 0 {
            match (first >> 24) & 0x0f {
                0 => {
                    bytes.extend([(first >> 16) as u8, (first >> 8) as u8, first as u8]);
                    (0, off + 4)
                }
                1 | 2 => {
                    bytes.extend([(first >> 8) as u8, first as u8]);
                    (((first >> 16) & 0xff) as usize, off + 4)
                }
                _ => return None,
            }
        } else {
            // A generic personality routine (e.g. __gxx_personality_v0): its data starts
            // with the count of further words and three instruction bytes.
            let data = self.word(&self.extab, off + 4)?;
            bytes.extend([(data >> 16) as u8, (data >> 8) as u8, data as u8]);
            ((data >> 24) as usize, off + 8)
        };
        for _ in 0..words_after.min(256) {
            let w = self.word(&self.extab, pos)?;
            bytes.extend(w.to_be_bytes());
            pos += 4;
        }
        Some(Entry::Instructions(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(entries: &[(u32, u32)]) -> ExidxTable {
        let mut b = Vec::new();
        for (i, &(start, data)) in entries.iter().enumerate() {
            // Encode absolute starts as offsets from the entry's own address (0x1000 + 8i).
            let at = 0x1000 + 8 * i as u32;
            b.extend((start.wrapping_sub(at) & 0x7fff_ffff).to_le_bytes());
            b.extend(data.to_le_bytes());
        }
        ExidxTable::new(0x1000, &b, 0, &[], false)
    }

    #[test]
    fn lookup_finds_the_covering_function() {
        let t = table(&[(0x100, 0x80a8_b0b0), (0x200, 1), (0x300, 0x8097_b0b0)]);
        assert_eq!(t.lookup(0xff), None);
        assert_eq!(
            t.lookup(0x100),
            Some(Entry::Instructions(vec![0xa8, 0xb0, 0xb0]))
        );
        assert_eq!(
            t.lookup(0x1ff),
            Some(Entry::Instructions(vec![0xa8, 0xb0, 0xb0]))
        );
        assert_eq!(t.lookup(0x250), Some(Entry::CantUnwind));
        assert_eq!(
            t.lookup(0x9999),
            Some(Entry::Instructions(vec![0x97, 0xb0, 0xb0]))
        );
    }

    #[test]
    fn corrupt_tables_never_panic() {
        let mut rng = 0x1234_5678u32;
        for len in 0..200 {
            let b: Vec<u8> = (0..len)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 17;
                    rng ^= rng << 5;
                    rng as u8
                })
                .collect();
            let t = ExidxTable::new(0x1000, &b, 0x1000, &b, len % 2 == 0);
            for a in [0, 0x1000, 0x1004, u32::MAX as u64, u64::MAX] {
                let _ = t.lookup(a);
            }
        }
    }
}
