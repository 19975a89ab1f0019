//! Reading words out of a sample's stack copy, remembering whether a read ran past its end:
//! that tells "the copy was too small" apart from "the stack or the tables are wrong".

use std::cell::Cell;

/// The bytes a sample copied from its stack pointer upward.
pub(crate) struct StackCopy<'a> {
    base: u64,
    bytes: &'a [u8],
    big_endian: bool,
    ran_off: Cell<bool>,
}

impl<'a> StackCopy<'a> {
    /// The copy `bytes`, taken at stack pointer `base`.
    pub(crate) fn new(base: u64, bytes: &'a [u8], big_endian: bool) -> StackCopy<'a> {
        StackCopy {
            base,
            bytes,
            big_endian,
            ran_off: Cell::new(false),
        }
    }

    fn bytes<const N: usize>(&self, addr: u64) -> Option<[u8; N]> {
        let off = usize::try_from(addr.checked_sub(self.base)?).ok()?;
        let got = off
            .checked_add(N)
            .and_then(|end| self.bytes.get(off..end))
            .and_then(|b| b.try_into().ok());
        if got.is_none() {
            self.ran_off.set(true);
        }
        got
    }

    /// The 64-bit word at `addr`, if the copy holds it.
    pub(crate) fn u64(&self, addr: u64) -> Option<u64> {
        let b = self.bytes::<8>(addr)?;
        Some(if self.big_endian {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        })
    }

    /// The 32-bit word at `addr`, if the copy holds it.
    pub(crate) fn u32(&self, addr: u64) -> Option<u32> {
        let b = self.bytes::<4>(addr)?;
        Some(if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }

    /// Whether some read asked for bytes past the end of the copy (reads below the stack
    /// pointer do not count: no copy holds those).
    pub(crate) fn ran_off(&self) -> bool {
        self.ran_off.get()
    }

    /// Forgets earlier reads past the end (before a step whose own reads decide).
    pub(crate) fn reset(&self) {
        self.ran_off.set(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inside_and_past_the_copy() {
        let bytes = [1u8, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0];
        let s = StackCopy::new(0x1000, &bytes, false);
        assert_eq!(s.u64(0x1000), Some(1));
        assert_eq!(s.u32(0x1008), Some(2));
        assert!(!s.ran_off());
        assert_eq!(s.u64(0xff8), None);
        assert!(!s.ran_off(), "below the stack pointer is not past the end");
        assert_eq!(s.u64(0x1008), None);
        assert!(s.ran_off());
        s.reset();
        assert_eq!(s.u64(u64::MAX), None);
        assert!(s.ran_off());
    }
}
