//! Issue 25: no lock but the heap interposer's own inside `malloc`. Four threads allocate
//! while a fifth loads a library, allocates through it and unloads it, in a loop
//! (`tests/programs/heap_dlopen_stress.c`), under `rec --heap`, with the glibc and the musl
//! interposer: the run ends (a timeout fails the test: an interposer that takes the loader's
//! lock from inside an allocation can wait for ever on a thread in `dlopen` or `dlclose`
//! that waits for the interposer's lock), no event is lost, and the counts at both sites are
//! the ones the program itself counted. The library's allocations have their whole stack,
//! through the library into the loader thread's entry, none cut short. The same on i686 (run
//! natively: the board's `rec` and the glibc interposer from `dist/`, with the program built
//! by the i686 cross compiler), whose unwinder asks `dl_iterate_phdr` from inside `malloc`.
//! And on RISC-V: the program built by the riscv64 cross compiler, run by
//! `qemu-riscv64-static -L <its sysroot>` under this machine's `rec --heap` with the riscv64
//! glibc interposer from `dist/`; the host's maps show none of the guest's code as code, so
//! the modules come from the interposer's own list, and hostside symbolizes them with
//! `--sysroot` the cross compiler's sysroot.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crossprof_tests::*;
use serde_json::Value;

/// How long the program runs (acceptance: 30 s).
const SECONDS: u64 = 30;
/// Longer than this and the run is taken as hung.
const LIMIT: Duration = Duration::from_secs(SECONDS + 90);

/// A file of `dist/<triple>/` (targets/dist.sh builds them).
fn dist_file(triple: &str, name: &str) -> PathBuf {
    let dist = std::env::var_os("CROSSPROF_DIST")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("dist"));
    let p = dist.join(triple).join(name);
    assert!(
        p.exists(),
        "{} is missing: run targets/dist.sh {triple}",
        p.display()
    );
    p
}

/// How the program is built and run.
struct Target<'a> {
    tag: &'a str,
    cc: &'a str,
    rec: PathBuf,
    interposer: PathBuf,
    /// Extra compiler and link arguments of the program and its library.
    link: Vec<String>,
    /// Where the program's C library lies, when it is not the system's.
    libdir: Option<PathBuf>,
    /// The emulator command the program runs under (empty: natively).
    runner: Vec<OsString>,
    /// The sysroot hostside symbolizes with (the program's own directory is searched too).
    sysroot: Option<PathBuf>,
    /// Fewest worker allocations and loader cycles that show the run raced enough (an
    /// emulated run does far fewer).
    least: (u64, u64),
}

/// Natively: 30 s give hundreds of thousands of both.
const NATIVE_LEAST: (u64, u64) = (100_000, 1_000);

/// The i686 glibc of the cross compiler: its dynamic loader's directory.
fn i686_libdir() -> PathBuf {
    let o = Command::new("i686-linux-gnu-gcc")
        .arg("-print-file-name=ld-linux.so.2")
        .output()
        .expect("run i686-linux-gnu-gcc (scripts/setup.sh installs it)");
    let ld = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    assert!(ld.is_absolute() && ld.exists(), "no i686 loader: {ld:?}");
    ld.parent().expect("dir").to_path_buf()
}

/// The riscv64 glibc of the cross compiler: the sysroot whose `lib/` holds its loader (what
/// `qemu-riscv64-static -L` and hostside's `--sysroot` take).
fn riscv64_sysroot() -> PathBuf {
    let o = Command::new("riscv64-linux-gnu-gcc")
        .arg("-print-file-name=ld-linux-riscv64-lp64d.so.1")
        .output()
        .expect("run riscv64-linux-gnu-gcc (scripts/setup.sh installs it)");
    let ld = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    assert!(ld.is_absolute() && ld.exists(), "no riscv64 loader: {ld:?}");
    let ld = ld.canonicalize().expect("canonical loader path");
    let lib = ld.parent().expect("lib dir");
    assert_eq!(
        lib.file_name().and_then(|n| n.to_str()),
        Some("lib"),
        "{ld:?}"
    );
    lib.parent().expect("sysroot").to_path_buf()
}

/// Compiles the program and its library with `cc` into `<scratch>/<tag>/`.
fn build_pair(cc: &str, tag: &str, link: &[String]) -> (PathBuf, PathBuf) {
    let dir = scratch().join(tag);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let lib = dir.join("libstress.so");
    let main = dir.join("dlopen_stress");
    for (out, src, extra) in [
        (&lib, "heap_dlopen_stress_lib.c", &["-shared", "-fPIC"][..]),
        (&main, "heap_dlopen_stress.c", &["-pthread"][..]),
    ] {
        let flags: Vec<&str> = extra
            .iter()
            .copied()
            .chain(link.iter().map(String::as_str))
            .collect();
        compile_with(cc, src, &flags, out);
    }
    (main, lib)
}

/// Runs rec on the program with a deadline; the program's own counts (workers, cycles).
fn record(t: &Target, main: &Path, lib: &Path) -> (PathBuf, u64, u64) {
    let tag = t.tag;
    let out = scratch().join(format!("{tag}.zst"));
    let mut cmd = Command::new(&t.rec);
    if let Some(dir) = &t.libdir {
        // The interposer's own libraries (libdl, libpthread) come from there too.
        cmd.env("LD_LIBRARY_PATH", dir);
    }
    let mut child = cmd
        .env("CROSSPROF_HEAP_LIB", &t.interposer)
        .args(["--heap", "--no-cpu", "--out"])
        .arg(&out)
        .arg("--")
        .args(&t.runner)
        .arg(main)
        .arg(lib)
        .arg(SECONDS.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run rec");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait rec") {
            break s;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{tag}: rec --heap still running after {LIMIT:?}: the program hangs");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    let _ = child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut stdout);
    let _ = child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr);
    assert!(status.success(), "{tag}: rec: {status}: {stderr}");
    let field = |name: &str| -> u64 {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{tag}: no {name} in the program's output: {stdout}"))
    };
    (out, field("workers"), field("cycles"))
}

/// The site of `function` in the report.
fn site<'a>(heap: &'a Value, function: &str) -> &'a Value {
    heap["sites"]
        .as_array()
        .expect("sites")
        .iter()
        .find(|s| s["function"] == function)
        .unwrap_or_else(|| panic!("no {function} site: {:#}", heap["sites"]))
}

fn check(t: Target) {
    let tag = t.tag;
    let (main, lib) = build_pair(t.cc, tag, &t.link);
    let started = Instant::now();
    let (out, workers, cycles) = record(&t, &main, &lib);
    eprintln!(
        "{tag}: {workers} worker allocations, {cycles} cycles in {:.1?}",
        started.elapsed()
    );
    // Enough of both to have raced many times.
    assert!(
        workers > t.least.0 && cycles > t.least.1,
        "{tag}: {workers} {cycles}"
    );
    let out = out.to_str().expect("utf-8");
    let dir = main.parent().expect("dir").to_str().expect("utf-8");
    let mut symbols: Vec<&str> = Vec::new();
    if let Some(root) = &t.sysroot {
        // The program and its library are at their paths, but not in the sysroot.
        let root = root.to_str().expect("utf-8");
        symbols.extend(["--sysroot", root, "--search-dir", dir]);
    }
    let mut args = vec!["report", "--heap", "--json", "--top", "100000", out];
    args.extend(&symbols);
    let report: Value = serde_json::from_str(&hostside_ok(&args)).expect("JSON");
    let heap = &report["heap"];
    assert_eq!(heap["lost_events"], 0, "{tag}");
    let w = site(heap, "burst");
    assert_eq!(w["allocations"].as_u64(), Some(workers), "{tag}: {w:#}");
    assert_eq!(w["leaked_allocations"].as_u64(), Some(0), "{tag}: {w:#}");
    assert_eq!(
        w["line"].as_u64(),
        Some(marker_line(&source("heap_dlopen_stress.c"), "worker_malloc") as u64),
        "{tag}: {w:#}"
    );
    let l = site(heap, "lib_churn");
    assert_eq!(l["allocations"].as_u64(), Some(10 * cycles), "{tag}: {l:#}");
    assert_eq!(l["leaked_allocations"].as_u64(), Some(0), "{tag}: {l:#}");
    assert_eq!(
        l["line"].as_u64(),
        Some(marker_line(&source("heap_dlopen_stress_lib.c"), "lib_malloc") as u64),
        "{tag}: {l:#}"
    );
    // Every stack of the library's site goes on through it into the loader thread.
    let frames: Vec<&str> = l["frames"]
        .as_array()
        .expect("frames")
        .iter()
        .map(|f| f["function"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        frames[..3],
        ["lib_churn", "cycle", "loader"],
        "{tag}: {l:#}"
    );
    if t.runner.is_empty() {
        assert_eq!(l["traces"].as_u64(), Some(1), "{tag}: {l:#}");
        return;
    }
    // qemu-user maps the library at a new address every cycle, so each cycle is a trace of
    // its own: every one of them goes through it into the loader thread.
    let collapsed = scratch().join(format!("{tag}.collapsed"));
    let collapsed = collapsed.to_str().expect("utf-8");
    let mut args = vec!["export", out, "--format", "collapsed", "-o", collapsed];
    args.extend(&symbols);
    hostside_ok(&args);
    let text = std::fs::read_to_string(collapsed).expect("collapsed stacks");
    let through: u64 = text
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(stack, _)| stack.ends_with(";loader;cycle;lib_churn"))
        .map(|(_, n)| n.parse::<u64>().expect("count"))
        .sum();
    assert_eq!(through, 10 * cycles, "{tag}: {text}");
}

#[test]
fn glibc_allocations_racing_dlopen_and_dlclose_neither_hang_nor_miscount() {
    check(Target {
        tag: "dlopen_stress_glibc",
        cc: "gcc",
        rec: rec(),
        interposer: heap_lib(),
        link: vec![],
        libdir: None,
        runner: vec![],
        sysroot: None,
        least: NATIVE_LEAST,
    });
}

#[test]
fn musl_allocations_racing_dlopen_and_dlclose_neither_hang_nor_miscount() {
    check(Target {
        tag: "dlopen_stress_musl",
        cc: "musl-gcc",
        rec: rec(),
        interposer: dist_file("x86_64-unknown-linux-musl", "musl/libcrossprof_heap.so"),
        link: vec![],
        libdir: None,
        runner: vec![],
        sysroot: None,
        least: NATIVE_LEAST,
    });
}

#[test]
fn i686_allocations_racing_dlopen_and_dlclose_neither_hang_nor_miscount() {
    let dir = i686_libdir();
    let d = dir.display();
    check(Target {
        tag: "dlopen_stress_i686",
        cc: "i686-linux-gnu-gcc",
        rec: dist_file("i686-unknown-linux-musl", "rec"),
        interposer: dist_file("i686-unknown-linux-musl", "gnu/libcrossprof_heap.so"),
        link: vec![format!("-Wl,--dynamic-linker={d}/ld-linux.so.2,-rpath={d}")],
        libdir: Some(dir),
        runner: vec![],
        sysroot: None,
        least: NATIVE_LEAST,
    });
}

#[test]
fn riscv64_allocations_under_qemu_user_racing_dlopen_and_dlclose_neither_hang_nor_miscount() {
    let root = riscv64_sysroot();
    check(Target {
        tag: "dlopen_stress_riscv64",
        cc: "riscv64-linux-gnu-gcc",
        rec: rec(),
        interposer: dist_file("riscv64gc-unknown-linux-musl", "gnu/libcrossprof_heap.so"),
        // RISC-V GCC emits no `.eh_frame` by default: without it the interposer's unwinder
        // stops at the allocation site.
        link: vec!["-fasynchronous-unwind-tables".into()],
        libdir: None,
        runner: vec![
            "qemu-riscv64-static".into(),
            "-L".into(),
            root.clone().into(),
        ],
        sysroot: Some(root),
        // Emulated, the run makes about a thirtieth of a native run's allocations: about
        // 170,000 worker allocations and 1,500 cycles in 30 s here.
        least: (50_000, 200),
    });
}
