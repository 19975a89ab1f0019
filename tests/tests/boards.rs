//! Issue 4: the CPU ground truth recorded on emulated AArch64 and ARMv7 boards (real Debian
//! kernels under qemu-system, see `crossprof_tests::boards`) by the cross-built static `rec`,
//! and analysed here on x86_64 by `hostside` with a sysroot of unstripped copies: the 75:25
//! split of hot_a:hot_b (±5 points), file:line of the leaves, and `main` as their caller where
//! the kernel's frame-pointer walk can see it.
//!
//! With `CROSSPROF_REGEN_FIXTURES=1` the runs also refresh `tests/fixtures/<arch>/`, the
//! recordings that `arm_fixtures.rs` checks without QEMU.

use std::path::Path;

use crossprof_tests::boards::{boot, callers, Board, BoardProgram, Sysroot};
use crossprof_tests::*;
use serde_json::Value;

/// hot_a and hot_b split 75:25 in self samples, both at their marked lines in the program.
fn assert_leaf_split(r: &Value, p: &BoardProgram) {
    let (a, b) = (count(r, "hot_a", "self"), count(r, "hot_b", "self"));
    let s = share(a, b);
    assert!(
        is_three_to_one(a, b),
        "self share of hot_a is {s:.1}% ({a} vs {b}); report: {r:#}"
    );
    for f in ["hot_a", "hot_b"] {
        let row = function(r, f).unwrap_or_else(|| panic!("no {f}: {r:#}"));
        assert_eq!(
            row["file"].as_str().map(|s| s.ends_with("cpu_split.c")),
            Some(true),
            "{row}"
        );
        assert_eq!(
            row["line"].as_u64(),
            Some(marker_line(&p.source, f) as u64),
            "{row}"
        );
        assert_eq!(row["module"].as_str(), Some(p.guest.as_str()), "{row}");
    }
    let m = r["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["path"].as_str() == Some(p.guest.as_str()))
        .unwrap_or_else(|| panic!("module {} not recorded: {r:#}", p.guest));
    assert_eq!(m["match"], "build-id", "{m}");
}

/// The text report shows `hot_x <- main (cpu_split.c:<call line>)` for both leaves.
fn assert_called_from_main(recording: &Path, sysroot: &Path, p: &BoardProgram) {
    let text = hostside_ok(&[
        "report",
        "--sysroot",
        sysroot.to_str().unwrap(),
        recording.to_str().unwrap(),
    ]);
    for (leaf, call) in [("hot_a", "call_a"), ("hot_b", "call_b")] {
        let c = callers(&text, leaf);
        assert_eq!(
            c.first().map(String::as_str),
            Some(format!("main (cpu_split.c:{})", marker_line(&p.source, call)).as_str()),
            "callers of {leaf}: {c:?}\n{text}"
        );
    }
}

/// Copies a recording and the unstripped program into `tests/fixtures/<arch>/` when asked to.
fn maybe_regenerate(arch: &str, recording: &Path, p: &BoardProgram) {
    if std::env::var_os("CROSSPROF_REGEN_FIXTURES").is_none() {
        return;
    }
    let dir = root().join("tests/fixtures").join(arch);
    let name = Path::new(&p.guest).file_name().unwrap().to_str().unwrap();
    let dest = dir.join("sysroot").join(p.guest.trim_start_matches('/'));
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(&p.unstripped, &dest).unwrap();
    std::fs::copy(recording, dir.join(format!("{name}.zst"))).unwrap();
}

/// `rec` with kernel frame-pointer chains (these tests are about fp call chains).
/// The board job `rec --call-graph CALL_GRAPH --out OUT -- PROGRAM ROUNDS`.
fn rec_job(call_graph: &str, out: &str, p: &BoardProgram, rounds: &str) -> Vec<String> {
    [
        "/rec",
        "--call-graph",
        call_graph,
        "--out",
        out,
        "--",
        &p.guest,
        rounds,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Issue 5 on a board: deep.c + libdeep.so built with the cross compiler's defaults (no frame
/// pointers; Thumb-2 on armhf), recorded with `--call-graph dwarf`, unwound on this host. On
/// AArch64 also issue 24's assembly without CFI (asm_nocfi.c, `rounds_asm` rounds): its
/// sampled leaf unwinds by the link register, its framed function by the frame pointer.
fn board_unwinds_stack_copies(board: Board, tag: &str, rounds: &str, rounds_asm: Option<&str>) {
    let sysroot = Sysroot::new(board, tag);
    let (lib, exe) = sysroot.build_deep(board, &["-O2"]);
    let asm = rounds_asm.map(|_| sysroot.build_c(board, "asm_nocfi.c", "asm_nocfi", &["-O2"]));
    let files = [Some(&lib), Some(&exe), asm.as_ref()]
        .into_iter()
        .flatten()
        .map(|p| (p.guest.clone(), std::fs::read(&p.stripped).unwrap(), 0o755))
        .collect();
    let mut jobs = vec![rec_job("dwarf", "/out/deep.zst", &exe, rounds)];
    if let (Some(p), Some(r)) = (&asm, rounds_asm) {
        jobs.push(rec_job("dwarf", "/out/asm.zst", p, r));
    }
    let run = boot(board, tag, files, &jobs);
    run.assert_ok(jobs.len());
    let out = run.save("deep.zst", tag);
    assert_deep_ground_truth(&folded_stacks(&out, &sysroot.dir));
    if asm.is_some() {
        let out = run.save("asm.zst", tag);
        let (known, user) =
            untabled::assert_asm_nocfi_ground_truth(&folded_stacks(&out, &sysroot.dir));
        eprintln!("{tag}: {known} of {user} samples in the assembly on the known chains");
    }
}

#[test]
fn aarch64_board_unwinds_stack_copies_without_frame_pointers() {
    board_unwinds_stack_copies(Board::Aarch64, "board_aarch64_dwarf", "400", Some("6"));
}

#[test]
fn armv7_board_unwinds_thumb2_stack_copies() {
    board_unwinds_stack_copies(Board::Armv7, "board_armv7_dwarf", "160", None);
}

/// Signal frames on ARMv7 (issue 13): signal_frames.c built with Debian armhf's defaults
/// (Thumb-2, -O2, no frame pointers) raises SIGUSR1 every round and the handler's work runs
/// on the signal frame. Every sample in in_handler_work must unwind through the sigreturn
/// trampoline, with the registers the kernel saved, into the interrupted code:
/// in_handler_work <- (handler) <- signal frame <- raise <- interrupted <- main. Twice: with
/// glibc's Thumb-2 `__default_sa_restorer`, and with an ARM-state restorer of the program's
/// own that no unwind table covers (`-DOWN_RESTORER`, as musl's `__restore_rt`), which only
/// the unwinder's recognition of the trampoline's instructions can step through.
#[test]
fn armv7_board_unwinds_through_signal_frames() {
    let board = Board::Armv7;
    let tag = "board_armv7_signal";
    let sysroot = Sysroot::new(board, tag);
    let glibc = sysroot.build_c(board, "signal_frames.c", "signal_frames", &["-O2"]);
    let own = sysroot.build_c(
        board,
        "signal_frames.c",
        "signal_frames_own",
        &["-O2", "-DOWN_RESTORER"],
    );
    let programs = [("glibc.zst", &glibc), ("own.zst", &own)];
    let files = programs
        .iter()
        .map(|(_, p)| (p.guest.clone(), std::fs::read(&p.stripped).unwrap(), 0o755))
        .collect();
    let jobs: Vec<Vec<String>> = programs
        .iter()
        .map(|(out, p)| {
            let out = format!("/out/{out}");
            [
                "/rec",
                "--call-graph",
                "dwarf",
                "--out",
                &out,
                "--",
                &p.guest,
                "40",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect()
        })
        .collect();
    let run = boot(board, tag, files, &jobs);
    run.assert_ok(2);
    for (name, _) in programs {
        let out = run.save(name, tag);
        let stacks = folded_stacks(&out, &sysroot.dir);
        let in_handler: Vec<&(Vec<String>, u64)> = stacks
            .iter()
            .filter(|(s, _)| s.last().is_some_and(|f| f == "in_handler_work"))
            .collect();
        let total: u64 = in_handler.iter().map(|(_, n)| n).sum();
        assert!(total >= 100, "{name}: {total} samples in the handler");
        let through: u64 = in_handler
            .iter()
            .filter(|(s, _)| {
                let pos = |name: &str| s.iter().position(|f| f == name);
                matches!(
                    (pos("main"), pos("interrupted"), pos("in_handler_work")),
                    (Some(m), Some(i), Some(h)) if m < i && i < h
                )
            })
            .map(|(_, n)| n)
            .sum();
        assert!(
            through * 100 >= total * 99,
            "{name}: {through} of {total} handler samples unwind into interrupted <- main: \
             {in_handler:?}"
        );
    }
}

#[test]
fn aarch64_board_splits_75_25_with_callers() {
    let board = Board::Aarch64;
    let tag = "board_aarch64";
    let sysroot = Sysroot::new(board, tag);
    let p = sysroot.build_c(board, "cpu_split.c", "cpu_split", C_FP);
    let files = vec![(p.guest.clone(), std::fs::read(&p.stripped).unwrap(), 0o755)];
    let run = boot(board, tag, files, &[rec_job("fp", "/out/t.zst", &p, "300")]);
    run.assert_ok(1);
    let out = run.save("t.zst", tag);
    let r = report_json(&out, Some(&sysroot.dir));
    assert_eq!(r["recording"]["arch"], board.arch_name());
    assert_eq!(r["recording"]["complete"], true);
    let samples = r["cpu"]["samples"].as_u64().unwrap();
    assert!(samples > 300, "only {samples} samples");
    assert_leaf_split(&r, &p);
    assert_called_from_main(&out, &sysroot.dir, &p);
    maybe_regenerate("aarch64", &out, &p);
}

/// Two builds on one boot: Debian armhf's default Thumb-2 code, where the kernel's
/// frame-pointer walk yields no usable callers (it expects APCS frames; Thumb-2 has none), so
/// only the leaf split is checked; and ARM-state code with APCS frames (`-marm -mapcs-frame`),
/// which the kernel walks, so `main` must show as the caller too.
#[test]
fn armv7_board_splits_75_25_thumb2_and_arm() {
    let board = Board::Armv7;
    let tag = "board_armv7";
    let sysroot = Sysroot::new(board, tag);
    let thumb = sysroot.build_c(
        board,
        "cpu_split.c",
        "cpu_split_thumb",
        &["-O2", "-fno-omit-frame-pointer"],
    );
    let arm = sysroot.build_c(
        board,
        "cpu_split.c",
        "cpu_split_arm",
        &["-O2", "-marm", "-mapcs-frame", "-fno-omit-frame-pointer"],
    );
    let files = [&thumb, &arm]
        .iter()
        .map(|p| (p.guest.clone(), std::fs::read(&p.stripped).unwrap(), 0o755))
        .collect();
    let run = boot(
        board,
        tag,
        files,
        &[
            rec_job("fp", "/out/thumb.zst", &thumb, "150"),
            rec_job("fp", "/out/arm.zst", &arm, "150"),
        ],
    );
    run.assert_ok(2);
    for (name, p, fp_callers) in [("thumb.zst", &thumb, false), ("arm.zst", &arm, true)] {
        let out = run.save(name, tag);
        let r = report_json(&out, Some(&sysroot.dir));
        assert_eq!(r["recording"]["arch"], board.arch_name());
        assert_eq!(r["recording"]["complete"], true);
        let samples = r["cpu"]["samples"].as_u64().unwrap();
        assert!(samples > 300, "{name}: only {samples} samples");
        assert_leaf_split(&r, p);
        if fp_callers {
            assert_called_from_main(&out, &sysroot.dir, p);
        }
        maybe_regenerate("armv7", &out, p);
    }
}

/// The 32-bit x86 `rec` runs on this x86_64 host as it would on an old x86 board: its perf
/// record parsing, ring buffer and /proc reading on a 32-bit word size, without emulation.
#[test]
fn i686_rec_records_the_split_natively() {
    let dist = std::env::var_os("CROSSPROF_DIST")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root().join("dist"));
    let rec = dist.join("i686-unknown-linux-musl/rec");
    assert!(
        rec.exists(),
        "{} is missing: run targets/dist.sh",
        rec.display()
    );
    let p = build("cpu_split.c", "i686_rec", C_FP);
    let out = scratch().join("i686_rec.zst");
    let o = std::process::Command::new(&rec)
        .args(["--call-graph", "fp", "--out", out.to_str().unwrap(), "--"])
        .args([p.board.to_str().unwrap(), "1000"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = report_json(&out, Some(&p.sysroot));
    // The header names the recorder's architecture and word size.
    assert_eq!(r["recording"]["arch"], "x86");
    let (a, b) = (count(&r, "hot_a", "self"), count(&r, "hot_b", "self"));
    let s = share(a, b);
    assert!(is_three_to_one(a, b), "hot_a {s:.1}%: {r:#}");
    let text = hostside_ok(&[
        "report",
        "--sysroot",
        p.sysroot.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    let c = callers(&text, "hot_a");
    assert_eq!(
        c.first().map(String::as_str),
        Some(format!("main (cpu_split.c:{})", marker_line(&p.source, "call_a")).as_str()),
        "{text}"
    );
}
