//! Issue 5 on the architectures whose host unwinders are not framehop: ARMv7 (EHABI and
//! `.debug_frame`, on real Thumb-2 code from Debian's armhf gcc) and RISC-V (gimli CFI), run
//! under qemu-user. The program samples itself with SIGPROF (qemu-user has no
//! perf_event_open), copying the registers and the stack like `rec --call-graph dwarf` does;
//! the host unwinds each copy from the binary's tables and symbolizes with its DWARF. Recording
//! on a board is covered by the emulated-board suite (ARM) and by `i686_stack_copies` (x86).

use std::process::Command;

use crossprof_format::Arch;
use crossprof_symbols::{Lookup, MatchKind, Module};
use crossprof_tests::*;
use crossprof_unwind::arch::{Arm, Riscv64};
use crossprof_unwind::{AddressSpace, Architecture, Outcome, Registers, UnwindSections};

struct Sample {
    regs: Vec<u64>,
    stack: Vec<u8>,
}

fn parse(bytes: &[u8]) -> Vec<Sample> {
    let mut out = Vec::new();
    let mut i = 0;
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    while i < bytes.len() {
        let n = u32_at(i) as usize;
        let regs = (0..n).map(|k| u64_at(i + 4 + 8 * k)).collect();
        let at = i + 4 + 8 * n;
        let len = u32_at(at) as usize;
        out.push(Sample {
            regs,
            stack: bytes[at + 4..at + 4 + len].to_vec(),
        });
        i = at + 4 + len;
    }
    out
}

/// How one architecture is built and run here.
struct Target {
    gcc: &'static str,
    qemu: &'static str,
    tag: &'static str,
    /// Rounds of work: enough for a few hundred samples at qemu's speed for the target.
    rounds: &'static str,
}

fn tool(name: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {name}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn thumb2_stacks_unwind_through_exidx_and_debug_frame_to_main() {
    unwind_self_samples::<Arm>(&Target {
        gcc: "arm-linux-gnueabihf-gcc",
        qemu: "qemu-arm-static",
        tag: "self-sample-arm",
        rounds: "3000",
    });
}

#[test]
fn riscv64_stacks_unwind_through_eh_frame_to_main() {
    unwind_self_samples::<Riscv64>(&Target {
        gcc: "riscv64-linux-gnu-gcc",
        qemu: "qemu-riscv64-static",
        tag: "self-sample-riscv64",
        rounds: "9000",
    });
}

/// self_sample.c writes the registers `rec` would capture: perf's user mask for `A`.
fn unwind_self_samples<A: Architecture>(t: &Target) {
    // The cross compilers and qemu-user come from the project's setup script.
    assert!(
        tool(t.gcc) && tool(t.qemu),
        "run scripts/setup.sh: {} or {} is missing",
        t.gcc,
        t.qemu
    );
    let dir = scratch().join(t.tag);
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("self_sample");
    let o = Command::new(t.gcc)
        .args(["-O2", "-g", "-static", "-Wl,--build-id"])
        .arg(source("self_sample.c"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Thumb-2 is Debian armhf's default: the hot function starts with a 32-bit Thumb push.
    if A::ARCH == Arch::Arm {
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
    }
    let data = dir.join("samples.bin");
    let o = Command::new(t.qemu)
        .arg(&exe)
        .arg(&data)
        .arg(t.rounds)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let samples = parse(&std::fs::read(&data).unwrap());
    assert!(samples.len() > 200, "only {} samples", samples.len());

    let image = std::fs::read(&exe).unwrap();
    let sections = std::sync::Arc::new(UnwindSections::from_elf(&image, None).unwrap());
    assert!(sections.has_unwind_info());
    let mut space = AddressSpace::<A>::new(false);
    // A static, non-PIE executable: loaded at its stated addresses (bias 0).
    space.add_module("self_sample", 0..u64::MAX, 0, &sections);
    let lookup = Lookup {
        sysroot: None,
        debug_dirs: vec![],
        search_dirs: vec![],
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
        let regs = Registers::from_sample::<A>(A::PERF_REGS.user_mask, &s.regs).unwrap();
        let mut chain = Vec::new();
        let outcome = space.unwind(regs, &s.stack, &mut chain);
        if outcome == Outcome::Complete {
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
