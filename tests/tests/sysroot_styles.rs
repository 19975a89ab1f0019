//! Issue 2, acceptance 4: the report is the same whichever way the sysroot holds the debug info
//! (unstripped binary at its path, a `.build-id` debug file, a debuglink), and a binary with a
//! different build-id is reported as `mismatch` and never used.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crossprof_tests::*;
use serde_json::Value;

fn build_id_hex(path: &Path) -> String {
    let o = Command::new("readelf")
        .arg("-n")
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("build-id")
        .trim()
        .to_string()
}

struct Fixture {
    program: Program,
    recording: PathBuf,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let (program, recording) = fixtures::recorded_cpu_split("styles");
        Fixture { program, recording }
    })
}

fn cpu_of(report: &Value) -> Value {
    report["cpu"].clone()
}

#[test]
fn build_id_tree_and_debuglink_give_the_same_report_as_the_unstripped_binary() {
    let f = fixture();
    let p = &f.program;
    let reference = report_json(&f.recording, Some(&p.sysroot));
    assert!(function(&reference, "hot_a").is_some());

    // Only usr/lib/debug/.build-id/ab/cdef....debug, nothing at the binary's path.
    let id = build_id_hex(&p.unstripped);
    let s1 = scratch().join("styles-buildid");
    let dbg = s1.join(format!(
        "usr/lib/debug/.build-id/{}/{}.debug",
        &id[..2],
        &id[2..]
    ));
    std::fs::create_dir_all(dbg.parent().unwrap()).unwrap();
    run_ok(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&p.unstripped)
            .arg(&dbg),
    );
    let r1 = report_json(&f.recording, Some(&s1));
    assert_eq!(
        cpu_of(&r1),
        cpu_of(&reference),
        "build-id tree report differs"
    );
    let m = r1["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["path"].as_str() == p.board.to_str())
        .unwrap();
    assert_eq!(m["match"], "build-id");
    assert_eq!(m["debug_file"].as_str(), dbg.to_str());

    // Yocto style: the stripped binary with a debuglink at its path, the debug file in .debug/.
    for (tag, sub) in [("styles-link-next", ""), ("styles-link-dotdebug", ".debug")] {
        let s2 = scratch().join(tag);
        let bin = fixtures::in_sysroot(&s2, &p.board);
        let dir = bin.parent().unwrap().to_path_buf();
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        let name = format!("{}.debug", bin.file_name().unwrap().to_str().unwrap());
        let dbg = dir.join(sub).join(&name);
        run_ok(
            Command::new("objcopy")
                .arg("--only-keep-debug")
                .arg(&p.unstripped)
                .arg(&dbg),
        );
        run_ok(
            Command::new("objcopy")
                .arg("--strip-debug")
                .arg("--strip-unneeded")
                .arg(format!("--add-gnu-debuglink={}", dbg.display()))
                .arg(&p.unstripped)
                .arg(&bin),
        );
        let r2 = report_json(&f.recording, Some(&s2));
        assert_eq!(
            cpu_of(&r2),
            cpu_of(&reference),
            "debuglink report ({tag}) differs"
        );
    }
}

#[test]
fn a_rebuilt_binary_is_a_mismatch_and_never_symbolizes() {
    let f = fixture();
    let p = &f.program;
    let s = scratch().join("styles-mismatch");
    let bin = fixtures::in_sysroot(&s, &p.board);
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    // Same source, different flags: a different build-id, and wrong addresses if it were used.
    run_ok(
        Command::new("gcc")
            .args(["-O1", "-g", "-Wl,--build-id"])
            .arg(&p.source)
            .arg("-o")
            .arg(&bin),
    );
    assert_ne!(build_id_hex(&bin), build_id_hex(&p.unstripped));
    let r = report_json(&f.recording, Some(&s));
    let m = r["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["path"].as_str() == p.board.to_str())
        .unwrap();
    assert_eq!(m["match"], "mismatch");
    assert!(m["debug_file"].is_null());
    assert!(
        function(&r, "hot_a").is_none() && function(&r, "hot_b").is_none(),
        "mismatched binary was used: {r:#}"
    );
    assert!(r["cpu"]["unsymbolized_frames"].as_u64().unwrap() > 0);
    let name = p.board.file_name().unwrap().to_str().unwrap();
    assert!(
        function(&r, &format!("{name}+0x")).is_some(),
        "frames must stay as module+offset: {r:#}"
    );
}

#[test]
fn without_a_sysroot_modules_are_found_at_their_paths() {
    // Profiling on the same machine: the stripped board binary has no symbols of its own; the
    // sysroot-less lookup still finds it by build-id at its recorded path.
    let f = fixture();
    let r = report_json(&f.recording, None);
    let m = r["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["path"].as_str() == f.program.board.to_str())
        .unwrap();
    assert_eq!(m["match"], "build-id");
}
