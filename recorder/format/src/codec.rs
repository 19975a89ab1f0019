//! The byte-level encoding shared by every record: LEB128 varints, length-prefixed bytes.
//!
//! Varints make the file independent of the recording machine's word size and endianness: a
//! 32-bit big-endian board and a 64-bit little-endian host read the same numbers. Raw memory
//! (stack copies, the vDSO image) stays as bytes; the header says how to interpret them.

/// Why a record's bytes could not be decoded. Carries the offset inside the record payload so a
/// corrupt file can be located without formatting strings on the hot path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// The payload ended in the middle of a value that started at this offset.
    Truncated(usize),
    /// A varint longer than 10 bytes or overflowing 64 bits started at this offset.
    BadVarint(usize),
    /// A string that is not UTF-8 started at this offset.
    BadUtf8(usize),
    /// A length or count that cannot be right (larger than the rest of the payload).
    BadLength(usize),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Truncated(o) => write!(f, "record truncated at byte {o}"),
            DecodeError::BadVarint(o) => write!(f, "malformed varint at byte {o}"),
            DecodeError::BadUtf8(o) => write!(f, "invalid UTF-8 string at byte {o}"),
            DecodeError::BadLength(o) => write!(f, "impossible length at byte {o}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// The most bytes a varint takes (a `u64` in 7-bit groups).
pub const MAX_VARINT: usize = 10;

/// Writes `v` as an unsigned LEB128 varint at the start of `buf`; returns how many bytes it
/// took. The bytes are those [`Enc::u64`] appends.
pub fn varint(mut v: u64, buf: &mut [u8; MAX_VARINT]) -> usize {
    for (i, b) in buf.iter_mut().enumerate() {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            *b = byte;
            return i + 1;
        }
        *b = byte | 0x80;
    }
    MAX_VARINT
}

/// Appends encoded values to a growing buffer. Allocates only when the buffer grows.
pub struct Enc<'a> {
    buf: &'a mut Vec<u8>,
}

impl<'a> Enc<'a> {
    /// Starts appending at the end of `buf`.
    pub fn new(buf: &'a mut Vec<u8>) -> Self {
        Enc { buf }
    }

    /// Unsigned LEB128.
    #[inline]
    pub fn u64(&mut self, mut v: u64) {
        // Written into reserved room: `Vec::push` per byte checked the capacity each time and
        // was not inlined (rec spent a sixth of its instructions on a heap recording there).
        self.buf.reserve(MAX_VARINT);
        let spare = &mut self.buf.spare_capacity_mut()[..MAX_VARINT];
        let mut n = 0;
        for slot in spare.iter_mut() {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            n += 1;
            if v == 0 {
                slot.write(byte);
                break;
            }
            slot.write(byte | 0x80);
        }
        let len = self.buf.len() + n;
        // SAFETY: the `n` bytes after the old length were just written, inside the capacity.
        unsafe { self.buf.set_len(len) };
    }

    /// Signed values zig-zag encoded, so small negative deltas stay short.
    pub fn i64(&mut self, v: i64) {
        self.u64(((v << 1) ^ (v >> 63)) as u64);
    }

    /// A flag as one byte.
    pub fn bool(&mut self, v: bool) {
        self.buf.push(v as u8);
    }

    /// Bytes encoded elsewhere, as they are.
    pub fn raw(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }

    /// Length-prefixed raw bytes.
    pub fn bytes(&mut self, v: &[u8]) {
        self.u64(v.len() as u64);
        self.buf.extend_from_slice(v);
    }

    /// Length-prefixed UTF-8.
    pub fn str(&mut self, v: &str) {
        self.bytes(v.as_bytes());
    }

    /// A count followed by each address; used for callchains.
    pub fn u64s(&mut self, v: &[u64]) {
        self.u64(v.len() as u64);
        for &x in v {
            self.u64(x);
        }
    }

    /// A count followed by each string.
    pub fn strs(&mut self, v: &[String]) {
        self.u64(v.len() as u64);
        for s in v {
            self.str(s);
        }
    }
}

/// Reads encoded values from a record payload. Every read is bounds-checked; nothing panics.
pub struct Dec<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Dec<'a> {
    /// Reads from the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Dec { data, pos: 0 }
    }

    /// Whether every byte was consumed; fields added by newer writers are simply left unread.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// Bytes consumed so far (the offset the next value starts at).
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Unsigned LEB128.
    #[inline]
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        let start = self.pos;
        let mut v: u64 = 0;
        for shift in (0..70).step_by(7) {
            let Some(&byte) = self.data.get(self.pos) else {
                return Err(DecodeError::Truncated(start));
            };
            self.pos += 1;
            if shift == 63 && byte > 1 {
                return Err(DecodeError::BadVarint(start));
            }
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::BadVarint(start))
    }

    /// A varint that must fit in 32 bits.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let start = self.pos;
        u32::try_from(self.u64()?).map_err(|_| DecodeError::BadVarint(start))
    }

    /// Zig-zag signed.
    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        let v = self.u64()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// One raw byte.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        let Some(&b) = self.data.get(self.pos) else {
            return Err(DecodeError::Truncated(self.pos));
        };
        self.pos += 1;
        Ok(b)
    }

    /// A flag byte.
    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        let Some(&b) = self.data.get(self.pos) else {
            return Err(DecodeError::Truncated(self.pos));
        };
        self.pos += 1;
        Ok(b != 0)
    }

    /// Length-prefixed bytes, borrowed from the payload.
    pub fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let start = self.pos;
        let len = self.u64()?;
        if len > self.remaining() as u64 {
            return Err(DecodeError::BadLength(start));
        }
        let len = len as usize;
        let out = &self.data[self.pos..self.pos + len];
        self.pos += len;
        Ok(out)
    }

    /// Length-prefixed UTF-8.
    pub fn string(&mut self) -> Result<String, DecodeError> {
        let start = self.pos;
        let b = self.bytes()?;
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError::BadUtf8(start))
    }

    /// A counted list of varints. The count is checked against the bytes left (each value takes
    /// at least one byte), so a corrupt count cannot make us allocate gigabytes.
    pub fn u64s(&mut self) -> Result<Vec<u64>, DecodeError> {
        let n = self.count()?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.u64()?);
        }
        Ok(v)
    }

    /// A counted list of strings.
    pub fn strs(&mut self) -> Result<Vec<String>, DecodeError> {
        let n = self.count()?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.string()?);
        }
        Ok(v)
    }

    fn count(&mut self) -> Result<usize, DecodeError> {
        let start = self.pos;
        let n = self.u64()?;
        if n > self.remaining() as u64 {
            return Err(DecodeError::BadLength(start));
        }
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_the_edges() {
        let values = [
            0u64,
            1,
            127,
            128,
            300,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ];
        let mut buf = Vec::new();
        let mut e = Enc::new(&mut buf);
        for v in values {
            e.u64(v);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            e.i64(v);
        }
        let mut d = Dec::new(&buf);
        for v in values {
            assert_eq!(d.u64().unwrap(), v);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(d.i64().unwrap(), v);
        }
        assert_eq!(d.remaining(), 0);
    }

    #[test]
    fn overlong_varint_is_an_error_not_a_panic() {
        let buf = [0xffu8; 11];
        assert_eq!(Dec::new(&buf).u64(), Err(DecodeError::BadVarint(0)));
        let buf = [0xffu8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(Dec::new(&buf).u64(), Err(DecodeError::BadVarint(0)));
    }

    #[test]
    fn huge_counts_are_rejected_before_allocating() {
        let mut buf = Vec::new();
        Enc::new(&mut buf).u64(u64::MAX / 2);
        assert!(matches!(
            Dec::new(&buf).u64s(),
            Err(DecodeError::BadLength(0))
        ));
        assert!(matches!(
            Dec::new(&buf).bytes(),
            Err(DecodeError::BadLength(0))
        ));
    }
}
