//! Issue 5 on x86_64: `rec --call-graph dwarf` + host unwinding, for code built -O2 with the
//! compiler's default flags (no frame pointers), stripped on the board, unwind and debug info
//! only in the sysroot.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crossprof_tests::*;

fn sh(cmd: &mut Command) {
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// deep.c + libdeep.so: the executable and the library it calls, both stripped on the board.
struct Deep {
    board: PathBuf,
    sysroot: PathBuf,
    recording: PathBuf,
}

fn deep() -> &'static Deep {
    static D: OnceLock<Deep> = OnceLock::new();
    D.get_or_init(|| {
        let dir = scratch().join("deep");
        let board_dir = dir.join("board");
        let sysroot = dir.join("sysroot");
        let sys_dir = sysroot.join(board_dir.strip_prefix("/").unwrap());
        std::fs::create_dir_all(&sys_dir).unwrap();
        std::fs::create_dir_all(&board_dir).unwrap();
        let lib = sys_dir.join("libdeep.so");
        sh(Command::new("gcc")
            .args(["-O2", "-g", "-shared", "-fPIC", "-Wl,--build-id"])
            .arg(source("deep_lib.c"))
            .arg("-o")
            .arg(&lib));
        let exe = sys_dir.join("deep");
        sh(Command::new("gcc")
            .args(["-O2", "-g", "-Wl,--build-id"])
            .arg(source("deep.c"))
            .arg(format!("-L{}", sys_dir.display()))
            .arg("-ldeep")
            .arg(format!("-Wl,-rpath,{}", board_dir.display()))
            .arg("-o")
            .arg(&exe));
        for f in ["libdeep.so", "deep"] {
            sh(Command::new("strip")
                .arg("-o")
                .arg(board_dir.join(f))
                .arg(sys_dir.join(f)));
        }
        let board = board_dir.join("deep");
        add_system_libs(&sysroot, &board);
        let recording = scratch().join("deep.zst");
        record(
            &recording,
            &["--call-graph", "dwarf"],
            &[board.to_str().unwrap(), "1500"],
        );
        Deep {
            board,
            sysroot,
            recording,
        }
    })
}

fn folded(recording: &Path, sysroot: &Path) -> Vec<(Vec<String>, u64)> {
    let out = scratch().join(format!(
        "{}.folded",
        recording.file_name().unwrap().to_str().unwrap()
    ));
    hostside_ok(&[
        "export",
        "--format",
        "collapsed",
        "--sysroot",
        sysroot.to_str().unwrap(),
        recording.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').unwrap();
            (
                stack.split(';').map(str::to_string).collect(),
                n.parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn deep_calls_across_a_library_unwind_to_the_c_start_code() {
    let d = deep();
    let stacks = folded(&d.recording, &d.sysroot);
    let total: u64 = stacks.iter().map(|(_, n)| n).sum();
    assert!(total > 300, "{total} samples");
    // ≥ 99% of samples reach main and, past it, the C library's start code.
    let to_start: u64 = stacks
        .iter()
        .filter(|(s, _)| {
            s.iter().any(|f| f == "main") && s.iter().any(|f| f.starts_with("__libc_start"))
        })
        .map(|(_, n)| n)
        .sum();
    assert!(
        to_start * 100 >= total * 99,
        "{to_start} of {total} samples reach __libc_start*"
    );
    // The caller split is the program's: deep_path 2/3, recurse 1/3 (totals).
    let with = |name: &str| -> u64 {
        stacks
            .iter()
            .filter(|(s, _)| s.iter().any(|f| f == name))
            .map(|(_, n)| n)
            .sum()
    };
    let (dp, rc) = (with("deep_path"), with("recurse"));
    let share = 100.0 * dp as f64 / (dp + rc) as f64;
    assert!(
        (share - 200.0 / 3.0).abs() <= 5.0,
        "deep_path {share:.1}% (deep_path {dp}, recurse {rc})"
    );
    // Full depth: the leaf's stacks hold all twelve levels, alternating executable and library.
    let (leaf_stack, _) = stacks
        .iter()
        .filter(|(s, _)| {
            s.last().is_some_and(|f| f == "deep_leaf") && s.iter().any(|f| f == "deep_path")
        })
        .max_by_key(|(_, n)| *n)
        .unwrap();
    let levels = leaf_stack
        .iter()
        .filter(|f| f.starts_with("deep_exe_level") || f.starts_with("deep_lib_level"))
        .count();
    assert_eq!(levels, 12, "{leaf_stack:?}");
    // The recursion: recurse(20) .. recurse(0), 21 frames.
    let (spin_stack, _) = stacks
        .iter()
        .filter(|(s, _)| {
            s.last().is_some_and(|f| f == "deep_leaf") && s.iter().any(|f| f == "recurse")
        })
        .max_by_key(|(_, n)| *n)
        .unwrap();
    assert_eq!(
        spin_stack.iter().filter(|f| *f == "recurse").count(),
        21,
        "{spin_stack:?}"
    );
}

#[test]
fn the_report_counts_unwinds_and_is_deterministic() {
    let d = deep();
    let a = report_json(&d.recording, Some(&d.sysroot));
    let b = report_json(&d.recording, Some(&d.sysroot));
    assert_eq!(a, b, "two analyses of one recording differ");
    let u = &a["cpu"]["stack_unwinding"];
    let samples = a["cpu"]["samples"].as_u64().unwrap();
    assert_eq!(
        u["complete"].as_u64().unwrap() + u["truncated"].as_u64().unwrap(),
        samples,
        "{u}"
    );
    assert!(u["complete"].as_u64().unwrap() * 100 >= samples * 99, "{u}");
    // The leaf's line comes from the library's debug info in the sysroot.
    let leaf = function(&a, "deep_leaf").unwrap();
    assert_eq!(
        leaf["line"].as_u64(),
        Some(marker_line(&source("deep_lib.c"), "leaf") as u64)
    );
    assert!(leaf["module"].as_str().unwrap().ends_with("libdeep.so"));
    let _ = &d.board;
}

#[test]
fn samples_in_a_signal_handler_unwind_into_the_interrupted_code() {
    let p = build("signal_frames.c", "sigframes", &["-O2"]);
    add_system_libs(&p.sysroot, &p.board);
    let out = scratch().join("sigframes.zst");
    record(
        &out,
        &["--call-graph", "dwarf"],
        &[p.board.to_str().unwrap(), "300"],
    );
    let stacks = folded(&out, &p.sysroot);
    let in_handler: Vec<&(Vec<String>, u64)> = stacks
        .iter()
        .filter(|(s, _)| s.last().is_some_and(|f| f == "in_handler_work"))
        .collect();
    let total: u64 = in_handler.iter().map(|(_, n)| n).sum();
    assert!(total > 300, "{total} samples in the handler");
    let through: u64 = in_handler
        .iter()
        .filter(|(s, _)| {
            let pos = |name: &str| s.iter().position(|f| f == name);
            matches!((pos("main"), pos("interrupted"), pos("in_handler_work")), (Some(m), Some(i), Some(h)) if m < i && i < h)
        })
        .map(|(_, n)| n)
        .sum();
    assert!(
        through * 100 >= total * 99,
        "{through} of {total} handler samples unwind into interrupted <- main: {in_handler:?}"
    );
}

/// The unwinder never trusts the stack: a report over a recording whose stack copies are
/// garbage still finishes, and every sample is counted.
#[test]
fn garbage_stack_copies_cannot_hang_or_crash_the_report() {
    use crossprof_format::{FrameWriter, Reader, Record};
    let d = deep();
    let bytes = std::fs::read(&d.recording).unwrap();
    let mut r = Reader::new(&bytes).unwrap();
    let mut w = FrameWriter::new(Vec::new(), r.header()).unwrap();
    let mut rng = 0x1234_5678_9abc_def1u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut samples = 0;
    while let Some(mut rec) = r.next_record() {
        if let Record::Sample(s) = &mut rec {
            samples += 1;
            for b in s.stack.iter_mut() {
                *b = next() as u8;
            }
            if samples % 3 == 0 {
                for v in s.regs.iter_mut() {
                    *v = next();
                }
            }
        }
        w.push(&rec).unwrap();
    }
    let garbage = scratch().join("deep-garbage.zst");
    std::fs::write(&garbage, w.finish(Default::default()).unwrap()).unwrap();
    let j = report_json(&garbage, Some(&d.sysroot));
    assert_eq!(j["cpu"]["samples"].as_u64(), Some(samples));
}

/// i686: the 32-bit rec (from `targets/dist.sh`) records natively on this x86_64 host with
/// real perf events; deep.c + deep_lib.c built -O2 by Debian's i686 cross gcc (static, so no
/// 32-bit C library is needed on the host), unwound with gimli's CFI on the host.
#[test]
fn i686_stack_copies_unwind_to_the_c_start_code() {
    let dist = std::env::var_os("CROSSPROF_DIST")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("dist"));
    let rec32 = dist.join("i686-unknown-linux-musl/rec");
    assert!(
        rec32.exists(),
        "{} missing: run targets/dist.sh",
        rec32.display()
    );
    let dir = scratch().join("deep-i686");
    let board = dir.join("board/deep32");
    let sysroot = dir.join("sysroot");
    let unstripped = sysroot.join(board.strip_prefix("/").unwrap());
    std::fs::create_dir_all(unstripped.parent().unwrap()).unwrap();
    std::fs::create_dir_all(board.parent().unwrap()).unwrap();
    sh(Command::new("i686-linux-gnu-gcc")
        .args(["-O2", "-g", "-static", "-Wl,--build-id"])
        .arg(source("deep.c"))
        .arg(source("deep_lib.c"))
        .arg("-o")
        .arg(&unstripped));
    sh(Command::new("strip").arg("-o").arg(&board).arg(&unstripped));
    let out = scratch().join("deep-i686.zst");
    let o = Command::new(&rec32)
        .args([
            "--call-graph",
            "dwarf",
            "--out",
            out.to_str().unwrap(),
            "--",
        ])
        .arg(&board)
        .arg("600")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stacks = folded(&out, &sysroot);
    let total: u64 = stacks.iter().map(|(_, n)| n).sum();
    let leaf: u64 = stacks
        .iter()
        .filter(|(s, _)| s.last().is_some_and(|f| f == "deep_leaf"))
        .map(|(_, n)| n)
        .sum();
    let reach: u64 = stacks
        .iter()
        .filter(|(s, _)| {
            s.last().is_some_and(|f| f == "deep_leaf")
                && s.iter().any(|f| f == "main")
                && s.iter().any(|f| f.starts_with("__libc_start"))
        })
        .map(|(_, n)| n)
        .sum();
    assert!(
        leaf * 10 >= total * 9,
        "{leaf} of {total} samples in deep_leaf"
    );
    assert!(
        reach * 100 >= leaf * 99,
        "{reach} of {leaf} deep_leaf samples reach main and __libc_start*"
    );
    let with = |name: &str| -> u64 {
        stacks
            .iter()
            .filter(|(s, _)| s.iter().any(|f| f == name))
            .map(|(_, n)| n)
            .sum()
    };
    let (dp, rc) = (with("deep_path"), with("recurse"));
    let share = 100.0 * dp as f64 / (dp + rc) as f64;
    assert!(
        (share - 200.0 / 3.0).abs() <= 5.0,
        "deep_path {share:.1}% ({dp} vs {rc})"
    );
    let j = report_json(&out, Some(&sysroot));
    assert_eq!(j["recording"]["arch"], "x86");
    let u = &j["cpu"]["stack_unwinding"];
    assert!(
        u["complete"].as_u64().unwrap() * 100 >= j["cpu"]["samples"].as_u64().unwrap() * 97,
        "{u}"
    );
}
