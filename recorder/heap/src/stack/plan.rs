//! Per-return-address unwind plans for x86_64: what framehop's rule for a return address does
//! to the stack pointer and frame pointer, learned once and then executed inline.
//!
//! Why: an allocation-dense C++ program unwinds about four new frames per allocation (the
//! rest is spliced, see [`super::splice`]). Through framehop each costs a module look-up
//! for "known or foreign", a rule-cache probe, the rule's execution behind two closures and
//! the error plumbing: about 400 instructions a frame in all on protoc. A learned plan is
//! one table probe and one or two loads.
//!
//! How a plan is learned: framehop does not hand out the rule it used, so the return address
//! is unwound twice with made-up registers and a made-up stack whose every word holds a
//! value that names its own address ([`learn`]). The new stack pointer, frame pointer and
//! return address then say, for the four rule shapes framehop caches for a return address
//! (offset the stack pointer; that and restore the frame pointer from the frame, directly
//! or among popped registers; follow the frame pointer), which one it was and with which
//! offsets. The two runs use different registers, so a rule that is not one of these shapes
//! (a DWARF expression framehop evaluates without caching) cannot agree with one shape in
//! both; any disagreement or error leaves the address to framehop on every unwind
//! ([`Kind::Framehop`]).
//!
//! Exactness: a plan runs only when every word it reads is readable for the unwind
//! ([`Plan::step`]'s `readable`), the new stack pointer moves up and the return address is not
//! 0; otherwise the frame goes to framehop, which gives the same answer or the error. Words a
//! popped-registers rule reads for other registers are not read: they decide nothing but
//! their readability, which the checks cover (they lie between the stack pointer and the
//! return address's slot).
//!
//! Memory: [`SLOTS`] entries of 16 bytes (256 KiB), allocated with the module list and
//! dropped with it at a rescan (module changes void every plan).

// AArch64 unwinds every frame with framehop (its rules read the link register too).
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use alloc::boxed::Box;
use alloc::vec;

/// Added to an instruction pointer (the unwind's first frame) to key its plan apart from a
/// return address's: framehop treats the two differently (it looks up a return address's
/// rule at the address before it, and some rules act otherwise in the first frame).
/// Addresses of user space never have the bit set.
pub const FIRST: u64 = 1 << 63;

/// Plans kept, direct-mapped by address: protoc meets about 6,000 distinct return addresses.
pub const SLOTS: usize = 1 << 14;

/// What a plan does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Kind {
    /// The slot holds no plan.
    Empty,
    /// Leave the frame to framehop (a rule of another shape, the outermost frame, a foreign
    /// address).
    Framehop,
    /// `sp += sp_off`; the frame pointer is unchanged.
    Sp,
    /// `bp = [sp + bp_at]`, `sp += sp_off`.
    SpBp,
    /// `sp = bp + 16`, `bp = [bp]`.
    Fp,
}

/// One learned plan and what else the unwind needs to know of the address.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// What [`Plans::get`] found it by.
    key: u64,
    sp_off: u32,
    bp_at: i16,
    kind: Kind,
    /// Bit 0: outside every known module; bit 1: the interposer's own code.
    flags: u8,
}

const FOREIGN: u8 = 1;
const OWN: u8 = 2;

const EMPTY: Plan = Plan {
    key: 0,
    sp_off: 0,
    bp_at: 0,
    kind: Kind::Empty,
    flags: 0,
};

/// Where a plan's step left the unwind: the caller's return address, stack pointer and frame
/// pointer, and the words read, in framehop's order: the frame pointer's (at `bp_at`, when
/// not 0), then the return address's (at `ra_at`). Scalars only, no array indexed at run
/// time: the struct then lives in registers (through memory, a 16-byte reload of two words
/// just stored stalled every frame).
pub struct Stepped {
    /// The caller's return address (never 0).
    pub ra: u64,
    /// The caller's stack pointer.
    pub sp: u64,
    /// The caller's frame pointer.
    pub bp: u64,
    /// Where the frame pointer was read, 0 when it was not.
    pub bp_at: u64,
    /// Where the return address was read.
    pub ra_at: u64,
}

impl Plan {
    /// The address lies outside every known module.
    pub fn foreign(&self) -> bool {
        self.flags & FOREIGN != 0
    }

    /// The address is the interposer's own.
    pub fn own(&self) -> bool {
        self.flags & OWN != 0
    }

    /// Runs the plan from `sp`, `bp` with `read` (which reads a word `readable` says the unwind
    /// may read): `None` when framehop must take the frame (see the module's exactness note).
    #[inline(always)]
    pub fn step(
        &self,
        sp: u64,
        bp: u64,
        readable: impl Fn(u64) -> bool,
        read: impl Fn(u64) -> u64,
    ) -> Option<Stepped> {
        let mut out = Stepped {
            ra: 0,
            sp: 0,
            bp,
            bp_at: 0,
            ra_at: 0,
        };
        let new_sp = match self.kind {
            Kind::Sp | Kind::SpBp => {
                let new_sp = sp.checked_add(u64::from(self.sp_off))?;
                // Every word between sp and the return address's slot is readable when both
                // ends are (the same aligned range of the same stack).
                if !readable(sp) {
                    return None;
                }
                if self.kind == Kind::SpBp {
                    let at = sp.checked_add_signed(i64::from(self.bp_at))?;
                    if !readable(at) {
                        return None;
                    }
                    out.bp = read(at);
                    out.bp_at = at;
                }
                new_sp
            }
            Kind::Fp => {
                let new_sp = bp.checked_add(16)?;
                if bp == 0 || new_sp <= sp || !readable(bp) {
                    return None;
                }
                out.bp = read(bp);
                out.bp_at = bp;
                new_sp
            }
            Kind::Empty | Kind::Framehop => return None,
        };
        let slot = new_sp - 8;
        if !readable(slot) {
            return None;
        }
        out.ra = read(slot);
        out.ra_at = slot;
        if out.ra == 0 {
            return None;
        }
        out.sp = new_sp;
        Some(out)
    }
}

/// The plans of the return addresses met, direct-mapped.
pub struct Plans {
    slots: Box<[Plan]>,
}

impl Plans {
    /// Empty (allocates [`SLOTS`] entries from the interposer's arena).
    pub fn new() -> Plans {
        Plans {
            slots: vec![EMPTY; SLOTS].into_boxed_slice(),
        }
    }

    /// The plan for `key` (a return address, or an instruction pointer plus [`FIRST`]),
    /// learned with `learn` when the slot holds another's.
    #[inline(always)]
    pub fn get(&mut self, key: u64, learn: impl FnOnce() -> Plan) -> Plan {
        let i = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 50) as usize % SLOTS;
        let slot = &mut self.slots[i];
        if slot.key == key && slot.kind != Kind::Empty {
            return *slot;
        }
        *slot = Plan { key, ..learn() };
        *slot
    }
}

impl Default for Plans {
    fn default() -> Self {
        Self::new()
    }
}

/// The value the made-up stack of [`learn`] holds at `addr`: far from both made-up register
/// sets, never 0.
fn tag(addr: u64) -> u64 {
    addr ^ 0x4000_0000_0000_0000
}

/// The two made-up register sets (stack pointer, frame pointer): aligned, the frame pointer
/// far above the stack pointer, no two alike.
const PROBES: [(u64, u64); 2] = [
    (0x1000_0000_0000, 0x3000_0000_0000),
    (0x1800_0000_1040, 0x3800_0000_2080),
];

/// The plan of frame address `addr` (`foreign`: outside every known module, left to
/// framehop, whose fallback rule may change with the module list; `own`: in the interposer),
/// given `unwind`, which unwinds the frame with framehop from (ip, sp, bp) with a stack read
/// function and returns framehop's answer and the new (sp, bp).
pub fn learn(
    addr: u64,
    foreign: bool,
    own: bool,
    mut unwind: impl FnMut(
        [u64; 3],
        &mut dyn FnMut(u64) -> Result<u64, ()>,
    ) -> (Result<Option<u64>, ()>, u64, u64),
) -> Plan {
    let flags = u8::from(foreign) * FOREIGN + u8::from(own) * OWN;
    let mut plan = Plan {
        key: addr,
        flags,
        kind: Kind::Framehop,
        ..EMPTY
    };
    if foreign {
        return plan;
    }
    let mut found = [None; 2];
    for (seen, &(sp, bp)) in found.iter_mut().zip(PROBES.iter()) {
        let mut reads = [0u64; 8];
        let mut n = 0;
        let mut read = |a: u64| {
            if let Some(r) = reads.get_mut(n) {
                *r = a;
            }
            n += 1;
            Ok(tag(a))
        };
        let (got, new_sp, new_bp) = unwind([addr, sp, bp], &mut read);
        // The outermost frame (no caller) is rare and left to framehop.
        *seen = match got {
            Ok(Some(ra)) if n <= reads.len() => shape(sp, bp, ra, new_sp, new_bp, &reads[..n]),
            _ => None,
        };
    }
    if let [Some(a), Some(b)] = found {
        if a == b {
            (plan.kind, plan.sp_off, plan.bp_at) = a;
        }
    }
    plan
}

/// Which plan turned made-up (`sp`, `bp`) into (`new_sp`, `new_bp`) with return address `ra`
/// after reading `reads`; `None` when none did.
fn shape(
    sp: u64,
    bp: u64,
    ra: u64,
    new_sp: u64,
    new_bp: u64,
    reads: &[u64],
) -> Option<(Kind, u32, i16)> {
    if ra != tag(new_sp.wrapping_sub(8)) {
        return None;
    }
    let was_read = |a: u64| reads.contains(&a);
    if new_sp == bp.wrapping_add(16) {
        return (new_bp == tag(bp) && was_read(bp)).then_some((Kind::Fp, 0, 0));
    }
    let off = new_sp.wrapping_sub(sp);
    if off == 0 || !off.is_multiple_of(8) || off > 0x8_0000 {
        return None;
    }
    let off = off as u32;
    // Every word read lies in the frame: the stack pointer's side of it.
    if reads.iter().any(|&a| a < sp || a >= new_sp) {
        return None;
    }
    if new_bp == bp {
        return Some((Kind::Sp, off, 0));
    }
    let at = new_bp ^ tag(0);
    if was_read(at) && at >= sp {
        let bp_at = i16::try_from(at - sp).ok()?;
        return Some((Kind::SpBp, off, bp_at));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// framehop's x86_64 rules, as they act on (sp, bp), for the shapes under test.
    fn rule(
        shape: u8,
        regs: [u64; 3],
        read: &mut dyn FnMut(u64) -> Result<u64, ()>,
    ) -> (Result<Option<u64>, ()>, u64, u64) {
        let [_, sp, bp] = regs;
        let (new_sp, new_bp) = match shape {
            // OffsetSp { 3 }
            0 => (sp + 24, bp),
            // OffsetSpAndPopRegisters { 2, [rbx, rbp] }: reads both popped words.
            1 => {
                let _ = read(sp + 16);
                (sp + 40, read(sp + 24).unwrap_or(0))
            }
            // UseFramePointer
            2 => (bp + 16, read(bp).unwrap_or(0)),
            // CFA = bp + 32 (not a shape: agrees with none in both probes)
            3 => (bp + 32, bp),
            // A DWARF expression of the stack pointer's word.
            _ => (read(sp).unwrap_or(0) + 8, bp),
        };
        let ra = read(new_sp - 8).unwrap_or(0);
        (Ok(Some(ra)), new_sp, new_bp)
    }

    #[test]
    fn each_shape_is_told_and_others_go_to_framehop() {
        let learned = |s: u8| learn(0x1234, false, false, |r, read| rule(s, r, read));
        let p = learned(0);
        assert_eq!((p.kind, p.sp_off), (Kind::Sp, 24));
        let p = learned(1);
        assert_eq!((p.kind, p.sp_off, p.bp_at), (Kind::SpBp, 40, 24));
        assert_eq!(learned(2).kind, Kind::Fp);
        assert_eq!(learned(3).kind, Kind::Framehop);
        assert_eq!(learned(4).kind, Kind::Framehop);
        let p = learn(0x1234, true, false, |r, read| rule(0, r, read));
        assert!(p.foreign() && p.kind == Kind::Framehop);
        let p = learn(0x1234, false, true, |r, read| rule(0, r, read));
        assert!(p.own() && p.kind == Kind::Sp);
    }

    #[test]
    fn a_plan_runs_like_the_rule_or_not_at_all() {
        let stack: [u64; 8] = [1, 2, 0x70, 0x1000, 5, 6, 0, 0x2000];
        let base = stack.as_ptr() as u64;
        let read = |a: u64| stack[((a - base) / 8) as usize];
        let inside = |a: u64| a >= base && a < base + 64 && a.is_multiple_of(8);
        let sp_bp = learn(1, false, false, |r, rd| rule(1, r, rd));
        // bp from sp + 24, return address at sp + 32.
        let s = sp_bp
            .step(base, 9, inside, read)
            .map(|s| (s.ra, s.sp, s.bp, s.bp_at, s.ra_at));
        assert_eq!(s, Some((5, base + 40, 0x1000, base + 24, base + 32)));
        // A read outside the stack, or a return address of 0: framehop's call.
        assert!(sp_bp.step(base + 32, 9, inside, read).is_none());
        let sp = learn(1, false, false, |r, rd| rule(0, r, rd));
        assert!(sp.step(base + 32, 9, inside, read).is_none());
        let s = sp.step(base + 40, 9, inside, read).map(|s| (s.ra, s.bp));
        assert_eq!(s, Some((0x2000, 9)));
        // The frame pointer must move up.
        let fp = learn(1, false, false, |r, rd| rule(2, r, rd));
        assert!(fp.step(base + 16, base, inside, read).is_none());
        let s = fp
            .step(base, base + 8, inside, read)
            .map(|s| (s.ra, s.sp, s.bp));
        assert_eq!(s, Some((0x70, base + 24, 2)));
    }
}
