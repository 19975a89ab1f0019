//! Issue 16, acceptance 1: a program run on the board from a directory the sysroot does not
//! have is symbolized from the sysroot's copy at another path, and from a `--search-dir` build
//! tree, exactly as when the sysroot mirrors the board; a copy with another build-id in the
//! search tree is never used.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crossprof_tests::*;
use serde_json::Value;

struct Fixture {
    program: Program,
    recording: PathBuf,
    /// A sysroot holding the program unstripped at its board path and the C library.
    mirror: PathBuf,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let (program, recording) = fixtures::recorded_cpu_split("index-scratch");
        let mirror = fixtures::mirror_sysroot(&program);
        Fixture {
            program,
            recording,
            mirror,
        }
    })
}

/// `hostside report --json` with `args`, its index cache in a directory of the test's own.
fn report(args: &[&str], recording: &Path) -> Value {
    let cache = scratch().join("xdg-cache");
    let out = Command::new(hostside())
        .args(["report", "--json", "--top", "1000"])
        .args(args)
        .arg(recording)
        .env("XDG_CACHE_HOME", &cache)
        .output()
        .expect("run hostside");
    assert!(
        out.status.success(),
        "hostside {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON report")
}

fn module<'a>(r: &'a Value, path: &Path) -> &'a Value {
    r["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["path"].as_str() == path.to_str())
        .unwrap_or_else(|| panic!("no module {} in {r:#}", path.display()))
}

/// Copies every file of `from` into `to`, flattened under `to/<index>-<name>`: the board's
/// directory layout is gone, only build-ids can tell which file is which.
fn scatter(from: &Path, to: &Path) -> usize {
    let files = files_under(from);
    for (n, f) in files.iter().enumerate() {
        let dest = to.join(format!("d{n}")).join(f.file_name().unwrap());
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(f, &dest).unwrap();
    }
    files.len()
}

/// The reference sysroot is complete: every sampled instruction (a leaf frame, `self`) has a
/// name. Callers come from a frame-pointer walk, and one that starts in code built without
/// frame pointers (the dynamic loader during start-up) reads a return address that is not one:
/// it can land anywhere, inside ld.so between its symbols or outside every mapping. Whether a
/// sample lands there depends on the processor's speed, so such caller frames are only bounded,
/// to 1% of the samples.
fn assert_every_mapped_frame_named(r: &Value) {
    let samples = r["cpu"]["samples"].as_u64().unwrap();
    let mut unnamed_callers = 0;
    for f in r["cpu"]["functions"].as_array().unwrap() {
        if !f["function"].as_str().unwrap().contains("0x") {
            continue;
        }
        assert_eq!(
            f["self"], 0,
            "an unsymbolized sampled instruction {f} in {r:#}"
        );
        unnamed_callers += f["total"].as_u64().unwrap();
    }
    assert!(
        unnamed_callers * 100 <= samples,
        "{unnamed_callers} of {samples} samples hold an unsymbolized caller: {r:#}"
    );
}

#[test]
fn a_binary_run_from_a_directory_the_sysroot_lacks_is_fully_symbolized() {
    let f = fixture();
    let reference = report(&["--sysroot", f.mirror.to_str().unwrap()], &f.recording);
    assert!(count(&reference, "hot_a", "self") > 0, "{reference:#}");
    assert_every_mapped_frame_named(&reference);
    assert_eq!(module(&reference, &f.program.board)["found_by"], "path");

    // The same files, each at a path that has nothing to do with the board's.
    let moved = scratch().join("index-moved-sysroot");
    assert!(scatter(&f.mirror, &moved.join("usr/share/elsewhere")) >= 2);
    let r = report(&["--sysroot", moved.to_str().unwrap()], &f.recording);
    let m = module(&r, &f.program.board);
    assert_eq!(m["match"], "build-id");
    assert_eq!(m["found_by"], "index");
    assert!(m["debug_file"]
        .as_str()
        .unwrap()
        .starts_with(moved.to_str().unwrap()));
    assert_eq!(r["cpu"], reference["cpu"], "report differs: {r:#}");
    for m in r["modules"].as_array().unwrap() {
        assert_ne!(m["match"], "missing", "{m}");
    }

    // No sysroot at all: a build tree given with --search-dir.
    let tree = scratch().join("index-build-tree");
    scatter(&f.mirror, &tree.join("out"));
    let r = report(&["--search-dir", tree.to_str().unwrap()], &f.recording);
    let m = module(&r, &f.program.board);
    assert_eq!(m["found_by"], "index");
    assert_eq!(r["cpu"], reference["cpu"], "report differs: {r:#}");
}

#[test]
fn a_rebuilt_copy_in_the_search_tree_is_never_used() {
    let f = fixture();
    let tree = scratch().join("index-rebuilt-tree");
    let bin = tree.join("usr/bin/cpu_split");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    let out = Command::new("gcc")
        .args(["-O1", "-g", "-Wl,--build-id"])
        .arg(&f.program.source)
        .arg("-o")
        .arg(&bin)
        .output()
        .unwrap();
    assert!(out.status.success());
    let r = report(
        &[
            "--sysroot",
            scratch().join("index-empty-sysroot").to_str().unwrap(),
            "--search-dir",
            tree.to_str().unwrap(),
        ],
        &f.recording,
    );
    let m = module(&r, &f.program.board);
    assert_eq!(m["match"], "missing");
    assert!(m["debug_file"].is_null());
    assert!(function(&r, "hot_a").is_none(), "{r:#}");
}

/// Issue 24, acceptance 3: a merged-/usr board maps its C library as
/// `/usr/lib/<triplet>/libc.so.6`, a sysroot that is not merged holds it at `/lib/<triplet>/`,
/// and its debug file is in the `.build-id` tree. The debug file (names) is found by the
/// recorded build-id at once, and the binary (unwind tables: a debug file's `.eh_frame` is
/// empty) by the same build-id at its other path; every stack completes as with the mirror.
#[test]
fn a_library_at_another_path_gives_its_unwind_tables_beside_its_debug_file() {
    let program = build("cpu_split.c", "merged-usr", C_FP);
    let recording = scratch().join("merged-usr.zst");
    record(
        &recording,
        &["--call-graph", "dwarf"],
        &[program.board.to_str().expect("UTF-8 path"), "600"],
    );
    let mirror = fixtures::mirror_sysroot(&program);
    let reference = report(&["--sysroot", mirror.to_str().unwrap()], &recording);
    let libc = reference["modules"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["path"].as_str())
        .find(|p| p.contains("/libc.so"))
        .unwrap_or_else(|| panic!("no C library among the modules: {reference:#}"))
        .to_string();
    let unwound = &reference["cpu"]["stack_unwinding"];
    let samples = reference["cpu"]["samples"].as_u64().unwrap();
    assert_eq!(unwound["complete"].as_u64(), Some(samples), "{unwound:#}");

    // The same sysroot with the C library at the other layout's path only: `/lib/...` for a
    // board that mapped `/usr/lib/...`, and the other way round.
    let split = scratch().join("merged-usr-split-sysroot");
    let _ = std::fs::remove_dir_all(&split);
    run_ok(Command::new("cp").arg("-a").arg(&mirror).arg(&split));
    let other = match libc.strip_prefix("/usr") {
        Some(rest) => rest.to_string(),
        None => format!("/usr{libc}"),
    };
    for p in [libc.as_str(), other.as_str()] {
        let _ = std::fs::remove_file(fixtures::in_sysroot(&split, Path::new(p)));
    }
    let moved = fixtures::in_sysroot(&split, Path::new(&other));
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::copy(std::fs::canonicalize(&libc).unwrap(), &moved).unwrap();

    let r = report(&["--sysroot", split.to_str().unwrap()], &recording);
    let m = module(&r, Path::new(&libc));
    assert_eq!(m["match"], "build-id", "{m}");
    assert_eq!(
        m["found_by"], "path",
        "the debug file, by the .build-id tree: {m}"
    );
    assert_eq!(m["image_found_by"], "index", "the binary, by build-id: {m}");
    assert_eq!(m["image_file"].as_str(), moved.to_str(), "{m}");
    assert_eq!(r["cpu"], reference["cpu"], "report differs: {r:#}");
}
