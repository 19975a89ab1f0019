//! Hash maps keyed by integers, with a multiplicative hash: the heap writer's maps are on the
//! per-event path of `rec`, where SipHash would cost more than the rest of the encoding.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A multiplicative hash for integer keys: the writer's maps are on the per-event path of
/// `rec`, where SipHash would cost more than the rest of the encoding.
#[derive(Default)]
pub struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        // The product's high bits are the well-mixed ones (aligned addresses leave the low
        // bits of the product zero): rotate them down, where the table takes its index.
        self.0 = (self.0 ^ v)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(26);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v.into());
    }
}

pub type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;
