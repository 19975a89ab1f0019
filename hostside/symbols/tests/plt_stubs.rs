//! PLT stubs named as each architecture's objdump labels them (`malloc@plt`): a program that
//! calls the C library, built by gcc for x86_64 (lazy binding, and CET's `.plt.sec`) and by
//! the AArch64, 32-bit ARM, i686 (position-independent or not) and RISC-V cross compilers,
//! symbolized at each stub objdump names, first and last byte.

mod support;

use std::path::Path;
use std::process::Command;

use crossprof_symbols::{Lookup, Module};
use support::*;

const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    char *p = malloc(argc * 64);
    memset(p, 0, 64);
    strcpy(p, argv[0]);
    puts(p);
    free(p);
    return (int)strlen(argv[0]) & 1;
}
"#;

/// `objdump`'s stub labels in `binary`: (address, name), leaving out the lazy binder
/// (`<x@plt-0x10>`); ifunc stubs are `*ABS*+0xRESOLVER@plt`.
fn objdump_stubs(objdump: &str, binary: &Path) -> Vec<(u64, String)> {
    let text = stdout(
        Command::new(objdump)
            .args(["-d", "-j", ".plt", "-j", ".plt.sec", "-j", ".plt.got"])
            .arg(binary),
    );
    text.lines()
        .filter_map(|l| {
            let (addr, rest) = l.split_once(" <")?;
            let name = rest.strip_suffix(">:")?;
            (name.ends_with("@plt") && !name.contains("@plt-"))
                .then(|| Some((u64::from_str_radix(addr, 16).ok()?, name.to_string())))?
        })
        .collect()
}

#[test]
fn plt_stubs_are_named_as_objdump_names_them_on_every_architecture() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("calls.c");
    std::fs::write(&source, PROGRAM).unwrap();
    // (tag, the binutils prefix, flags)
    let builds: [(&str, &str, &[&str]); 7] = [
        ("x86_64-lazy", "", &["-Wl,-z,lazy"]),
        ("x86_64-cet", "", &["-fcf-protection", "-Wl,-z,ibtplt"]),
        ("aarch64", "aarch64-linux-gnu-", &[]),
        ("armv7", "arm-linux-gnueabihf-", &[]),
        ("i686-pie", "i686-linux-gnu-", &["-fpie", "-pie"]),
        ("i686", "i686-linux-gnu-", &["-fno-pie", "-no-pie"]),
        ("riscv64", "riscv64-linux-gnu-", &[]),
    ];
    for (tag, prefix, flags) in builds {
        let (cc, objdump) = (format!("{prefix}gcc"), format!("{prefix}objdump"));
        let binary = dir.path().join(tag);
        sh(Command::new(&cc)
            .args(["-O2", "-Wl,--build-id"])
            .args(flags)
            .arg(&source)
            .arg("-o")
            .arg(&binary));
        let stubs: Vec<(u64, String)> = objdump_stubs(&objdump, &binary)
            .into_iter()
            .filter(|(_, n)| !n.contains('*'))
            .collect();
        assert!(stubs.len() >= 5, "{tag}: objdump names {stubs:?}");
        let path = binary.to_str().unwrap();
        let located = Lookup::default().locate(path, &build_id(&binary));
        let module = Module::load(&located).unwrap();
        for (i, (addr, name)) in stubs.iter().enumerate() {
            // A stub's last byte: the next stub's first, less one (the last stub: 8 bytes on).
            let last = stubs.get(i + 1).map_or(addr + 8, |(next, _)| next - 1);
            for at in [*addr, last] {
                let got = module.frames(at).last().and_then(|f| f.function.clone());
                assert_eq!(got.as_deref(), Some(name.as_str()), "{tag} at {at:#x}");
            }
        }
    }
}

/// The C library this test runs with calls its own ifuncs (`memcpy`, `strlen`) through
/// `IRELATIVE` stubs, which objdump labels `*ABS*+0xRESOLVER@plt`: each is named as `nm`
/// names the resolver's address; every other stub as objdump labels it.
#[test]
fn the_c_library_s_stubs_and_ifunc_stubs_are_named() {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let Some(libc) = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so"))
    else {
        return; // not a glibc system: nothing to compare
    };
    let libc = Path::new(libc);
    let located = Lookup::default().locate(libc.to_str().unwrap(), &build_id(libc));
    let module = Module::load(&located).unwrap();
    let nm = stdout(Command::new("nm").args(["-D", "--defined-only"]).arg(libc));
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
    let mut ifuncs = 0;
    for (addr, label) in objdump_stubs("objdump", libc) {
        let got = module.frames(addr).last().and_then(|f| f.function.clone());
        match label
            .strip_prefix("*ABS*+0x")
            .and_then(|r| r.strip_suffix("@plt"))
        {
            Some(resolver) => {
                let names = named_at(u64::from_str_radix(resolver, 16).unwrap());
                assert!(
                    got.as_ref().is_some_and(|g| names.contains(g)),
                    "{label} at {addr:#x}: ours {got:?}, nm {names:?}"
                );
                ifuncs += 1;
            }
            None => assert_eq!(got.as_deref(), Some(label.as_str()), "at {addr:#x}"),
        }
    }
    assert!(ifuncs > 0, "no IRELATIVE stub in {}", libc.display());
}
