//! Names for the stubs of a module's procedure linkage table (`realloc@plt`), as objdump and
//! perf make them up: no symbol table names a stub, so a sample in one would otherwise be
//! the PLT's unwind-table start (`libc.so.6+0x26000`), whichever function it calls.
//!
//! Written here because no crate does it (object reads the relocations; binutils' BFD
//! synthesizes these names in C). Each stub loads the address to jump to from its GOT slot,
//! and the slot's relocation names the function (for an ifunc, the addend names its resolver,
//! which carries the function's name). The slot is decoded from the stub's instructions:
//! - x86_64: `jmp *slot(%rip)`, with a `bnd` prefix and an `endbr64` before it under CET;
//! - i686: `jmp *slot` in position-dependent code, `jmp *offset(%ebx)` (from the GOT) in
//!   position-independent code;
//! - RISC-V: `auipc t3, hi; ld t3, lo(t3)`;
//! - AArch64: `adrp x16, slot page; ldr x17, [x16, slot offset]`, after a `bti c` under BTI;
//! - 32-bit ARM: `add ip, pc, #a; add ip, ip, #b; [add ip, ip, #c;] ldr pc, [ip, #d]!`.
//!
//! The PLT's first entry, the lazy binder, names no function and stays unnamed.

use std::collections::HashMap;

use object::{
    Architecture, Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationTarget,
};

/// Longest stub: the lazy PLT's 16-byte entries (x86, and RISC-V's four instructions).
const MAX_STUB: u64 = 16;

/// One stub: where it starts, its size and the name it gets (`function@plt`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stub {
    pub(crate) addr: u64,
    pub(crate) size: u64,
    pub(crate) name: String,
}

/// The named stubs of `file`, by address; empty for other architectures or without dynamic
/// relocations.
pub(crate) fn stubs(file: &object::File<'_>) -> Vec<Stub> {
    let arch = file.architecture();
    if !matches!(
        arch,
        Architecture::X86_64
            | Architecture::I386
            | Architecture::Aarch64
            | Architecture::Arm
            | Architecture::Riscv64
    ) {
        return Vec::new();
    }
    // i686's position-independent stubs jump through `%ebx`, the GOT's address.
    let got = [".got.plt", ".got"]
        .iter()
        .find_map(|n| file.section_by_name(n))
        .map_or(0, |s| s.address());
    let slots = slot_names(file);
    if slots.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for section in file.sections() {
        let Ok(name) = section.name() else { continue };
        if !matches!(name, ".plt" | ".plt.sec" | ".plt.got") {
            continue;
        }
        let Ok(data) = section.data() else { continue };
        let base = section.address();
        match arch {
            Architecture::X86_64 => jumps(base, data, X86::RipRelative, &slots, &mut out),
            Architecture::I386 => jumps(base, data, X86::I386 { got }, &slots, &mut out),
            Architecture::Aarch64 => aarch64(base, data, &slots, &mut out),
            Architecture::Riscv64 => riscv64(base, data, &slots, &mut out),
            _ => arm(base, data, file.is_little_endian(), &slots, &mut out),
        }
    }
    out.sort_by_key(|s| s.addr);
    out.dedup_by_key(|s| s.addr);
    for k in 0..out.len() {
        let next = out.get(k + 1).map(|n| n.addr);
        let s = &mut out[k];
        s.size = next.map_or(MAX_STUB, |n| n.saturating_sub(s.addr).min(MAX_STUB));
    }
    out
}

/// The function each GOT slot with a dynamic relocation is for: the relocation's symbol, or
/// for an `IRELATIVE` slot (an ifunc the module calls in itself, as the C library calls its
/// own `memcpy`) the function whose resolver the addend is (objdump: `*ABS*+0x9f550@plt`).
fn slot_names(file: &object::File<'_>) -> HashMap<u64, String> {
    let mut slots = HashMap::new();
    let (Some(symbols), Some(relocations)) =
        (file.dynamic_symbol_table(), file.dynamic_relocations())
    else {
        return slots;
    };
    let mut resolvers: Option<HashMap<u64, &str>> = None;
    for (slot, r) in relocations {
        let symbol = match r.target() {
            RelocationTarget::Symbol(i) => {
                symbols.symbol_by_index(i).ok().and_then(|s| s.name().ok())
            }
            _ => None,
        };
        // IRELATIVE names no symbol (index 0, or none): its addend is the resolver.
        let name = match symbol.filter(|n| !n.is_empty()) {
            Some(name) => Some(name),
            None if r.addend() > 0 => {
                let by_address = resolvers.get_or_insert_with(|| {
                    symbols
                        .symbols()
                        // An ifunc is no "definition" to object: it is defined all the same.
                        .filter(|s| !s.is_undefined() && s.address() != 0)
                        .filter_map(|s| Some((s.address(), s.name().ok()?)))
                        .collect()
                });
                by_address.get(&(r.addend() as u64)).copied()
            }
            None => None,
        };
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            slots.entry(slot).or_insert_with(|| name.to_string());
        }
    }
    slots
}

/// How an x86 stub's indirect jump gives its slot.
#[derive(Clone, Copy)]
enum X86 {
    /// x86_64: `jmp *disp(%rip)`.
    RipRelative,
    /// i686: `jmp *abs32` (position-dependent code) or `jmp *disp(%ebx)`, where `%ebx`
    /// holds the GOT's address (`.got.plt`), given here.
    I386 { got: u64 },
}

/// Adds a stub for each indirect `jmp` in `data` (at address `base`) whose slot `slots`
/// names (see [`X86`]).
fn jumps(base: u64, data: &[u8], mode: X86, slots: &HashMap<u64, String>, out: &mut Vec<Stub>) {
    let mut i = 0;
    while i + 6 <= data.len() {
        // `ff 25 imm32` or `ff a3 disp32`, perhaps after `f2` (bnd jmp).
        let op = if data[i] == 0xf2 { i + 1 } else { i };
        let (Some(&[0xff, modrm]), Some(imm)) = (data.get(op..op + 2), data.get(op + 2..op + 6))
        else {
            i += 1;
            continue;
        };
        let imm = i32::from_le_bytes([imm[0], imm[1], imm[2], imm[3]]);
        let next = base.wrapping_add((op + 6) as u64);
        let slot = match (mode, modrm) {
            (X86::RipRelative, 0x25) => next.wrapping_add(imm as i64 as u64),
            (X86::I386 { .. }, 0x25) => u64::from(imm as u32),
            (X86::I386 { got }, 0xa3) => (got as u32).wrapping_add(imm as u32).into(),
            _ => {
                i += 1;
                continue;
            }
        };
        // CET stubs begin with `endbr64` (`f3 0f 1e fa`) or `endbr32` (`... fb`).
        let endbr = i >= 4 && data[i - 4..i - 1] == [0xf3, 0x0f, 0x1e] && data[i - 1] >= 0xfa;
        let start = if endbr { i - 4 } else { i };
        add_stub(base, start, slot, slots, out);
        i = op + 6;
    }
}

/// RISC-V (64-bit) stubs: `auipc t3, hi` then `ld t3, lo(t3)`.
fn riscv64(base: u64, data: &[u8], slots: &HashMap<u64, String>, out: &mut Vec<Stub>) {
    let w: Vec<(usize, u32)> = words(data, true).collect();
    for k in 0..w.len().saturating_sub(1) {
        let (at, auipc) = w[k];
        let (_, ld) = w[k + 1];
        // AUIPC t3 (x28); LD t3, imm(t3).
        if auipc & 0xfff != 0xe17 || ld & 0xfffff != 0xe3e03 {
            continue;
        }
        let hi = i64::from((auipc & 0xffff_f000) as i32);
        let lo = i64::from((ld as i32) >> 20);
        let pc = base.wrapping_add(at as u64);
        let slot = pc.wrapping_add(hi as u64).wrapping_add(lo as u64);
        add_stub(base, at, slot, slots, out);
    }
}

/// The 32-bit instruction words of `data`, in the file's byte order, with their offsets.
fn words(data: &[u8], little: bool) -> impl Iterator<Item = (usize, u32)> + '_ {
    data.chunks_exact(4).enumerate().map(move |(i, w)| {
        let w = [w[0], w[1], w[2], w[3]];
        let v = if little {
            u32::from_le_bytes(w)
        } else {
            u32::from_be_bytes(w)
        };
        (i * 4, v)
    })
}

/// Names `slot`'s stub starting at `data[start..]` (at `base + start`), if a relocation
/// names the slot.
fn add_stub(base: u64, start: usize, slot: u64, slots: &HashMap<u64, String>, out: &mut Vec<Stub>) {
    if let Some(name) = slots.get(&slot) {
        out.push(Stub {
            addr: base.wrapping_add(start as u64),
            size: 0,
            name: format!("{name}@plt"),
        });
    }
}

/// AArch64 stubs: `adrp x16, page` then `ldr x17, [x16, #offset]`.
fn aarch64(base: u64, data: &[u8], slots: &HashMap<u64, String>, out: &mut Vec<Stub>) {
    /// `bti c`, a stub's first instruction under branch target identification.
    const BTI_C: u32 = 0xd503_245f;
    let w: Vec<(usize, u32)> = words(data, true).collect();
    for k in 0..w.len().saturating_sub(1) {
        let (at, adrp) = w[k];
        let (_, ldr) = w[k + 1];
        // ADRP x16: op 1, bits 28..24 = 10000, Rd = 16.
        // LDR x17, [x16, #imm12 * 8]: 64-bit unsigned offset form, Rn = 16, Rt = 17.
        if adrp & 0x9f00_001f != 0x9000_0010 || ldr & 0xffc0_03ff != 0xf940_0211 {
            continue;
        }
        let immlo = u64::from((adrp >> 29) & 3);
        let immhi = u64::from((adrp >> 5) & 0x7ffff);
        // A 21-bit signed page count.
        let pages = (((immhi << 2) | immlo) << 43) as i64 >> 43;
        let pc = base.wrapping_add(at as u64);
        let page = (pc & !0xfff).wrapping_add((pages << 12) as u64);
        let slot = page.wrapping_add(u64::from((ldr >> 10) & 0xfff) * 8);
        let start = if k > 0 && w[k - 1].1 == BTI_C {
            at - 4
        } else {
            at
        };
        add_stub(base, start, slot, slots, out);
    }
}

/// 32-bit ARM stubs (ARM state): `add ip, pc, #a`, one or two `add ip, ip, #b`, then
/// `ldr pc, [ip, #c]!`; the slot is the sum, `pc` reading 8 bytes ahead.
fn arm(base: u64, data: &[u8], little: bool, slots: &HashMap<u64, String>, out: &mut Vec<Stub>) {
    /// A data-processing immediate: 8 bits rotated right by twice the 4-bit rotation.
    fn imm(w: u32) -> u32 {
        (w & 0xff).rotate_right(((w >> 8) & 0xf) * 2)
    }
    let w: Vec<(usize, u32)> = words(data, little).collect();
    for k in 0..w.len() {
        let (at, first) = w[k];
        // add ip, pc, #imm
        if first & 0xffff_f000 != 0xe28f_c000 {
            continue;
        }
        let mut slot = base.wrapping_add(at as u64).wrapping_add(8) as u32;
        slot = slot.wrapping_add(imm(first));
        let mut j = k + 1;
        // add ip, ip, #imm (at most two)
        while j < w.len() && j <= k + 2 && w[j].1 & 0xffff_f000 == 0xe28c_c000 {
            slot = slot.wrapping_add(imm(w[j].1));
            j += 1;
        }
        // ldr pc, [ip, #imm]!
        match w.get(j) {
            Some(&(_, ldr)) if ldr & 0xffff_f000 == 0xe5bc_f000 => {
                slot = slot.wrapping_add(ldr & 0xfff);
                add_stub(base, at, u64::from(slot), slots, out);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots() -> HashMap<u64, String> {
        [
            (0x3000, "realloc".to_string()),
            (0x3008, "free".to_string()),
        ]
        .into_iter()
        .collect()
    }

    #[test]
    fn lazy_and_cet_stubs_are_named_by_their_slot() {
        // A lazy entry at 0x1010: jmp *0x3000 (rip 0x1016 + 0x1fea), push, jmp PLT0.
        let mut lazy = vec![0u8; 16];
        lazy[..6].copy_from_slice(&[0xff, 0x25, 0xea, 0x1f, 0x00, 0x00]);
        lazy[6..11].copy_from_slice(&[0x68, 0, 0, 0, 0]);
        lazy[11..16].copy_from_slice(&[0xe9, 0xeb, 0xff, 0xff, 0xff]);
        let mut out = Vec::new();
        jumps(0x1010, &lazy, X86::RipRelative, &slots(), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].addr, out[0].name.as_str()), (0x1010, "realloc@plt"));
        // A CET entry at 0x2000: endbr64; bnd jmp *0x3008 (rip 0x200b + 0xffd).
        let mut cet = vec![0xf3, 0x0f, 0x1e, 0xfa];
        cet.extend([0xf2, 0xff, 0x25, 0xfd, 0x0f, 0x00, 0x00]);
        cet.extend([0x0f, 0x1f, 0x44, 0x00, 0x00]);
        let mut out = Vec::new();
        jumps(0x2000, &cet, X86::RipRelative, &slots(), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].addr, out[0].name.as_str()), (0x2000, "free@plt"));
        // A jump through a slot no relocation names (the lazy binder's) gives nothing, and
        // truncated bytes never panic.
        let mut out = Vec::new();
        let rip = X86::RipRelative;
        jumps(
            0x1000,
            &[0xff, 0x25, 0, 0x10, 0, 0],
            rip,
            &slots(),
            &mut out,
        );
        jumps(0x1000, &[0xff, 0x25, 0], rip, &slots(), &mut out);
        jumps(
            0x1000,
            &[0xf2, 0xff, 0x25, 0, 0x10],
            rip,
            &slots(),
            &mut out,
        );
        assert!(out.is_empty());
    }

    #[test]
    fn other_architectures_stubs_are_named_by_their_slot() {
        // aarch64-linux-gnu-objdump: 740 <malloc@plt>: adrp x16, 20000; ldr x17, [x16, #24];
        // add x16, x16, #0x18; br x17.
        let code: Vec<u8> = [0x9000_0110u32, 0xf940_0e11, 0x9100_6210, 0xd61f_0220]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let slots: HashMap<u64, String> = [(0x20018, "malloc".to_string())].into_iter().collect();
        let mut out = Vec::new();
        aarch64(0x740, &code, &slots, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].addr, out[0].name.as_str()), (0x740, "malloc@plt"));
        // arm-linux-gnueabihf-objdump: 4a8 <malloc@plt>: add ip, pc, #0, 12;
        // add ip, ip, #4096; ldr pc, [ip, #2928]!  (slot 0x4b0 + 0x1000 + 0xb70 = 0x2020).
        let code: Vec<u8> = [0xe28f_c600u32, 0xe28c_ca01, 0xe5bc_fb70]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let slots: HashMap<u64, String> = [(0x2020, "malloc".to_string())].into_iter().collect();
        let mut out = Vec::new();
        arm(0x4a8, &code, true, &slots, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].addr, out[0].name.as_str()), (0x4a8, "malloc@plt"));
        // riscv64-linux-gnu-objdump: 6c0 <malloc@plt>: auipc t3, 0x2; ld t3, -1696(t3)
        // (slot 0x2020); jalr t1, t3; nop.
        let rv: Vec<u8> = [0x0000_2e17u32, 0x960e_3e03, 0x000e_0367, 0x0000_0013]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let slots: HashMap<u64, String> = [(0x2020, "malloc".to_string())].into_iter().collect();
        let mut out = Vec::new();
        riscv64(0x6c0, &rv, &slots, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].addr, out[0].name.as_str()), (0x6c0, "malloc@plt"));
        // i686-linux-gnu-objdump: 1060 <malloc@plt>: jmp *0x18(%ebx), the GOT at 0x4000; and
        // 8049060: jmp *0x804c00c in a position-dependent program.
        let slots: HashMap<u64, String> = [
            (0x4018, "malloc".to_string()),
            (0x804_c00c, "free".to_string()),
        ]
        .into_iter()
        .collect();
        let mut out = Vec::new();
        let pic = [0xff, 0xa3, 0x18, 0, 0, 0, 0x68, 0x18, 0, 0, 0];
        jumps(0x1060, &pic, X86::I386 { got: 0x4000 }, &slots, &mut out);
        let fixed = [0xff, 0x25, 0x0c, 0xc0, 0x04, 0x08, 0x68, 0x18, 0, 0, 0];
        jumps(
            0x804_9060,
            &fixed,
            X86::I386 { got: 0x4000 },
            &slots,
            &mut out,
        );
        let got: Vec<(u64, &str)> = out.iter().map(|s| (s.addr, s.name.as_str())).collect();
        assert_eq!(got, [(0x1060, "malloc@plt"), (0x804_9060, "free@plt")]);
        // Cut short: nothing, no panic.
        let mut out = Vec::new();
        arm(0x4a8, &code[..8], true, &slots, &mut out);
        aarch64(0x740, &code[..6], &slots, &mut out);
        riscv64(0x6c0, &rv[..6], &slots, &mut out);
        assert!(out.is_empty());
    }
}
