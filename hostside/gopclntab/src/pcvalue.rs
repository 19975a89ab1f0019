//! Go's pc-value tables: for one function, a run-length list of (value, pc range) pairs that
//! gives, for every instruction, the stack-frame size (`pcsp`), the file (`pcfile`) or the line
//! (`pcln`) in force there.
//!
//! Each pair is a zig-zag varint value delta and a varint pc delta (in units of the
//! architecture's minimum instruction size); the value starts at -1 at the function's entry,
//! and a zero value delta after the first pair ends the table. The format is the Go runtime's
//! (`runtime.pcvalue` and `runtime.step` in `runtime/symtab.go`); this is a bounds-checked
//! reading of it.

/// Reads an unsigned LEB128 varint at `*at`, advancing it; `None` past the end or beyond 32
/// bits (Go writes u32 varints).
fn varint(data: &[u8], at: &mut usize) -> Option<u32> {
    let mut value = 0u32;
    for shift in (0..35).step_by(7) {
        let b = *data.get(*at)?;
        *at += 1;
        value |= u32::from(b & 0x7f).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// The value the table at `data` gives for `target`, in a function starting at `entry`;
/// `quantum` is the minimum instruction size. `None` when the table ends before `target`,
/// is malformed, or runs off `data`. Each step consumes at least two bytes, so the walk ends
/// within `data.len() / 2` steps whatever the bytes hold.
pub(crate) fn value_at(data: &[u8], entry: u64, quantum: u8, target: u64) -> Option<i32> {
    let mut at = 0usize;
    let mut pc = entry;
    let mut value: i32 = -1;
    let mut first = true;
    loop {
        let uvdelta = varint(data, &mut at)?;
        if uvdelta == 0 && !first {
            return None;
        }
        first = false;
        let delta = ((uvdelta >> 1) as i32) ^ -((uvdelta & 1) as i32);
        value = value.wrapping_add(delta);
        let pcdelta = varint(data, &mut at)?;
        pc = pc.checked_add(u64::from(pcdelta).checked_mul(u64::from(quantum))?)?;
        if target < pc {
            return Some(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Value 0 for 4 bytes, then 24 for 10 bytes, then 0 for 2, as the Go linker encodes an
    /// amd64 function with a 24-byte frame: zig-zag deltas +1, +24, -24.
    const TABLE: &[u8] = &[0x02, 4, 48, 10, 47, 2, 0];

    #[test]
    fn values_follow_the_pc_ranges() {
        let at = |pc| value_at(TABLE, 0x1000, 1, pc);
        assert_eq!(at(0x1000), Some(0));
        assert_eq!(at(0x1003), Some(0));
        assert_eq!(at(0x1004), Some(24));
        assert_eq!(at(0x100d), Some(24));
        assert_eq!(at(0x100e), Some(0));
        assert_eq!(at(0x1010), None, "past the table's end");
    }

    #[test]
    fn the_quantum_scales_pc_deltas() {
        assert_eq!(value_at(TABLE, 0x1000, 4, 0x100f), Some(0));
        assert_eq!(value_at(TABLE, 0x1000, 4, 0x1010), Some(24));
    }

    #[test]
    fn truncated_or_endless_varints_are_none() {
        assert_eq!(value_at(&[0x02], 0, 1, 5), None);
        assert_eq!(
            value_at(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1], 0, 1, 0),
            None
        );
        assert_eq!(value_at(&[], 0, 1, 0), None);
    }
}
