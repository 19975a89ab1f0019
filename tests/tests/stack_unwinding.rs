//! Issue 5 on x86_64: `rec --call-graph dwarf` + host unwinding, for code built -O2 with the
//! compiler's default flags (no frame pointers), stripped on the board, unwind and debug info
//! only in the sysroot.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use crossprof_tests::*;

/// deep.c + libdeep.so: the executable and the library it calls, both stripped on the board.
struct Deep {
    board: PathBuf,
    sysroot: PathBuf,
    recording: PathBuf,
}

fn deep() -> &'static Deep {
    static D: OnceLock<Deep> = OnceLock::new();
    D.get_or_init(|| {
        let fixtures::DeepBuild { board, sysroot, .. } = fixtures::build_deep("deep");
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

#[test]
fn deep_calls_across_a_library_unwind_to_the_c_start_code() {
    let d = deep();
    let stacks = folded_stacks(&d.recording, &d.sysroot);
    assert_deep_ground_truth(&stacks);
    // Natively nothing else runs: every sample, not only the leaf's, reaches the start code.
    let total: u64 = stacks.iter().map(|(_, n)| n).sum();
    let to_start: u64 = stacks
        .iter()
        .filter(|(s, _)| s.iter().any(|f| f.starts_with("__libc_start")))
        .map(|(_, n)| n)
        .sum();
    assert!(
        to_start * 100 >= total * 99,
        "{to_start} of {total} samples reach __libc_start*"
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
    let stacks = folded_stacks(&out, &p.sysroot);
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
    run_ok(
        Command::new("i686-linux-gnu-gcc")
            .args(["-O2", "-g", "-static", "-Wl,--build-id"])
            .arg(source("deep.c"))
            .arg(source("deep_lib.c"))
            .arg("-o")
            .arg(&unstripped),
    );
    run_ok(Command::new("strip").arg("-o").arg(&board).arg(&unstripped));
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
    assert_deep_ground_truth(&folded_stacks(&out, &sysroot));
    let j = report_json(&out, Some(&sysroot));
    assert_eq!(j["recording"]["arch"], "x86");
    let u = &j["cpu"]["stack_unwinding"];
    assert!(
        u["complete"].as_u64().unwrap() * 100 >= j["cpu"]["samples"].as_u64().unwrap() * 97,
        "{u}"
    );
}

/// Code whose only unwind tables are `.debug_frame` (built without `.eh_frame`, as ARM C code
/// and some embedded builds are), in a detached debug file whose sections are compressed, as
/// Debian's `-dbg`/`-dbgsym` packages and `objcopy --compress-debug-sections` make them: the
/// unwinder inflates the tables and the ground truth holds.
#[test]
fn compressed_debug_frame_in_a_detached_debug_file_unwinds() {
    let dir = scratch().join("deep-zdebug");
    let board_dir = dir.join("board");
    let sysroot = dir.join("sysroot");
    let debug_dir = dir.join("full");
    for d in [&board_dir, &debug_dir] {
        std::fs::create_dir_all(d).unwrap();
    }
    let flags = [
        "-O2",
        "-g",
        "-fno-asynchronous-unwind-tables",
        "-fno-unwind-tables",
        "-Wl,--build-id",
    ];
    let lib = debug_dir.join("libdeep.so");
    run_ok(
        Command::new("gcc")
            .args(flags)
            .args(["-shared", "-fPIC"])
            .arg(source("deep_lib.c"))
            .arg("-o")
            .arg(&lib),
    );
    let exe = debug_dir.join("deep");
    run_ok(
        Command::new("gcc")
            .args(flags)
            .arg(source("deep.c"))
            .arg(format!("-L{}", debug_dir.display()))
            .arg("-ldeep")
            .arg(format!("-Wl,-rpath,{}", board_dir.display()))
            .arg("-o")
            .arg(&exe),
    );
    for f in ["libdeep.so", "deep"] {
        let full = debug_dir.join(f);
        let readelf = Command::new("readelf")
            .arg("-S")
            .arg(&full)
            .output()
            .unwrap();
        let sections = String::from_utf8_lossy(&readelf.stdout).into_owned();
        // (`.eh_frame` holds the C start files' tables only.)
        assert!(sections.contains(".debug_frame"), "{f}: {sections}");
        // The board's stripped copy, which the sysroot holds too, and the compressed debug
        // file under the sysroot's build-id tree.
        let board = board_dir.join(f);
        run_ok(Command::new("strip").arg("-o").arg(&board).arg(&full));
        let in_sysroot = sysroot.join(board.strip_prefix("/").unwrap());
        std::fs::create_dir_all(in_sysroot.parent().unwrap()).unwrap();
        std::fs::copy(&board, &in_sysroot).unwrap();
        let notes = Command::new("readelf")
            .arg("-n")
            .arg(&full)
            .output()
            .unwrap();
        let id = String::from_utf8_lossy(&notes.stdout)
            .lines()
            .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
            .unwrap();
        let debug = sysroot.join(format!(
            "usr/lib/debug/.build-id/{}/{}.debug",
            &id[..2],
            &id[2..]
        ));
        std::fs::create_dir_all(debug.parent().unwrap()).unwrap();
        run_ok(
            Command::new("objcopy")
                .args(["--only-keep-debug", "--compress-debug-sections=zlib"])
                .arg(&full)
                .arg(&debug),
        );
        let readelf = Command::new("readelf")
            .arg("-S")
            .arg(&debug)
            .output()
            .unwrap();
        let debug_frame = String::from_utf8_lossy(&readelf.stdout)
            .lines()
            .skip_while(|l| !l.contains(".debug_frame"))
            .take(2)
            .collect::<String>();
        assert!(debug_frame.contains(" C "), "not compressed: {debug_frame}");
    }
    let board = board_dir.join("deep");
    add_system_libs(&sysroot, &board);
    let recording = scratch().join("deep-zdebug.zst");
    record(
        &recording,
        &["--call-graph", "dwarf"],
        &[board.to_str().unwrap(), "1500"],
    );
    assert_deep_ground_truth(&folded_stacks(&recording, &sysroot));
}
