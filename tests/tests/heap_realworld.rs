//! Issue 12: on real programs nobody here wrote (Debian sources, built by the real-world corpus
//! in `tests/realworld/`, stripped on the "board"), `rec --heap` + `hostside report --heap`
//! give exactly `heaptrack_print`'s numbers: allocations, temporary allocations, peak bytes,
//! leaked bytes and blocks, in total and per site. heaptrack runs in the same test, on the
//! unstripped copy (it symbolizes on the target).
//!
//! The one difference is heaptrack's, and is taken out explicitly (see
//! `crossprof_tests::heaptrack`): its preload library links libstdc++, whose emergency pool
//! (72,704 bytes, live from start-up to exit) it counts in every program, so for the C programs
//! heaptrack_print reports one allocation and 72,704 bytes of peak more than the program makes.
//!
//! Both runs must do the same work, and a program's work can depend on its own path: Lua keeps
//! `argv[0]` in its `arg` table, and the string's size shifts the garbage collector's pacing
//! (a longer path, 1,400 allocations more). So each run starts the program as `./NAME` from a
//! directory of the same length that holds a link to its copy (stripped for rec, unstripped
//! for heaptrack) and links to the workload's files.
//!
//! The programs: an interpreter whose allocator is `realloc` (Lua), a database engine with its
//! lookaside allocator off so every allocation reaches malloc (SQLite), a compressor (zstd,
//! single-threaded so that both runs see one event order) and a C++ program (Ninja, through
//! `operator new`). Workloads take a second or two under heaptrack.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crossprof_tests::heap_parity::{differences, Strictness};
use crossprof_tests::heaptrack::{heaptrack_in, loaded_modules, Extra, Heaptrack, HtSite};
use crossprof_tests::realworld::{self, RealProgram};
use crossprof_tests::*;
use serde_json::Value;

/// One program recorded by rec and by heaptrack.
struct Compared {
    program: RealProgram,
    heap: Value,
    ht: Heaptrack,
    own: Vec<HtSite>,
    extra: Extra,
}

/// A directory `<scratch>/<tag>-<who>` from which `./NAME` runs `binary` with the workload's
/// files at hand (symbolic links), so that the program sees the same `argv[0]` and paths in
/// both runs.
fn run_dir(p: &RealProgram, tag: &str, who: &str, binary: &Path) -> PathBuf {
    let dir = scratch().join(format!("{tag}-{who}"));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let name = p.board.file_name().expect("file name");
    std::os::unix::fs::symlink(binary, dir.join(name)).expect("link the program");
    for e in std::fs::read_dir(&p.workdir).expect("read the workload's directory") {
        let e = e.expect("directory entry");
        std::os::unix::fs::symlink(e.path(), dir.join(e.file_name())).expect("link an input");
    }
    dir
}

/// `./NAME`, as both runs start the program.
fn dot_slash(p: &RealProgram) -> PathBuf {
    Path::new(".").join(p.board.file_name().expect("file name"))
}

/// `rec --heap [--no-cpu] ./NAME args` in `dir`.
fn record_in(p: &RealProgram, dir: &Path, args: &[String], out: &Path, cpu: bool) {
    let mut cmd = Command::new(rec());
    cmd.arg("--out").arg(out).arg("--heap");
    if !cpu {
        cmd.arg("--no-cpu");
    }
    let o = cmd
        .arg("--")
        .arg(dot_slash(p))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run rec");
    assert!(
        o.status.success(),
        "rec {} failed ({:?}):\n{}",
        p.program,
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `report --heap --json` with every site, symbols from the sysroot and the C library's
/// detached debug info (libc6-dbg), as heaptrack uses it.
fn heap_json(recording: &Path, sysroot: &Path) -> Value {
    let mut args = vec![
        "report",
        "--heap",
        "--json",
        "--top",
        "1000000",
        "--sysroot",
        sysroot.to_str().expect("utf-8"),
    ];
    if Path::new("/usr/lib/debug/.build-id").is_dir() {
        args.extend(["--debug-dir", "/usr/lib/debug"]);
    }
    args.push(recording.to_str().expect("utf-8"));
    let v: Value = serde_json::from_str(&hostside_ok(&args)).expect("valid JSON");
    assert_eq!(v["recording"]["complete"].as_bool(), Some(true), "{v:#}");
    v["heap"].clone()
}

/// Builds `name` (x86_64, GNU ld, -O2, PIE), runs its workload (`args` replace the corpus's
/// when given) under rec and under heaptrack, and compares.
fn compare(name: &str, args: Option<&[&str]>, cpu: bool) -> Compared {
    let program = realworld::build(name, "bfd-O2-pie");
    let args: Vec<String> = match args {
        Some(a) => a.iter().map(|s| s.to_string()).collect(),
        None => program.args.clone(),
    };
    let tag = format!("real_{name}{}", if cpu { "_cpu" } else { "" });
    let recording = scratch().join(format!("{tag}.zst"));
    let rec_dir = run_dir(&program, &tag, "rec", &program.board);
    record_in(&program, &rec_dir, &args, &recording, cpu);
    let heap = heap_json(&recording, &program.sysroot);
    let arg_refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let ht_dir = run_dir(&program, &tag, "hpt", &program.unstripped);
    let ht = heaptrack_in(
        Some(&ht_dir),
        &dot_slash(&program),
        &arg_refs,
        &scratch().join(format!("{tag}.heaptrack")),
    );
    let (own, extra) = ht.split(&loaded_modules(&program.unstripped));
    Compared {
        program,
        heap,
        ht,
        own,
        extra,
    }
}

/// Every total and every site equal heaptrack_print's.
fn assert_exact(c: &Compared) {
    let diffs = differences(
        &c.heap,
        &c.ht,
        &c.own,
        &c.extra,
        Strictness {
            temporary: true,
            peak: true,
        },
    );
    assert!(
        diffs.is_empty(),
        "{}: differences from heaptrack_print:\n  {}\nheaptrack's extra sites: {:?}",
        c.program.program,
        diffs.join("\n  "),
        c.extra
    );
    // The numbers side by side (shown with --nocapture), heaptrack's as it reports them.
    eprintln!(
        "{}: allocations {} (heaptrack {}), temporary {} ({}), peak {} B ({} B), leaked {} B in {} \
         blocks ({} B); heaptrack's extra: {:?}",
        c.program.program,
        u(&c.heap, "allocations"),
        c.ht.allocations,
        u(&c.heap, "temporary"),
        c.ht.temporary,
        u(&c.heap, "peak_bytes"),
        c.ht.peak_bytes,
        u(&c.heap, "leaked_bytes"),
        u(&c.heap, "leaked_allocations"),
        c.ht.leaked_bytes,
        (c.extra.allocations, c.extra.temporary, c.extra.peak_bytes),
    );
    assert_eq!(c.heap["lost_events"].as_u64(), Some(0));
    assert_eq!(c.heap["anomalies"]["unknown_stack_allocations"], 0);
}

fn u(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no {field} in {v}"))
}

/// Our site named `function` in `file`.
fn site<'a>(c: &'a Compared, function: &str, file: &str) -> &'a Value {
    c.heap["sites"]
        .as_array()
        .expect("sites")
        .iter()
        .find(|s| {
            s["function"] == function
                && s["file"]
                    .as_str()
                    .is_some_and(|f| f.ends_with(&format!("/{file}")))
        })
        .unwrap_or_else(|| panic!("no site {function} in {file}: {:#}", c.heap["sites"]))
}

/// The C programs: heaptrack's only extra is its own libstdc++'s pool.
fn assert_extra_is_heaptracks_pool(c: &Compared) {
    assert_eq!(c.extra.allocations, 1, "{:?}", c.extra);
    assert_eq!(c.extra.sites.len(), 1, "{:?}", c.extra);
    assert!(
        c.extra.sites[0].module.contains("libstdc++"),
        "{:?}",
        c.extra
    );
    assert!(c.extra.peak_bytes > 0, "{:?}", c.extra);
}

#[test]
fn lua_interpreter_equals_heaptrack() {
    let c = compare("lua", None, false);
    assert_exact(&c);
    assert_extra_is_heaptracks_pool(&c);
    // Lua allocates everything through its one allocator function, which tail-calls realloc:
    // the site is the allocator's caller, and one site holds nearly every allocation.
    let malloc = site(&c, "luaM_malloc_", "lmem.c");
    assert!(u(malloc, "allocations") > 1_000_000, "{malloc}");
    assert!(
        u(malloc, "allocations") * 100 > u(&c.heap, "allocations") * 99,
        "{:#}",
        c.heap
    );
}

#[test]
fn lua_recorded_with_cpu_sampling_equals_heaptrack() {
    let c = compare("lua", None, true);
    assert_exact(&c);
}

#[test]
fn sqlite_without_lookaside_equals_heaptrack() {
    let p = realworld::build("sqlite3", "bfd-O2-pie");
    let mut args: Vec<&str> = vec!["-lookaside", "0", "0"];
    args.extend(p.args.iter().map(String::as_str));
    let c = compare("sqlite3", Some(&args), false);
    assert_exact(&c);
    assert_extra_is_heaptracks_pool(&c);
    assert!(u(&c.heap, "allocations") > 1_000_000, "{:#}", c.heap);
    assert!(u(&c.heap, "temporary") > 100_000, "{:#}", c.heap);
    // SQLite's allocator wrappers call malloc and realloc.
    assert!(u(site(&c, "sqlite3MemMalloc", "sqlite3.c"), "allocations") > 100_000);
}

#[test]
fn zstd_compressor_equals_heaptrack() {
    let p = realworld::build("zstd", "bfd-O2-pie");
    // One thread, so that both runs allocate in the same order.
    let mut args: Vec<&str> = vec!["--single-thread"];
    args.extend(
        p.args
            .iter()
            .map(String::as_str)
            .filter(|a| !a.starts_with("-T")),
    );
    let c = compare("zstd", Some(&args), false);
    assert_exact(&c);
    assert_extra_is_heaptracks_pool(&c);
}

#[test]
fn ninja_cpp_equals_heaptrack() {
    let c = compare("ninja", None, false);
    assert_exact(&c);
    // A C++ program loads libstdc++ itself: heaptrack counts nothing extra.
    assert_eq!(c.extra.allocations, 0, "{:?}", c.extra);
    assert!(u(&c.heap, "allocations") > 100_000, "{:#}", c.heap);
    let sites = c.heap["sites"].as_array().expect("sites");
    assert!(
        sites.iter().all(|s| !s["function"]
            .as_str()
            .unwrap_or("")
            .starts_with("operator new")),
        "operator new is skipped, as heaptrack does"
    );
}
