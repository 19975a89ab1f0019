//! The EHABI unwind instructions: an interpreter over a virtual stack pointer and the
//! sixteen core registers.

/// The registers of one frame (r0..r15; r13 = sp, r14 = lr, r15 = pc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Frame {
    /// Core registers.
    pub r: [u32; 16],
}

/// What executing a function's instructions did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The caller's registers are in the frame (pc = the return address).
    Caller,
    /// The instructions say this function cannot be unwound ("refuse to unwind").
    Refuse,
    /// A stack read fell outside the copy or an instruction was malformed.
    Failed,
}

fn uleb128(bytes: &[u8], i: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*i)?;
        *i += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Executes `bytes` on `frame`, reading saved registers through `read` (a 4-byte word at an
/// address of the stack copy). Work is bounded by the number of bytes.
pub fn execute(bytes: &[u8], frame: &mut Frame, read: &mut dyn FnMut(u32) -> Option<u32>) -> Step {
    let mut vsp = frame.r[13];
    let mut pc_set = false;
    let mut i = 0;
    let mut pop = |mask: u32, vsp: &mut u32, frame: &mut Frame, pc_set: &mut bool| -> bool {
        for reg in 0..16 {
            if mask & (1 << reg) != 0 {
                let Some(v) = read(*vsp) else { return false };
                frame.r[reg] = v;
                *vsp = vsp.wrapping_add(4);
                if reg == 15 {
                    *pc_set = true;
                }
            }
        }
        true
    };
    while i < bytes.len() {
        let op = bytes[i];
        i += 1;
        match op {
            0x00..=0x3f => vsp = vsp.wrapping_add(((op as u32 & 0x3f) << 2) + 4),
            0x40..=0x7f => vsp = vsp.wrapping_sub(((op as u32 & 0x3f) << 2) + 4),
            0x80..=0x8f => {
                let Some(&next) = bytes.get(i) else {
                    return Step::Failed;
                };
                i += 1;
                let mask = ((op as u32 & 0x0f) << 8) | next as u32;
                if mask == 0 {
                    return Step::Refuse;
                }
                // Bits 0..11 are r4..r15.
                if !pop(mask << 4, &mut vsp, frame, &mut pc_set) {
                    return Step::Failed;
                }
                if mask & (1 << 9) != 0 {
                    // sp itself was popped: it becomes the new virtual sp.
                    vsp = frame.r[13];
                }
            }
            0x90..=0x9f => {
                let n = (op & 0x0f) as usize;
                if n == 13 || n == 15 {
                    return Step::Failed;
                }
                vsp = frame.r[n];
            }
            0xa0..=0xaf => {
                let n = (op & 0x07) as u32;
                let mut mask = ((1u32 << (n + 1)) - 1) << 4;
                if op & 0x08 != 0 {
                    mask |= 1 << 14;
                }
                if !pop(mask, &mut vsp, frame, &mut pc_set) {
                    return Step::Failed;
                }
            }
            0xb0 => break,
            0xb1 => {
                let Some(&mask) = bytes.get(i) else {
                    return Step::Failed;
                };
                i += 1;
                if mask == 0 || mask & 0xf0 != 0 {
                    return Step::Failed;
                }
                if !pop(mask as u32, &mut vsp, frame, &mut pc_set) {
                    return Step::Failed;
                }
            }
            0xb2 => {
                let Some(v) = uleb128(bytes, &mut i) else {
                    return Step::Failed;
                };
                vsp = vsp.wrapping_add(0x204u32.wrapping_add((v as u32).wrapping_shl(2)));
            }
            0xb3 => {
                let Some(&sc) = bytes.get(i) else {
                    return Step::Failed;
                };
                i += 1;
                vsp = vsp.wrapping_add(8 * ((sc & 0x0f) as u32 + 1) + 4);
            }
            0xb8..=0xbf => vsp = vsp.wrapping_add(8 * ((op & 0x07) as u32 + 1) + 4),
            0xc0..=0xc5 => vsp = vsp.wrapping_add(8 * ((op & 0x07) as u32 + 1)),
            0xc6 | 0xc8 | 0xc9 => {
                let Some(&sc) = bytes.get(i) else {
                    return Step::Failed;
                };
                i += 1;
                vsp = vsp.wrapping_add(8 * ((sc & 0x0f) as u32 + 1));
            }
            0xc7 => {
                let Some(&mask) = bytes.get(i) else {
                    return Step::Failed;
                };
                i += 1;
                vsp = vsp.wrapping_add(4 * (mask & 0x0f).count_ones());
            }
            0xd0..=0xd7 => vsp = vsp.wrapping_add(8 * ((op & 0x07) as u32 + 1)),
            _ => return Step::Failed,
        }
    }
    if !pc_set {
        frame.r[15] = frame.r[14];
    }
    frame.r[13] = vsp;
    Step::Caller
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(words: &[u32], base: u32) -> impl FnMut(u32) -> Option<u32> + '_ {
        move |a| words.get(a.checked_sub(base)? as usize / 4).copied()
    }

    #[test]
    fn push_r4_r7_lr_then_sub_sp() {
        // A typical Thumb-2 prologue: push {r4-r7, lr}; sub sp, #8  ->
        // unwind: vsp += 8 (0x01), pop r4-r7, r14 (0xab), finish.
        let words = [0, 0, 4, 5, 6, 7, 0x1235];
        let mut f = Frame::default();
        f.r[13] = 0x1000;
        assert_eq!(
            execute(&[0x01, 0xab, 0xb0], &mut f, &mut stack(&words, 0x1000)),
            Step::Caller
        );
        assert_eq!(&f.r[4..8], &[4, 5, 6, 7]);
        assert_eq!(f.r[14], 0x1235);
        assert_eq!(f.r[15], 0x1235);
        assert_eq!(f.r[13], 0x1000 + 7 * 4);
    }

    #[test]
    fn vsp_from_frame_pointer_and_refuse() {
        let words = [0x2000, 0x3001];
        let mut f = Frame::default();
        f.r[7] = 0x1000;
        // vsp = r7; pop {r7, lr} via mask (r7 = bit 3, lr = bit 10 of the 12-bit mask).
        let mask: u16 = (1 << 3) | (1 << 10);
        let prog = [0x97, 0x80 | (mask >> 8) as u8, mask as u8, 0xb0];
        assert_eq!(
            execute(&prog, &mut f, &mut stack(&words, 0x1000)),
            Step::Caller
        );
        assert_eq!(
            (f.r[7], f.r[14], f.r[15], f.r[13]),
            (0x2000, 0x3001, 0x3001, 0x1008)
        );
        assert_eq!(execute(&[0x80, 0x00], &mut f, &mut |_| None), Step::Refuse);
        assert_eq!(
            execute(&[0xab], &mut Frame::default(), &mut |_| None),
            Step::Failed
        );
    }

    #[test]
    fn random_programs_never_panic() {
        let mut rng = 0xdead_beefu32;
        for _ in 0..20000 {
            let len = (rng % 12) as usize;
            let prog: Vec<u8> = (0..len)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 17;
                    rng ^= rng << 5;
                    rng as u8
                })
                .collect();
            let mut f = Frame { r: [rng; 16] };
            let _ = execute(&prog, &mut f, &mut |a| Some(a ^ 0x5555));
        }
    }
}
