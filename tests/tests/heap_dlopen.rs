//! Issue 12: a library loaded with `dlopen` after start, which allocates, is seen by the heap
//! interposer's unwinder: exact counts at the library's site, and stacks that continue through
//! the library into the program. On musl the module list cannot be read again from inside
//! `malloc` (musl's `dlopen` calls it with the loader's lock held), so the interposer wraps
//! `dlopen` there; with glibc the first event that meets an unknown address finds its module
//! with the lock-free `_dl_find_object`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crossprof_tests::*;
use serde_json::Value;

/// The musl build of the interposer, from `dist/` (targets/dist.sh builds it).
fn musl_heap_lib() -> PathBuf {
    let dist = std::env::var_os("CROSSPROF_DIST")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("dist"));
    let p = dist.join("x86_64-unknown-linux-musl/musl/libcrossprof_heap.so");
    assert!(
        p.exists(),
        "{} is missing: run targets/dist.sh x86_64-unknown-linux-musl",
        p.display()
    );
    p
}

/// Compiles the program and the library with `cc` (gcc or musl-gcc) into `<scratch>/<tag>/`
/// (see [`compile_with`] for the flags).
fn build_pair(cc: &str, tag: &str) -> (PathBuf, PathBuf) {
    let dir = scratch().join(tag);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let lib = dir.join("libdlalloc.so");
    let main = dir.join("dlopen_main");
    for (out, src, extra) in [
        (&lib, "heap_dlopen_lib.c", &["-shared", "-fPIC"][..]),
        (&main, "heap_dlopen_main.c", &[][..]),
    ] {
        compile_with(cc, src, extra, out);
    }
    (main, lib)
}

/// Records `main lib` with `interposer` and returns the library's allocation site.
fn record_site(tag: &str, interposer: &Path, main: &Path, lib: &Path) -> Value {
    let out = scratch().join(format!("{tag}.zst"));
    let o = Command::new(rec())
        .env("CROSSPROF_HEAP_LIB", interposer)
        .args(["--heap", "--no-cpu", "--out"])
        .arg(&out)
        .arg("--")
        .arg(main)
        .arg(lib)
        .output()
        .expect("run rec");
    assert!(
        o.status.success(),
        "rec: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report: Value = serde_json::from_str(&hostside_ok(&[
        "report",
        "--heap",
        "--json",
        "--top",
        "1000",
        out.to_str().expect("utf-8"),
    ]))
    .expect("JSON");
    let heap = &report["heap"];
    assert_eq!(heap["lost_events"], 0, "{heap:#}");
    heap["sites"]
        .as_array()
        .expect("sites")
        .iter()
        .find(|s| s["function"] == "lib_alloc")
        .unwrap_or_else(|| panic!("no lib_alloc site: {:#}", heap["sites"]))
        .clone()
}

/// The library's site: the source says what it must hold.
fn assert_library_site(site: &Value, lib: &Path) {
    let src = source("heap_dlopen_lib.c");
    assert_eq!(site["module"].as_str(), lib.to_str(), "{site:#}");
    assert_eq!(
        site["line"].as_u64(),
        Some(marker_line(&src, "lib_malloc") as u64),
        "{site:#}"
    );
    for (field, value) in [
        ("allocations", 1000),
        ("temporary", 900),
        ("leaked_allocations", 100),
        ("leaked_bytes", 4800),
        ("peak_bytes", 4848),
    ] {
        assert_eq!(site[field].as_u64(), Some(value), "{field}: {site:#}");
    }
    // The stack goes on through the library into the program that called it.
    let main_src = source("heap_dlopen_main.c");
    let frames = site["frames"].as_array().expect("frames");
    assert!(frames.len() >= 2, "stack cut at the library: {site:#}");
    assert_eq!(frames[1]["function"], "main", "{site:#}");
    assert_eq!(
        frames[1]["line"].as_u64(),
        Some(marker_line(&main_src, "call") as u64),
        "{site:#}"
    );
}

#[test]
fn musl_library_loaded_after_start_is_unwound_through() {
    let (main, lib) = build_pair("musl-gcc", "dlopen_musl");
    let site = record_site("dlopen_musl", &musl_heap_lib(), &main, &lib);
    assert_library_site(&site, &lib);
    // The interposer reads the module list again as dlopen returns: every one of the 1000
    // allocations has the whole stack, none is cut at the library.
    assert_eq!(site["traces"].as_u64(), Some(1), "{site:#}");
}

#[test]
fn glibc_library_loaded_after_start_is_unwound_through() {
    let (main, lib) = build_pair("gcc", "dlopen_glibc");
    let site = record_site("dlopen_glibc", &heap_lib(), &main, &lib);
    assert_library_site(&site, &lib);
    // The first allocation through the library finds it with `_dl_find_object` (no loader
    // lock inside malloc) and is unwound again: none of the 1000 is cut at the library.
    assert_eq!(site["traces"].as_u64(), Some(1), "{site:#}");
}
