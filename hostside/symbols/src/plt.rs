//! Names for the stubs of a module's procedure linkage table (`realloc@plt`), as objdump and
//! perf make them up: no symbol table names a stub, so a sample in one would otherwise be
//! the PLT's unwind-table start (`libc.so.6+0x26000`), whichever function it calls.
//!
//! Written here because no crate does it (object reads the relocations; binutils' BFD
//! synthesizes these names in C). x86_64 only for now: every stub there holds an indirect
//! jump through its GOT slot, `jmp *slot(%rip)` (with a `bnd` prefix and an `endbr64` before it
//! under CET), and the slot's relocation names the function (for an ifunc, the addend names
//! its resolver, which carries the function's name). The PLT's first entry, the lazy binder,
//! names no function and stays unnamed.

use std::collections::HashMap;

use object::{
    Architecture, Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationTarget,
};

/// `endbr64`, the first instruction of a stub under CET.
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];

/// Longest stub: the lazy PLT's 16-byte entries.
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
    if file.architecture() != Architecture::X86_64 {
        return Vec::new();
    }
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
        jumps(section.address(), data, &slots, &mut out);
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

/// Adds a stub for each `jmp *slot(%rip)` in `data` (at address `base`) whose slot `slots`
/// names.
fn jumps(base: u64, data: &[u8], slots: &HashMap<u64, String>, out: &mut Vec<Stub>) {
    let mut i = 0;
    while i + 6 <= data.len() {
        // `ff 25 disp32`, or `f2 ff 25 disp32` (bnd jmp).
        let op = if data[i..].starts_with(&[0xf2, 0xff, 0x25]) {
            i + 1
        } else if data[i..].starts_with(&[0xff, 0x25]) {
            i
        } else {
            i += 1;
            continue;
        };
        let Some(disp) = data.get(op + 2..op + 6) else {
            break;
        };
        let disp = i32::from_le_bytes([disp[0], disp[1], disp[2], disp[3]]);
        let next = base.wrapping_add((op + 6) as u64);
        let slot = next.wrapping_add(disp as i64 as u64);
        if let Some(name) = slots.get(&slot) {
            let start = if i >= 4 && data[i - 4..i] == ENDBR64 {
                i - 4
            } else {
                i
            };
            out.push(Stub {
                addr: base.wrapping_add(start as u64),
                size: 0,
                name: format!("{name}@plt"),
            });
        }
        i = op + 6;
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
        jumps(0x1010, &lazy, &slots(), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].addr, out[0].name.as_str()), (0x1010, "realloc@plt"));
        // A CET entry at 0x2000: endbr64; bnd jmp *0x3008 (rip 0x200b + 0xffd).
        let mut cet = ENDBR64.to_vec();
        cet.extend([0xf2, 0xff, 0x25, 0xfd, 0x0f, 0x00, 0x00]);
        cet.extend([0x0f, 0x1f, 0x44, 0x00, 0x00]);
        let mut out = Vec::new();
        jumps(0x2000, &cet, &slots(), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].addr, out[0].name.as_str()), (0x2000, "free@plt"));
        // A jump through a slot no relocation names (the lazy binder's) gives nothing, and
        // truncated bytes never panic.
        let mut out = Vec::new();
        jumps(
            0x1000,
            &[0xff, 0x25, 0x00, 0x10, 0x00, 0x00],
            &slots(),
            &mut out,
        );
        jumps(0x1000, &[0xff, 0x25, 0x00], &slots(), &mut out);
        jumps(0x1000, &[0xf2, 0xff, 0x25, 0x00, 0x10], &slots(), &mut out);
        assert!(out.is_empty());
    }

    /// This test binary's own stubs (it calls the C library through its PLT), against the
    /// labels `objdump -d` gives them.
    #[test]
    fn this_test_binary_s_stubs_are_named_as_objdump_names_them() {
        let exe = std::env::current_exe().expect("test binary");
        let bytes = std::fs::read(&exe).expect("read");
        let file = object::File::parse(&*bytes).expect("parse");
        let ours: Vec<(u64, String)> = stubs(&file).into_iter().map(|s| (s.addr, s.name)).collect();
        let theirs: Vec<(u64, String)> = objdump_stubs(&exe)
            .into_iter()
            .filter(|(_, n)| !n.contains('*'))
            .collect();
        assert!(!theirs.is_empty(), "objdump names no stub");
        assert_eq!(ours, theirs);
    }

    /// `objdump -d`'s stub labels of `path`: (address, name), the lazy binder left out.
    fn objdump_stubs(path: &std::path::Path) -> Vec<(u64, String)> {
        let o = std::process::Command::new("objdump")
            .args(["-d", "-j", ".plt", "-j", ".plt.sec", "-j", ".plt.got"])
            .arg(path)
            .output()
            .expect("objdump (binutils)");
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| {
                let (addr, rest) = l.split_once(" <")?;
                let name = rest.strip_suffix(">:")?;
                (name.ends_with("@plt") && !name.contains("@plt-"))
                    .then(|| Some((u64::from_str_radix(addr, 16).ok()?, name.to_string())))?
            })
            .collect()
    }

    /// The C library this test runs with calls its own ifuncs (`memcpy`, `strlen`) through
    /// `IRELATIVE` stubs, which objdump labels `*ABS*+0xRESOLVER@plt`: each gets the name `nm`
    /// gives the resolver's address.
    #[test]
    fn the_c_library_s_ifunc_stubs_are_named_by_their_resolver() {
        let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
        let Some(libc) = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so"))
        else {
            return; // not a glibc system: nothing to compare
        };
        let libc = std::path::Path::new(libc);
        let bytes = std::fs::read(libc).expect("read libc");
        let file = object::File::parse(&*bytes).expect("parse libc");
        let ours: HashMap<u64, String> =
            stubs(&file).into_iter().map(|s| (s.addr, s.name)).collect();
        let nm = std::process::Command::new("nm")
            .args(["-D", "--defined-only"])
            .arg(libc)
            .output()
            .expect("nm (binutils)");
        let nm = String::from_utf8_lossy(&nm.stdout);
        let named_at = |addr: u64| -> Vec<String> {
            nm.lines()
                .filter_map(|l| {
                    let mut f = l.split_whitespace();
                    let a = u64::from_str_radix(f.next()?, 16).ok()?;
                    let name = f.nth(1)?;
                    (a == addr).then(|| format!("{}@plt", name.split('@').next().unwrap_or(name)))
                })
                .collect()
        };
        let theirs = objdump_stubs(libc);
        let mut ifuncs = 0;
        for (addr, label) in &theirs {
            let got = ours.get(addr);
            match label
                .strip_prefix("*ABS*+0x")
                .and_then(|r| r.strip_suffix("@plt"))
            {
                Some(resolver) => {
                    let resolver = u64::from_str_radix(resolver, 16).expect("hex");
                    let names = named_at(resolver);
                    assert!(
                        got.is_some_and(|g| names.contains(g)),
                        "{label} at {addr:#x}: ours {got:?}, nm {names:?}"
                    );
                    ifuncs += 1;
                }
                None => assert_eq!(got, Some(label), "at {addr:#x}"),
            }
        }
        assert!(ifuncs > 0, "no IRELATIVE stub in {}", libc.display());
    }
}
