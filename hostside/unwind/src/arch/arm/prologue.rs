//! Prologue analysis for 32-bit ARM code that has no unwind tables at all: the run-time
//! helpers a program links statically from libgcc (`__aeabi_uldivmod`, `__udivmoddi4`,
//! `__fixdfdi`, ...), which Debian's libgcc.a carries without debug info and with
//! "cannot unwind" index entries, so no table describes them. Every 64-bit division on a
//! 32-bit ARM board runs through them.
//!
//! The function's instructions are decoded from its start (its symbol) up to the address
//! being unwound, tracking what the compiler's and libgcc's hand-written prologues do: push
//! registers (`push`, `stmdb sp!`, `str rX, [sp, #-4]!`, `strd ..., [sp, #-n]!`, `vpush`),
//! allocate (`sub sp, #n`), and in epilogues the reverse. Code after a return or an
//! unconditional branch is reached from the function's body, so it starts again from the
//! deepest frame seen (the body's). Any other write to sp, or an instruction this decoder does
//! not know in an IT block, gives up: a wrong frame is worse than a stack cut short. GDB
//! unwinds such code the same way (`arm_analyze_prologue`); like GDB's, the result is a
//! heuristic, and the caller counts the frames it unwound this way.

/// Where the caller's registers are, relative to the stack pointer at the unwound address.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Prologue {
    /// Bytes the function has pushed or allocated: the caller's sp is sp + this.
    pub frame: u32,
    /// Saved core registers (r0..r14) and their offset from the current sp; lr among them
    /// when the function saved it, else the return address is still in lr.
    pub saved: Vec<(u8, u32)>,
}

/// The most bytes of code scanned: a function longer than this before the address is no
/// helper, and decoding it all per sample would be slow.
const MAX_SCAN: u64 = 16 << 10;

#[derive(Clone, Default)]
struct State {
    frame: u32,
    /// (register, offset from the frame's top: the slot is at sp + frame - top_offset).
    saved: Vec<(u8, u32)>,
}

impl State {
    fn push(&mut self, mask: u32) {
        // The lowest register goes to the lowest address.
        let n = mask.count_ones();
        let mut slot = 0;
        for reg in 0..16u8 {
            if mask & (1 << reg) != 0 {
                // The first save holds the caller's value (a later one may follow a call).
                if !self.saved.iter().any(|(r, _)| *r == reg) {
                    self.saved.push((reg, self.frame + 4 * (n - slot)));
                }
                slot += 1;
            }
        }
        self.frame += 4 * n;
    }

    /// Pops `mask`; false when it pops below the frame.
    fn pop(&mut self, mask: u32) -> bool {
        let n = 4 * mask.count_ones();
        if n > self.frame {
            return false;
        }
        for reg in 0..16u8 {
            if mask & (1 << reg) != 0 {
                self.saved.retain(|(r, _)| *r != reg);
            }
        }
        self.frame -= n;
        self.saved.retain(|&(_, at)| at <= self.frame);
        true
    }

    fn grow(&mut self, n: u32) {
        self.frame = self.frame.saturating_add(n);
    }

    fn shrink(&mut self, n: u32) -> bool {
        if n > self.frame {
            return false;
        }
        self.frame -= n;
        self.saved.retain(|&(_, at)| at <= self.frame);
        true
    }
}

/// What one instruction does to the frame.
enum Effect {
    /// Nothing this analysis tracks.
    None,
    Push(u32),
    Pop(u32),
    Grow(u32),
    Shrink(u32),
    /// A return or an unconditional branch: the next instruction is reached from elsewhere.
    Leave,
    /// Writes sp in a way not tracked: give up.
    Unknown,
}

/// ThumbExpandImm for the unshifted and rotated forms the compiler uses with sp.
fn thumb_expand_imm(imm12: u32) -> u32 {
    if imm12 >> 10 == 0 {
        let b = imm12 & 0xff;
        match (imm12 >> 8) & 3 {
            0 => b,
            1 => b << 16 | b,
            2 => b << 24 | b << 8,
            _ => b << 24 | b << 16 | b << 8 | b,
        }
    } else {
        (0x80 | (imm12 & 0x7f)).rotate_right(imm12 >> 7)
    }
}

/// Decodes the Thumb instruction at `code[0..]`: its length and effect.
fn thumb(code: &[u8]) -> Option<(usize, Effect)> {
    let hw = |i: usize| Some(u16::from_le_bytes([*code.get(i)?, *code.get(i + 1)?]) as u32);
    let h1 = hw(0)?;
    if h1 >> 11 < 0b11101 {
        let e = match h1 {
            _ if h1 & 0xfe00 == 0xb400 => Effect::Push((h1 & 0xff) | (h1 & 0x100) << 6),
            _ if h1 & 0xfe00 == 0xbc00 => {
                let mask = (h1 & 0xff) | (h1 & 0x100) << 7;
                if mask & (1 << 15) != 0 {
                    Effect::Leave
                } else {
                    Effect::Pop(mask)
                }
            }
            _ if h1 & 0xff80 == 0xb080 => Effect::Grow((h1 & 0x7f) << 2),
            _ if h1 & 0xff80 == 0xb000 => Effect::Shrink((h1 & 0x7f) << 2),
            // bx lr, and the unconditional 16-bit branch.
            0x4770 => Effect::Leave,
            _ if h1 & 0xf800 == 0xe000 => Effect::Leave,
            // mov sp, rM and add sp, rM (high-register forms with Rd = sp).
            _ if h1 & 0xff87 == 0x4685 || h1 & 0xff87 == 0x4485 => Effect::Unknown,
            _ => Effect::None,
        };
        return Some((2, e));
    }
    let h2 = hw(2)?;
    let e = match h1 {
        0xe92d => Effect::Push(h2 & 0x5fff),
        0xe8bd if h2 & 0x8000 != 0 => Effect::Leave,
        0xe8bd => Effect::Pop(h2 & 0x7fff),
        0xf84d if h2 & 0x0fff == 0x0d04 => Effect::Push(1 << (h2 >> 12)),
        0xf85d if h2 & 0x0fff == 0x0b04 && h2 >> 12 == 15 => Effect::Leave,
        0xf85d if h2 & 0x0fff == 0x0b04 => Effect::Pop(1 << (h2 >> 12)),
        // strd rT, rT2, [sp, #-imm]!: two words at the new sp, imm - 8 bytes left free.
        0xe96d => {
            let (t, t2, imm) = (h2 >> 12, (h2 >> 8) & 15, (h2 & 0xff) << 2);
            if t == t2 || imm < 8 {
                Effect::Unknown
            } else if t < t2 {
                // Pushed as a pair, then the rest of the block allocated above them: model
                // as allocate-then-push so that the pair sits at the new sp.
                return Some((4, Effect::Push((1 << t) | (1 << t2) | (imm - 8) << 16)));
            } else {
                Effect::Unknown
            }
        }
        // vpush / vpop {dN..}: imm8 words.
        _ if h1 & 0xffbf == 0xed2d && h2 & 0x0e00 == 0x0a00 => Effect::Grow((h2 & 0xff) << 2),
        _ if h1 & 0xffbf == 0xecbd && h2 & 0x0e00 == 0x0a00 => Effect::Shrink((h2 & 0xff) << 2),
        // sub.w / add.w sp, sp, #const (T3) and subw / addw sp, sp, #imm12 (T4).
        _ if h1 & 0xfbff == 0xf1ad && h2 & 0x8f00 == 0x0d00 => {
            Effect::Grow(thumb_expand_imm(imm12(h1, h2)))
        }
        _ if h1 & 0xfbff == 0xf10d && h2 & 0x8f00 == 0x0d00 => {
            Effect::Shrink(thumb_expand_imm(imm12(h1, h2)))
        }
        _ if h1 & 0xfbff == 0xf2ad && h2 & 0x8f00 == 0x0d00 => Effect::Grow(imm12(h1, h2)),
        _ if h1 & 0xfbff == 0xf20d && h2 & 0x8f00 == 0x0d00 => Effect::Shrink(imm12(h1, h2)),
        // b.w (T4); bl and blx are calls and return here.
        _ if h1 & 0xf800 == 0xf000 && h2 & 0xd000 == 0x9000 => Effect::Leave,
        // Any other data-processing write to sp.
        _ if h1 & 0xfe00 == 0xea00 && h2 & 0x0f00 == 0x0d00 => Effect::Unknown,
        _ if h1 & 0xf800 == 0xf000 && h2 & 0x8f00 == 0x0d00 => Effect::Unknown,
        _ => Effect::None,
    };
    Some((4, e))
}

fn imm12(h1: u32, h2: u32) -> u32 {
    (h1 & 0x400) << 1 | (h2 & 0x7000) >> 4 | (h2 & 0xff)
}

/// Decodes the ARM (A32) instruction `w`.
fn arm(w: u32) -> Effect {
    let rot_imm = |w: u32| (w & 0xff).rotate_right(2 * ((w >> 8) & 0xf));
    match w {
        // The rest of this table assumes the "always" condition.
        _ if w >> 28 != 0xe => Effect::None,
        _ if w & 0x0fff_0000 == 0x092d_0000 => Effect::Push(w & 0x5fff),
        _ if w & 0x0fff_8000 == 0x08bd_8000 => Effect::Leave,
        _ if w & 0x0fff_0000 == 0x08bd_0000 => Effect::Pop(w & 0x7fff),
        _ if w & 0x0fff_0fff == 0x052d_0004 => Effect::Push(1 << ((w >> 12) & 15)),
        _ if w == 0xe49d_f004 => Effect::Leave,
        _ if w & 0x0fff_0fff == 0x049d_0004 => Effect::Pop(1 << ((w >> 12) & 15)),
        _ if w & 0x0fff_f000 == 0x024d_d000 => Effect::Grow(rot_imm(w)),
        _ if w & 0x0fff_f000 == 0x028d_d000 => Effect::Shrink(rot_imm(w)),
        _ if w & 0x0fbf_0f00 == 0x0d2d_0b00 => Effect::Grow((w & 0xff) << 2),
        _ if w & 0x0fbf_0f00 == 0x0cbd_0b00 => Effect::Shrink((w & 0xff) << 2),
        0xe12f_ff1e => Effect::Leave,
        _ if w & 0x0f00_0000 == 0x0a00_0000 => Effect::Leave,
        // Other data-processing writes to sp.
        _ if w & 0x0c00_f000 == 0x0000_d000 => Effect::Unknown,
        _ => Effect::None,
    }
}

/// Analyses the function that starts at stated address `start` (Thumb when `is_thumb`) in
/// `code` (stated at `code_svma`) up to `pc`, exclusive: the instruction at `pc` has not run.
/// `None` when the code is not there or does something this analysis does not follow.
pub fn analyze(
    code: &[u8],
    code_svma: u64,
    start: u64,
    is_thumb: bool,
    pc: u64,
) -> Option<Prologue> {
    if pc < start || pc - start > MAX_SCAN || start < code_svma {
        return None;
    }
    let mut at = usize::try_from(start - code_svma).ok()?;
    let end = usize::try_from(pc - code_svma).ok()?;
    let (mut now, mut body) = (State::default(), State::default());
    // Instructions left in an IT block (conditional: they may not run).
    let mut in_it = 0u32;
    while at < end {
        let (len, effect) = if is_thumb {
            let (len, e) = thumb(code.get(at..)?)?;
            let h1 = u16::from_le_bytes([code[at], code[at + 1]]);
            if len == 2 && h1 & 0xff00 == 0xbf00 && h1 & 0x000f != 0 {
                // IT: up to four conditional instructions follow.
                in_it = 4 - (h1 & 0xf).trailing_zeros();
                at += 2;
                continue;
            }
            (len, e)
        } else {
            let w = code.get(at..at + 4)?;
            (4, arm(u32::from_le_bytes([w[0], w[1], w[2], w[3]])))
        };
        let conditional = in_it > 0;
        in_it = in_it.saturating_sub(1);
        match effect {
            Effect::None => {}
            // A conditional return or branch falls through when not taken.
            Effect::Leave if conditional => {}
            Effect::Leave => now = body.clone(),
            _ if conditional => return None,
            Effect::Unknown => return None,
            Effect::Push(mask) => {
                // strd's free space above the pair (see `thumb`).
                let (regs, extra) = (mask & 0xffff, mask >> 16);
                now.grow(extra);
                now.push(regs);
            }
            Effect::Pop(mask) => {
                if !now.pop(mask) {
                    return None;
                }
            }
            Effect::Grow(n) => now.grow(n),
            Effect::Shrink(n) => {
                if !now.shrink(n) {
                    return None;
                }
            }
        }
        if now.frame > body.frame {
            body = now.clone();
        }
        at += len;
    }
    Some(Prologue {
        frame: now.frame,
        saved: now
            .saved
            .iter()
            .map(|&(reg, top)| (reg, now.frame - top))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thumb_code(halfwords: &[u16]) -> Vec<u8> {
        halfwords.iter().flat_map(|h| h.to_le_bytes()).collect()
    }

    /// libgcc's `__aeabi_uidivmod` (Debian armhf, Thumb-2), as linked into sqlite3.
    #[test]
    fn aeabi_uidivmod_saves_lr_above_r0_r1() {
        let code = thumb_code(&[
            0x2900, // cmp r1, #0
            0xd0f8, // beq.n (conditional: falls through)
            0xe92d, 0x4003, // stmdb sp!, {r0, r1, lr}
            0xf7ff, 0xfecc, // bl __udivsi3
            0xe8bd, 0x4006, // ldmia.w sp!, {r1, r2, lr}
            0x4770, // bx lr
        ]);
        // Before the push: the return address is in lr.
        assert_eq!(
            analyze(&code, 0x1000, 0x1000, true, 0x1004),
            Some(Prologue::default())
        );
        // At the call's return address: r0, r1, lr at sp, sp+4, sp+8.
        let p = analyze(&code, 0x1000, 0x1000, true, 0x100c).unwrap();
        assert_eq!(p.frame, 12);
        assert_eq!(p.saved, [(0, 0), (1, 4), (14, 8)]);
        // After the pop, at the bx: nothing on the stack, lr restored.
        let p = analyze(&code, 0x1000, 0x1000, true, 0x1010).unwrap();
        assert_eq!((p.frame, p.saved.is_empty()), (0, true));
    }

    /// `__fixdfdi`: a pop and a tail call in the middle, then the rest of the body.
    #[test]
    fn code_after_a_tail_call_is_in_the_body() {
        let code = thumb_code(&[
            0x4602, // mov r2, r0
            0xb508, // push {r3, lr}
            0xd403, // bmi.n
            0xe8bd, 0x4008, // ldmia.w sp!, {r3, lr}
            0xf000, 0xb80a, // b.w __fixunsdfdi
            0x4240, // negs r0, r0 (reached from the bmi)
            0xf000, 0xf804, // bl __fixunsdfdi
            0x4240, // negs
            0xbd08, // pop {r3, pc}
        ]);
        let p = analyze(&code, 0x1000, 0x1000, true, 0x100a).unwrap();
        assert_eq!(p.frame, 0, "between the pop and the tail call");
        let p = analyze(&code, 0x1000, 0x1000, true, 0x1010).unwrap();
        assert_eq!(p.frame, 8);
        assert_eq!(p.saved, [(3, 0), (14, 4)]);
    }

    /// `__udivmoddi4`: a C prologue, then a frame allocation and a strd with writeback.
    #[test]
    fn push_w_sub_sp_and_strd_writeback() {
        let code = thumb_code(&[
            0xe92d, 0x43f0, // stmdb sp!, {r4-r9, lr}
            0xb083, // sub sp, #12
            0xf1ad, 0x0c08, // sub.w ip, sp, #8 (not sp: ignored)
            0xe96d, 0xce04, // strd ip, lr, [sp, #-16]!
        ]);
        let p = analyze(&code, 0x1000, 0x1000, true, 0x100e).unwrap();
        assert_eq!(p.frame, 28 + 12 + 16);
        // The first save of lr holds the return address: the push's, not the strd's.
        assert_eq!(p.saved.iter().find(|(r, _)| *r == 14), Some(&(14, 52)));
        assert_eq!(p.saved.iter().find(|(r, _)| *r == 4), Some(&(4, 28)));
        assert_eq!(p.saved.iter().find(|(r, _)| *r == 12), Some(&(12, 0)));
    }

    #[test]
    fn unknown_writes_to_sp_and_conditional_pushes_give_up() {
        // mov sp, r7
        assert_eq!(analyze(&thumb_code(&[0x46bd]), 0, 0, true, 2), None);
        // it eq; pusheq {lr}
        assert_eq!(analyze(&thumb_code(&[0xbf08, 0xb500]), 0, 0, true, 4), None);
        // Outside the code, or before the function.
        assert_eq!(
            analyze(&thumb_code(&[0xb500]), 0x100, 0x100, true, 0x1000),
            None
        );
        assert_eq!(
            analyze(&thumb_code(&[0xb500]), 0x100, 0x80, true, 0x102),
            None
        );
    }

    #[test]
    fn arm_mode_push_and_sub() {
        let code: Vec<u8> = [0xe92d_4010u32, 0xe24d_d008, 0xebff_fffe]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let p = analyze(&code, 0, 0, false, 12).unwrap();
        assert_eq!(p.frame, 16);
        assert_eq!(p.saved, [(4, 8), (14, 12)]);
    }

    #[test]
    fn random_code_never_panics() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let code: Vec<u8> = (0..64).map(|i| (rng >> (i % 56)) as u8).collect();
            let pc = rng % 80;
            let _ = analyze(&code, 0, 0, rng & 1 == 0, pc);
        }
    }
}
