//! Shared harness for the end-to-end suites: builds the ground-truth programs with the real
//! compilers (unstripped copy in a sysroot, stripped copy for the "board"), runs the real `rec`
//! binary on them, and reads back `hostside`'s JSON report.
//!
//! The binaries under test are the ones the test script built (`scripts/build.sh`): the static musl
//! `rec` and the host-profile `hostside`. Their paths come from `CROSSPROF_REC` and
//! `CROSSPROF_HOSTSIDE`, or the default build locations.

pub mod board_files;
pub mod board_heap;
pub mod boards;
pub mod consumers;
pub mod cpu_time;
pub mod fixtures;
pub mod golang;
pub mod heap_parity;
pub mod heaptrack;
pub mod hotspot;
pub mod perf;
pub mod perf_compare;
pub mod phases;
pub mod realworld;
pub mod untabled;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

/// C/C++ flags for frame-pointer call chains: -O2 with frame pointers kept in every function.
/// gcc omits them in leaf functions unless told otherwise, and the kernel's frame-pointer walk
/// then skips the leaf's caller (perf has the same limit), so both flags are needed.
pub const C_FP: &[&str] = &[
    "-O2",
    "-fno-omit-frame-pointer",
    "-mno-omit-leaf-frame-pointer",
];

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn tool(var: &str, default: &str) -> PathBuf {
    let p = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(default));
    assert!(
        p.exists(),
        "{} not found; build it first with scripts/build.sh (or set {var})",
        p.display()
    );
    p
}

/// The `rec` under test.
pub fn rec() -> PathBuf {
    tool(
        "CROSSPROF_REC",
        "target/x86_64-unknown-linux-musl/release/rec",
    )
}

/// The `hostside` under test.
pub fn hostside() -> PathBuf {
    tool("CROSSPROF_HOSTSIDE", "target/host/hostside")
}

/// A scratch directory that lives as long as the test process.
///
/// A `static` is never dropped, so the directory outlives the process; its name carries the
/// process id, and the first test of each process removes the directories of processes that
/// are gone (finished, failed or killed test runs alike).
pub fn scratch() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        remove_stale_scratch();
        tempfile::Builder::new()
            .prefix(&format!("{SCRATCH_PREFIX}{}-", std::process::id()))
            .tempdir()
            .expect("temp dir")
    })
    .path()
}

const SCRATCH_PREFIX: &str = "crossprof-e2e-";

/// Removes scratch directories whose test process no longer runs. Directories from before the
/// names carried a process id are left alone: nothing tells whether they are in use.
fn remove_stale_scratch() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(SCRATCH_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// A ground-truth program as built for a test.
#[derive(Clone, Debug)]
pub struct Program {
    /// The stripped copy the "board" runs.
    pub board: PathBuf,
    /// The unstripped copy (with DWARF), which lives inside [`Program::sysroot`] at the board
    /// path.
    pub unstripped: PathBuf,
    /// A sysroot directory that holds the unstripped copy at the board path.
    pub sysroot: PathBuf,
    /// The source file.
    pub source: PathBuf,
}

/// Compiles `src` (in tests/programs) with `cc` (gcc or musl-gcc) into `out`: debug info,
/// -O1, no builtins (every allocation stays a call), a build-id, and `--eh-frame-hdr` as gcc
/// passes it on every Linux toolchain (Alpine's, Yocto's, Buildroot's musl ones too; Debian's
/// musl-gcc wrapper leaves it out, and the heap interposer finds a module's unwind tables
/// through that header), then `flags`.
pub fn compile_with(cc: &str, src: &str, flags: &[&str], out: &Path) {
    let o = Command::new(cc)
        .args(["-g", "-O1", "-fno-builtin", "-Wl,--build-id,--eh-frame-hdr"])
        .args(flags)
        .arg(source(src))
        .arg("-o")
        .arg(out)
        .output()
        .unwrap_or_else(|e| panic!("run {cc} (scripts/test-setup.sh installs musl-tools): {e}"));
    assert!(
        o.status.success(),
        "{cc} {src}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Source of a program in `tests/programs/`.
pub fn source(name: &str) -> PathBuf {
    root().join("tests/programs").join(name)
}

/// Runs `cmd` and fails the test, with its standard error, unless it succeeds.
pub fn run_ok(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds `src` (C, C++, Rust or Go, by extension) into `<scratch>/<tag>/`, strips the board copy
/// and places the unstripped one in that directory's sysroot.
pub fn build(src: &str, tag: &str, flags: &[&str]) -> Program {
    let source = source(src);
    let dir = scratch().join(tag);
    let board_dir = dir.join("board");
    std::fs::create_dir_all(&board_dir).expect("mkdir");
    let board = board_dir.join(tag);
    let built = dir.join(format!("{tag}.unstripped"));
    let compiler = match source.extension().and_then(|e| e.to_str()) {
        Some("c") => {
            let mut c = Command::new("gcc");
            c.args(["-g", "-Wl,--build-id", "-pthread"])
                .args(flags)
                .arg(&source)
                .arg("-o")
                .arg(&built);
            Some(c)
        }
        Some("cpp") => {
            let mut c = Command::new("g++");
            c.args(["-g", "-Wl,--build-id"])
                .args(flags)
                .arg(&source)
                .arg("-o")
                .arg(&built);
            Some(c)
        }
        Some("rs") => {
            let mut c = Command::new("rustc");
            c.args(["-g", "--edition", "2021", "-C", "link-arg=-Wl,--build-id"])
                .args(flags)
                .arg(&source)
                .arg("-o")
                .arg(&built);
            Some(c)
        }
        Some("go") => None,
        other => panic!("unknown source type {other:?}"),
    };
    match compiler {
        Some(mut cmd) => run_ok(&mut cmd),
        None => golang::go_build(&source, &built, "amd64"),
    }
    run_ok(Command::new("strip").arg("-o").arg(&board).arg(&built));
    let sysroot = dir.join("sysroot");
    let unstripped = sysroot.join(board.strip_prefix("/").expect("absolute path"));
    std::fs::create_dir_all(unstripped.parent().expect("parent")).expect("mkdir");
    std::fs::copy(&built, &unstripped).expect("copy");
    Program {
        board,
        unstripped,
        sysroot,
        source,
    }
}

/// Copies the shared libraries `binary` loads on this machine (the C library, the loader)
/// into `sysroot` at their paths, as a board's debug sysroot holds them: unwinding needs their
/// unwind tables to walk past `main` into the C library's start code.
pub fn add_system_libs(sysroot: &Path, binary: &Path) {
    let out = Command::new("ldd").arg(binary).output().expect("run ldd");
    for word in String::from_utf8_lossy(&out.stdout).split_whitespace() {
        let lib = Path::new(word);
        if !lib.is_absolute() || !lib.exists() || lib.starts_with(sysroot) {
            continue;
        }
        let Ok(real) = std::fs::canonicalize(lib) else {
            continue;
        };
        for p in [lib, real.as_path()] {
            let dest = sysroot.join(p.strip_prefix("/").expect("absolute"));
            std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
            if !dest.exists() {
                std::fs::copy(&real, &dest).expect("copy library");
            }
        }
    }
}

/// Copies this machine's `/usr/lib/debug/.build-id` files of the ELF files in `sysroot` (the
/// C library's, from Debian's libc6-dbg) into it, so the sysroot symbolizes every frame.
pub fn add_host_debug_files(sysroot: &Path) {
    for lib in files_under(sysroot) {
        let out = Command::new("readelf")
            .arg("-n")
            .arg(&lib)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let Some(id) = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Build ID: "))
        else {
            continue;
        };
        let rel = format!("usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..]);
        let host = Path::new("/").join(&rel);
        if host.is_file() {
            let dest = sysroot.join(&rel);
            std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
            std::fs::copy(&host, &dest).unwrap();
        }
    }
}

/// Every regular file under `dir`, recursively (symbolic links not followed).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let ty = e.file_type().unwrap();
            if ty.is_dir() {
                stack.push(e.path());
            } else if ty.is_file() {
                out.push(e.path());
            }
        }
    }
    out
}

/// The line of the marker comment `LINE:<name>` in a source file.
pub fn marker_line(source: &Path, name: &str) -> u32 {
    let text = std::fs::read_to_string(source).expect("read source");
    let needle = format!("LINE:{name}");
    let idx = text
        .lines()
        .position(|l| l.contains(&needle))
        .unwrap_or_else(|| panic!("no marker {needle} in {}", source.display()));
    idx as u32 + 1
}

/// Runs `rec` with `args` and returns its output.
pub fn run_rec(args: &[&str]) -> Output {
    Command::new(rec()).args(args).output().expect("run rec")
}

/// Records `program args...` into `out` with default options plus `extra`, asserting success.
pub fn record(out: &Path, extra: &[&str], cmd: &[&str]) {
    let mut args: Vec<&str> = vec!["--out", out.to_str().expect("utf-8 path")];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(cmd);
    let o = run_rec(&args);
    assert!(
        o.status.success(),
        "rec {args:?} failed ({:?}):\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Runs `hostside` with `args`, asserting success, and returns stdout.
pub fn hostside_ok(args: &[&str]) -> String {
    let o = Command::new(hostside())
        .args(args)
        .output()
        .expect("run hostside");
    assert!(
        o.status.success(),
        "hostside {args:?} failed ({:?}):\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("utf-8 output")
}

/// `hostside report --json` with an optional sysroot.
pub fn report_json(recording: &Path, sysroot: Option<&Path>) -> Value {
    let mut args = vec!["report", "--json", "--top", "1000"];
    let sr;
    if let Some(s) = sysroot {
        sr = s.to_str().expect("utf-8").to_string();
        args.push("--sysroot");
        args.push(&sr);
    }
    let r = recording.to_str().expect("utf-8");
    args.push(r);
    serde_json::from_str(&hostside_ok(&args)).expect("valid JSON")
}

/// `hostside report KIND --json --top TOP` of `recording` (KIND `--off-cpu` or `--heap`)
/// with `sysroot` and `extra` arguments.
fn kind_report(kind: &str, top: &str, recording: &Path, sysroot: &Path, extra: &[&str]) -> Value {
    let args = [
        "report",
        kind,
        "--json",
        "--top",
        top,
        "--sysroot",
        sysroot.to_str().expect("utf-8"),
        recording.to_str().expect("utf-8"),
    ];
    serde_json::from_str(&hostside_ok(&[&args[..], extra].concat())).expect("valid JSON")
}

/// `hostside report --off-cpu --json --top 1000` of `recording` with `sysroot` and `extra`
/// arguments.
pub fn off_cpu_report(recording: &Path, sysroot: &Path, extra: &[&str]) -> Value {
    kind_report("--off-cpu", "1000", recording, sysroot, extra)
}

/// `hostside report --heap --json --top 1000` of `recording` with `sysroot` and `extra`
/// arguments.
pub fn heap_report(recording: &Path, sysroot: &Path, extra: &[&str]) -> Value {
    kind_report("--heap", "1000", recording, sysroot, extra)
}

/// The function row whose name contains `needle`, if any.
pub fn function<'a>(report: &'a Value, needle: &str) -> Option<&'a Value> {
    report["cpu"]["functions"]
        .as_array()?
        .iter()
        .find(|f| f["function"].as_str().is_some_and(|n| n.contains(needle)))
}

/// `self` or `total` of the function named like `needle` (0 when absent).
pub fn count(report: &Value, needle: &str, field: &str) -> u64 {
    function(report, needle)
        .and_then(|f| f[field].as_u64())
        .unwrap_or(0)
}

/// The function row named exactly `name` (where [`function`] takes any name containing a
/// needle: `main` would find `__libc_start_main_impl`); panics when the report has none.
pub fn function_named<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["cpu"]["functions"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["function"] == name))
        .unwrap_or_else(|| panic!("{name} not in the report"))
}

/// The number `key` of a report object (a function row, a section); panics when it has none.
pub fn number(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("no {key} in {v}"))
}

/// Share of `a` in `a + b`, percent.
pub fn share(a: u64, b: u64) -> f64 {
    assert!(a + b > 0, "no samples in either function");
    100.0 * a as f64 / (a + b) as f64
}

/// The half-width, in points, allowed around an expected share of `expected` percent among
/// `n` samples: `flat`, or 4 standard deviations of binomial sampling noise when that is
/// wider.
pub fn share_band(expected: f64, flat: f64, n: u64) -> f64 {
    let p = expected / 100.0;
    let sd = 100.0 * (p * (1.0 - p) / n.max(1) as f64).sqrt();
    (4.0 * sd).max(flat)
}

/// Whether `a` and `b` samples split as `tests/programs/cpu_split.c`'s functions do, 3:1:
/// `a`'s share within 5 points of 75%, or within 4 standard deviations of the sampling noise
/// where that is wider (7 points at 600 samples; a fixed 70-80% failed a 607-sample run
/// at 80.2%).
pub fn is_three_to_one(a: u64, b: u64) -> bool {
    (share(a, b) - 75.0).abs() <= share_band(75.0, 5.0, a + b)
}

/// `hostside report --heap --json` with a sysroot: the whole report, every site listed.
pub fn heap_report_json(recording: &Path, sysroot: &Path) -> Value {
    kind_report("--heap", "100000", recording, sysroot, &[])
}

/// The heap interposer under test: `CROSSPROF_HEAP_LIB`, else the host build's
/// `libcrossprof_heap.so` in the cargo target directory.
pub fn heap_lib() -> PathBuf {
    if let Some(p) = std::env::var_os("CROSSPROF_HEAP_LIB") {
        return PathBuf::from(p);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let p = target.join("release/libcrossprof_heap.so");
    assert!(
        p.exists(),
        "{} not found; build it with `cargo build --release -p crossprof-heap` (or set CROSSPROF_HEAP_LIB)",
        p.display()
    );
    p
}

/// Every record of a recording and the reader's summary.
pub fn read_records(path: &Path) -> (Vec<crossprof_format::Record>, crossprof_format::Summary) {
    let bytes = std::fs::read(path).expect("read recording");
    let mut r = crossprof_format::Reader::new(&bytes).expect("a recording");
    let mut out = Vec::new();
    while let Some(rec) = r.next_record() {
        out.push(rec);
    }
    (out, r.summary().clone())
}

/// `hostside export --format collapsed` of a recording, split back into stacks (outermost
/// first, the process name as the root) and their sample counts.
pub fn folded_stacks(recording: &Path, sysroot: &Path) -> Vec<(Vec<String>, u64)> {
    let name = recording
        .file_name()
        .and_then(|n| n.to_str())
        .expect("file name");
    let out = scratch().join(format!("{name}.folded"));
    hostside_ok(&[
        "export",
        "--format",
        "collapsed",
        "--sysroot",
        sysroot.to_str().expect("utf-8"),
        recording.to_str().expect("utf-8"),
        "-o",
        out.to_str().expect("utf-8"),
    ]);
    std::fs::read_to_string(&out)
        .expect("folded output")
        .lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').expect("a count");
            (
                stack.split(';').map(str::to_string).collect(),
                n.parse().expect("a number"),
            )
        })
        .collect()
}

/// The ground truth of `tests/programs/deep.c` + `deep_lib.c`, however the stacks were
/// captured: most samples are in `deep_leaf`; >= 99% of those unwind through `main` into the
/// C library's start code; `deep_path` has 2/3 and `recurse` 1/3 of them (within 5 points);
/// the leaf's stacks hold all 12 exe/lib levels and the recursion's all 21 frames.
pub fn assert_deep_ground_truth(stacks: &[(Vec<String>, u64)]) {
    let total: u64 = stacks.iter().map(|(_, n)| n).sum();
    assert!(total > 100, "only {total} samples");
    let in_leaf = |s: &Vec<String>| s.last().is_some_and(|f| f == "deep_leaf");
    let has = |s: &Vec<String>, name: &str| s.iter().any(|f| f == name);
    let work: u64 = stacks
        .iter()
        .filter(|(s, _)| in_leaf(s))
        .map(|(_, n)| n)
        .sum();
    let reach: u64 = stacks
        .iter()
        .filter(|(s, _)| {
            in_leaf(s) && has(s, "main") && s.iter().any(|f| f.starts_with("__libc_start"))
        })
        .map(|(_, n)| n)
        .sum();
    // Under emulation the dynamic loader's start-up takes a noticeable share of samples.
    assert!(
        work * 10 >= total * 7,
        "only {work} of {total} samples in deep_leaf: {stacks:?}"
    );
    assert!(
        reach * 100 >= work * 99,
        "{reach} of {work} deep_leaf samples reach main and __libc_start*: {stacks:?}"
    );
    let with = |name: &str| -> u64 {
        stacks
            .iter()
            .filter(|(s, _)| has(s, name))
            .map(|(_, n)| n)
            .sum()
    };
    let (dp, rc) = (with("deep_path"), with("recurse"));
    let share = 100.0 * dp as f64 / (dp + rc) as f64;
    assert!(
        (share - 200.0 / 3.0).abs() <= 5.0,
        "deep_path {share:.1}% ({dp} vs {rc})"
    );
    let hottest = |caller: &str| {
        stacks
            .iter()
            .filter(|(s, _)| in_leaf(s) && has(s, caller))
            .max_by_key(|(_, n)| *n)
            .map(|(s, _)| s.clone())
            .unwrap_or_default()
    };
    let deep = hottest("deep_path");
    let levels = deep
        .iter()
        .filter(|f| f.starts_with("deep_exe_level") || f.starts_with("deep_lib_level"))
        .count();
    assert_eq!(levels, 12, "{deep:?}");
    let rec = hottest("recurse");
    assert_eq!(
        rec.iter().filter(|f| *f == "recurse").count(),
        21,
        "{rec:?}"
    );
}
