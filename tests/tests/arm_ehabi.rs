//! Issue 5, ARMv7: the EHABI unwinder on real Thumb-2 code from Debian's armhf gcc, run under
//! qemu-arm-static. The program samples itself with SIGPROF (qemu-user has no
//! perf_event_open), copying r0..r15 and the stack like `rec --call-graph dwarf` does; the
//! host unwinds each copy from the binary's `.ARM.exidx` and symbolizes with its DWARF.
//! The recording-on-a-board path is covered by the emulated-board suite.

use std::process::Command;

use crossprof_format::Arch;
use crossprof_symbols::{Lookup, MatchKind, Module};
use crossprof_tests::*;
use crossprof_unwind::{AddressSpace, Outcome, Registers, UnwindSections};

struct Sample {
    regs: [u32; 16],
    stack: Vec<u8>,
}

fn parse(bytes: &[u8]) -> Vec<Sample> {
    let mut out = Vec::new();
    let mut i = 0;
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    while i < bytes.len() {
        assert_eq!(word(i), 16);
        let mut regs = [0u32; 16];
        for (n, r) in regs.iter_mut().enumerate() {
            *r = word(i + 4 + 4 * n);
        }
        let len = word(i + 68) as usize;
        out.push(Sample {
            regs,
            stack: bytes[i + 72..i + 72 + len].to_vec(),
        });
        i += 72 + len;
    }
    out
}

fn tool(name: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {name}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn thumb2_stacks_unwind_through_exidx_to_main() {
    // The cross compiler and qemu-user come from the project's setup script.
    assert!(
        tool("arm-linux-gnueabihf-gcc") && tool("qemu-arm-static"),
        "run scripts/setup.sh: the armhf cross gcc and qemu-user-static are missing"
    );
    let dir = scratch().join("arm-ehabi");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("self_sample");
    let o = Command::new("arm-linux-gnueabihf-gcc")
        .args(["-O2", "-g", "-static", "-Wl,--build-id"])
        .arg(source("self_sample.c"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Thumb-2 is Debian armhf's default: the hot function starts with a 32-bit Thumb push.
    let dis = Command::new("arm-linux-gnueabihf-objdump")
        .arg("-d")
        .arg(&exe)
        .output()
        .unwrap();
    let dis = String::from_utf8_lossy(&dis.stdout);
    let leaf = dis
        .lines()
        .skip_while(|l| !l.contains("<leaf>:"))
        .nth(1)
        .unwrap_or_default()
        .to_string();
    assert!(
        leaf.contains("stmdb") || leaf.contains("push"),
        "unexpected leaf prologue: {leaf}"
    );
    let data = dir.join("samples.bin");
    let o = Command::new("qemu-arm-static")
        .arg(&exe)
        .arg(&data)
        .arg("1000")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let samples = parse(&std::fs::read(&data).unwrap());
    assert!(samples.len() > 200, "only {} samples", samples.len());

    let image = std::fs::read(&exe).unwrap();
    let sections = std::sync::Arc::new(UnwindSections::from_elf(&image, None).unwrap());
    assert!(sections.has_unwind_info());
    let mut space = AddressSpace::new(Arch::Arm, false);
    // A static, non-PIE executable: loaded at its stated addresses (bias 0).
    space.add_module("self_sample", 0..0xffff_ffff, 0, &sections);
    let lookup = Lookup {
        sysroot: None,
        debug_dirs: vec![],
    };
    let located = lookup.locate(exe.to_str().unwrap(), &[]);
    assert!(matches!(
        located.match_kind,
        MatchKind::PathOnly | MatchKind::BuildId
    ));
    let module = Module::load(&located).unwrap();
    let name = |addr: u64, ret: bool| -> String {
        let a = if ret { addr - 1 } else { addr };
        module
            .frames(a)
            .last()
            .and_then(|f| f.function.clone())
            .unwrap_or_else(|| format!("{a:#x}"))
    };

    let (mut to_main, mut deep, mut rec, mut complete) = (0, 0, 0, 0);
    for s in &samples {
        let mut mask_regs = Vec::new();
        for r in s.regs {
            mask_regs.push(u64::from(r));
        }
        let regs = Registers::from_sample(Arch::Arm, 0xffff, &mask_regs).unwrap();
        let mut chain = Vec::new();
        if space.unwind(regs, &s.stack, &mut chain) == Outcome::Complete {
            complete += 1;
        }
        let names: Vec<String> = chain
            .iter()
            .enumerate()
            .map(|(i, &a)| name(a, i > 0))
            .collect();
        if names.iter().any(|n| n == "main") && names.iter().any(|n| n.starts_with("__libc_start"))
        {
            to_main += 1;
        }
        if names.iter().any(|n| n == "run_deep") {
            deep += 1;
            if names[0] == "leaf" && names.get(1).is_some_and(|n| n == "level") {
                assert_eq!(
                    names.iter().filter(|n| *n == "level").count(),
                    12,
                    "{names:?}"
                );
            }
        }
        if names.iter().any(|n| n == "recurse") {
            rec += 1;
            if names[0] == "leaf" && names.get(1).is_some_and(|n| n == "recurse") {
                assert_eq!(
                    names.iter().filter(|n| *n == "recurse").count(),
                    21,
                    "{names:?}"
                );
            }
        }
    }
    let n = samples.len();
    // A few samples land in the signal-return path or libc internals; nearly all must unwind.
    assert!(
        to_main * 100 >= n * 97,
        "{to_main} of {n} samples reach main and __libc_start*"
    );
    assert!(
        complete * 100 >= n * 97,
        "{complete} of {n} unwinds complete"
    );
    let share = 100.0 * deep as f64 / (deep + rec) as f64;
    assert!(
        (share - 200.0 / 3.0).abs() <= 5.0,
        "run_deep {share:.1}% ({deep} vs {rec})"
    );
}
