//! Stack scanning, the last fallback in code no table covers, as Breakpad's stack walkers
//! do: look up the stack for the first word that is a return address, that is, an address in
//! executable code right after a call instruction. Hand-written SIMD code that uses the frame
//! pointer register for data (libjpeg-turbo's Huffman encoder), and run-time generated code
//! that pushes registers without a frame (GStreamer's ORC), leave neither the frame-pointer
//! nor the return-address rule anything to follow, but their caller's `call` pushed the
//! return address a few words up.
//!
//! x86_64 only: there `call` pushes the return address, so the caller's stack pointer is
//! exactly the word above it. (On AArch64 a sampled leaf without tables keeps its return
//! address in the link register, which [`crate::framehop_walk`] tries first.)
//!
//! A heuristic, so its frames are counted apart, and each candidate must hold up: the word
//! must follow a call instruction in a module's code, and a direct call must target
//! executable code, so a saved register or stale data rarely passes. (The target need not
//! contain the sampled instruction: libjpeg-turbo's C wrappers tail-jump into their SIMD
//! routines, so the return address is that of a call to the wrapper.)

use crate::framehop_walk::FramehopArch;
use crate::space::AddressSpace;
use crate::stack::StackCopy;

/// How many words above the stack pointer are looked at: enough for a SIMD routine's saved
/// registers and aligned locals.
pub(crate) const SCAN_WORDS: u64 = 64;

/// The call that ends right before a return address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    /// `call rel32`, to this address.
    Direct(u64),
    /// A call through a register or memory.
    Indirect,
}

/// The x86_64 call instruction whose last byte is the last of `before` (the up to 7 bytes
/// ending at return address `ra`), if one is there.
pub(crate) fn x86_64_call_before(before: &[u8], ra: u64) -> Option<Call> {
    let n = before.len();
    let at = |back: usize| n.checked_sub(back).and_then(|i| before.get(i)).copied();
    if at(5) == Some(0xe8) {
        let rel = i32::from_le_bytes(before.get(n - 4..)?.try_into().ok()?);
        return Some(Call::Direct(ra.wrapping_add(rel as i64 as u64)));
    }
    let modrm = |back: usize, mask: u8, value: u8| {
        at(back) == Some(0xff) && at(back - 1).is_some_and(|m| m & mask == value)
    };
    // ff /2 with its addressing forms: register (2 bytes), [reg] (2), [reg+disp8] (3),
    // [rip+disp32] (6), [reg+disp32] (6), and the SIB forms one byte longer.
    let indirect = modrm(2, 0xf8, 0xd0)
        || (modrm(2, 0xf8, 0x10) && at(1) != Some(0x14) && at(1) != Some(0x15))
        || modrm(3, 0xf8, 0x50)
        || modrm(3, 0xff, 0x14)
        || modrm(4, 0xff, 0x54)
        || modrm(6, 0xff, 0x15)
        || modrm(6, 0xf8, 0x90)
        || modrm(7, 0xff, 0x94);
    indirect.then_some(Call::Indirect)
}

/// The first return address above the stack pointer (see the module doc), with the
/// registers moved to the caller; `None` leaves them as they were.
pub(crate) fn scan<A: FramehopArch>(
    space: &AddressSpace<A>,
    pc: u64,
    state: &mut A::Regs,
    copy: &StackCopy<'_>,
) -> Option<u64> {
    if A::LINK_REGISTER || A::WORD_SIZE != 8 {
        return None;
    }
    let sp = A::sp(state);
    for i in 0..SCAN_WORDS {
        let at = sp.checked_add(i * 8)?;
        let ra = copy.u64(at)?;
        if ra == pc || !space.is_mapped(ra.wrapping_sub(1)) {
            continue;
        }
        let believed = match space.code_before(ra, 7).map(|b| x86_64_call_before(b, ra)) {
            Some(Some(Call::Direct(target))) => space.is_mapped(target),
            Some(Some(Call::Indirect)) => true,
            _ => false,
        };
        if believed {
            let fp = A::dwarf(state, A::FP_REG, pc).unwrap_or(0);
            A::restore(state, ra, at.checked_add(8)?, fp, ra);
            return Some(A::strip(state, ra));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_forms_are_recognized() {
        let ra = 0x1000;
        // call rel32 to 0x900: e8 + (0x900 - 0x1000)
        let rel = (0x900i32 - 0x1000).to_le_bytes();
        let direct = [0x90, 0x90, 0xe8, rel[0], rel[1], rel[2], rel[3]];
        assert_eq!(x86_64_call_before(&direct, ra), Some(Call::Direct(0x900)));
        for code in [
            &[0x41, 0xff, 0xd3][..],             // call *%r11
            &[0xff, 0x15, 1, 2, 3, 4][..],       // call *disp(%rip)
            &[0xff, 0x50, 0x08][..],             // call *8(%rax)
            &[0xff, 0x90, 0, 1, 0, 0][..],       // call *0x100(%rax)
            &[0xff, 0x14, 0x24][..],             // call *(%rsp)
            &[0xff, 0x54, 0x24, 0x08][..],       // call *8(%rsp)
            &[0xff, 0x94, 0x24, 0, 1, 0, 0][..], // call *0x100(%rsp)
            &[0xff, 0x13][..],                   // call *(%rbx)
        ] {
            assert_eq!(
                x86_64_call_before(code, ra),
                Some(Call::Indirect),
                "{code:x?}"
            );
        }
        for code in [
            &[0x90; 7][..],
            &[0x48, 0x89, 0xe5][..],
            &[][..],
            &[0xff][..],
        ] {
            assert_eq!(x86_64_call_before(code, ra), None, "{code:x?}");
        }
    }
}
