//! Issue 4, acceptance 3: recordings made on the emulated ARMv7 and AArch64 boards, checked in
//! under `tests/fixtures/<arch>/` with their unstripped programs, analysed on this x86_64 host
//! without QEMU. They pin the cross-architecture decoding: a 32-bit little-endian ARM recording
//! read on a 64-bit host keeps every address (none sign-extended or cut), and the analysis gives
//! the same answers as on x86_64. `tests/fixtures/README.md` says how they were made.

use std::path::{Path, PathBuf};

use crossprof_format::{Reader, Record};
use crossprof_tests::*;
use serde_json::Value;

fn fixture(arch: &str) -> PathBuf {
    root().join("tests/fixtures").join(arch)
}

/// Header fields, and every user address inside a recorded executable mapping of the
/// program that fits the board's pointer size.
fn assert_decodes(recording: &Path, arch: &str, pointer_size: u8, program: &str) {
    let bytes = std::fs::read(recording).unwrap();
    let mut r = Reader::new(&bytes).unwrap();
    assert_eq!(r.header().arch, arch);
    assert_eq!(r.header().pointer_size, pointer_size);
    assert!(!r.header().big_endian);
    let limit = if pointer_size == 4 {
        1u64 << 32
    } else {
        u64::MAX
    };
    let (mut maps, mut samples, mut in_program) = (Vec::new(), 0u64, 0u64);
    while let Some(rec) = r.next_record() {
        match rec {
            Record::Mmap(m) => maps.push((m.start, m.start + m.len, m.path)),
            Record::Sample(s) => {
                samples += 1;
                for &a in s.user_chain.iter().chain(&s.kernel_chain) {
                    assert!(
                        a < limit,
                        "address {a:#x} does not fit {pointer_size} bytes"
                    );
                }
                if let Some(&leaf) = s.user_chain.first() {
                    in_program += maps
                        .iter()
                        .any(|(lo, hi, p)| (*lo..*hi).contains(&leaf) && p == program)
                        as u64;
                }
            }
            _ => {}
        }
    }
    assert!(samples > 300, "{samples} samples");
    // Nearly every sample is in hot_a or hot_b: the leaf lies inside the program's mapping.
    assert!(
        in_program * 10 >= samples * 9,
        "{in_program} of {samples} leaves in {program}"
    );
}

fn assert_split_and_lines(r: &Value, program: &str) {
    let source = source("cpu_split.c");
    let (a, b) = (count(r, "hot_a", "self"), count(r, "hot_b", "self"));
    let s = share(a, b);
    assert!(is_three_to_one(a, b), "hot_a {s:.1}% ({a} vs {b})");
    for f in ["hot_a", "hot_b"] {
        let row = function(r, f).unwrap_or_else(|| panic!("no {f}: {r:#}"));
        assert_eq!(
            row["line"].as_u64(),
            Some(marker_line(&source, f) as u64),
            "{row}"
        );
        assert_eq!(row["module"].as_str(), Some(program), "{row}");
    }
    let m = r["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["path"].as_str() == Some(program))
        .unwrap();
    assert_eq!(m["match"], "build-id", "{m}");
}

fn assert_called_from_main(recording: &Path, sysroot: &Path) {
    let source = source("cpu_split.c");
    let text = hostside_ok(&[
        "report",
        "--sysroot",
        sysroot.to_str().unwrap(),
        recording.to_str().unwrap(),
    ]);
    for (leaf, call) in [("hot_a", "call_a"), ("hot_b", "call_b")] {
        let c = boards::callers(&text, leaf);
        assert_eq!(
            c.first().cloned(),
            Some(format!("main (cpu_split.c:{})", marker_line(&source, call))),
            "{text}"
        );
    }
}

#[test]
fn aarch64_fixture_decodes_and_splits_75_25_with_callers() {
    let dir = fixture("aarch64");
    let rec = dir.join("cpu_split.zst");
    assert_decodes(&rec, "aarch64", 8, "/usr/bin/cpu_split");
    let r = report_json(&rec, Some(&dir.join("sysroot")));
    assert_eq!(r["recording"]["arch"], "aarch64");
    assert_split_and_lines(&r, "/usr/bin/cpu_split");
    assert_called_from_main(&rec, &dir.join("sysroot"));
}

/// Debian armhf's default Thumb-2 code: the kernel's frame-pointer walk gives no usable
/// callers there, so only the leaves are checked.
#[test]
fn armv7_thumb2_fixture_decodes_32_bit_addresses_and_splits_75_25() {
    let dir = fixture("armv7");
    let rec = dir.join("cpu_split_thumb.zst");
    assert_decodes(&rec, "arm", 4, "/usr/bin/cpu_split_thumb");
    let r = report_json(&rec, Some(&dir.join("sysroot")));
    assert_eq!(r["recording"]["arch"], "arm");
    assert_split_and_lines(&r, "/usr/bin/cpu_split_thumb");
}

/// ARM-state code with APCS frames: the kernel's walk sees `main`.
#[test]
fn armv7_arm_state_fixture_has_callers_from_fp_chains() {
    let dir = fixture("armv7");
    let rec = dir.join("cpu_split_arm.zst");
    assert_decodes(&rec, "arm", 4, "/usr/bin/cpu_split_arm");
    let r = report_json(&rec, Some(&dir.join("sysroot")));
    assert_split_and_lines(&r, "/usr/bin/cpu_split_arm");
    assert_called_from_main(&rec, &dir.join("sysroot"));
}

/// A sysroot file with another build-id is never used for an ARM recording either.
#[test]
fn armv7_fixture_with_the_wrong_binary_is_a_mismatch() {
    let dir = fixture("armv7");
    let sysroot = scratch().join("armv7_mismatch");
    let dest = sysroot.join("usr/bin/cpu_split_thumb");
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(dir.join("sysroot/usr/bin/cpu_split_arm"), &dest).unwrap();
    let r = report_json(&dir.join("cpu_split_thumb.zst"), Some(&sysroot));
    let m = r["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["path"] == "/usr/bin/cpu_split_thumb")
        .unwrap();
    assert_eq!(m["match"], "mismatch", "{m}");
    assert!(
        function(&r, "hot_a").is_none(),
        "a mismatched file named a frame"
    );
}
