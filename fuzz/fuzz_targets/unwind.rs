//! Any bytes as a module's unwind tables and as a sample's stack copy: unwinding never
//! panics, never loops, and yields at most MAX_FRAMES + 1 addresses, on every architecture.
#![no_main]
use std::sync::Arc;

use crossprof_unwind::arch::{Aarch64, Arm, Riscv64, X86, X86_64};
use crossprof_unwind::{AddressSpace, Architecture, Registers, UnwindSections, MAX_FRAMES};
use libfuzzer_sys::fuzz_target;

fn unwind<A: Architecture>(s: &Arc<UnwindSections>, data: &[u8], word: &dyn Fn(usize) -> u64) {
    let mut space = AddressSpace::<A>::new(false);
    space.add_module("fuzz", 0..u64::MAX, word(0), s);
    let regs = Registers { pc: word(1), sp: word(2), fp: word(3), lr: word(4), arm: [word(5) as u32; 16] };
    let mut out = Vec::new();
    space.unwind(regs, data, &mut out);
    assert!(out.len() <= MAX_FRAMES + 1);
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = UnwindSections::from_elf(data, None) else { return };
    let s = Arc::new(s);
    let word = |i: usize| {
        data.get(i * 8..i * 8 + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .unwrap_or(0)
    };
    unwind::<X86_64>(&s, data, &word);
    unwind::<Aarch64>(&s, data, &word);
    unwind::<Arm>(&s, data, &word);
    unwind::<X86>(&s, data, &word);
    unwind::<Riscv64>(&s, data, &word);
});
