//! Ground-truth builds and recordings that several suites start from, made one way so that a
//! change to how the "board" copy or the sysroot is laid out happens in one place.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::{
    add_host_debug_files, add_system_libs, build, record, run_ok, run_rec, scratch, source,
};
use crate::{Program, C_FP};

/// `deep.c` linked against `libdeep.so`: an executable and a shared library it calls, built
/// with DWARF, stripped for the board, unstripped in the sysroot at the board paths.
pub struct DeepBuild {
    /// The stripped executable the board runs (its `libdeep.so` next to it, found by rpath).
    pub board: PathBuf,
    /// Where the board's files sit in [`DeepBuild::sysroot`].
    pub sys_dir: PathBuf,
    /// A sysroot with both unstripped files and the C library the executable loads.
    pub sysroot: PathBuf,
}

/// Builds `deep` and `libdeep.so` under `<scratch>/<tag>/`.
pub fn build_deep(tag: &str) -> DeepBuild {
    let dir = scratch().join(tag);
    let board_dir = dir.join("board");
    let sysroot = dir.join("sysroot");
    let sys_dir = sysroot.join(board_dir.strip_prefix("/").expect("absolute path"));
    let built = dir.join("built");
    for d in [&board_dir, &sys_dir, &built] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    run_ok(
        Command::new("gcc")
            .args(["-O2", "-g", "-shared", "-fPIC", "-Wl,--build-id"])
            .arg(source("deep_lib.c"))
            .arg("-o")
            .arg(built.join("libdeep.so")),
    );
    run_ok(
        Command::new("gcc")
            .args(["-O2", "-g", "-Wl,--build-id"])
            .arg(source("deep.c"))
            .arg(format!("-L{}", built.display()))
            .arg("-ldeep")
            .arg(format!("-Wl,-rpath,{}", board_dir.display()))
            .arg("-o")
            .arg(built.join("deep")),
    );
    for f in ["libdeep.so", "deep"] {
        run_ok(
            Command::new("strip")
                .arg("-o")
                .arg(board_dir.join(f))
                .arg(built.join(f)),
        );
        std::fs::copy(built.join(f), sys_dir.join(f)).expect("copy");
    }
    let board = board_dir.join("deep");
    // ldd on the board copy lists libdeep.so at the board path, which is already in place.
    add_system_libs(&sysroot, &board);
    DeepBuild {
        board,
        sys_dir,
        sysroot,
    }
}

/// `cpu_split.c` (frame pointers), built under `<scratch>/<tag>/` and recorded with
/// `--call-graph fp` for 800 ms into `<scratch>/<tag>.zst`.
pub fn recorded_cpu_split(tag: &str) -> (Program, PathBuf) {
    let program = build("cpu_split.c", tag, C_FP);
    let recording = scratch().join(format!("{tag}.zst"));
    record(
        &recording,
        &["--call-graph", "fp"],
        &[program.board.to_str().expect("UTF-8 path"), "800"],
    );
    (program, recording)
}

/// `mutex_split.c` recorded by [`recorded_mutex_split`], with what the program measured.
pub struct MutexSplit {
    /// The program.
    pub program: Program,
    /// `<scratch>/<tag>.zst`.
    pub recording: PathBuf,
    /// Nanoseconds the program measured itself in each of `wait_turn`, `take_lock`, `rest` and
    /// `hold_lock`, summed over the rounds: the truth of the waits, which wake-up delays on a
    /// busy machine stretch and shift away from the nominal 30 and 90 ms.
    pub measured: HashMap<String, u64>,
}

impl MutexSplit {
    /// `a`'s share of `a + b` as the program measured them, percent.
    pub fn measured_share(&self, a: &str, b: &str) -> f64 {
        let ns = |f: &str| self.measured[f] as f64;
        100.0 * ns(a) / (ns(a) + ns(b))
    }
}

/// `mutex_split.c` (-O2), built under `<scratch>/<tag>/` with the C library in its sysroot and
/// recorded with `--off-cpu` for 20 rounds into `<scratch>/<tag>.zst`. Its contender waits
/// about 3x longer for the lock (`take_lock`) than it sleeps between turns (`wait_turn`), as
/// [`MutexSplit::measured`] says exactly, and the holder wakes it 20 times from each; see
/// tests/tests/off_cpu.rs.
pub fn recorded_mutex_split(tag: &str) -> MutexSplit {
    recorded_mutex_split_with(tag, &[])
}

/// [`recorded_mutex_split`] with more `rec` options (`--heap`, `-e ...`).
pub fn recorded_mutex_split_with(tag: &str, rec_options: &[&str]) -> MutexSplit {
    let program = build("mutex_split.c", tag, &["-O2"]);
    add_system_libs(&program.sysroot, &program.board);
    let recording = scratch().join(format!("{tag}.zst"));
    let out = recording.to_str().expect("UTF-8 path");
    let board = program.board.to_str().expect("UTF-8 path");
    let mut args = vec!["--off-cpu", "--out", out];
    args.extend_from_slice(rec_options);
    args.extend(["--", board, "20"]);
    let o = run_rec(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // "wait_turn_ns W take_lock_ns T rest_ns R hold_lock_ns H"
    let text = String::from_utf8_lossy(&o.stdout);
    let words: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("wait_turn_ns "))
        .unwrap_or_else(|| panic!("no measurements in {text:?}"))
        .split_whitespace()
        .collect();
    let measured = words
        .chunks(2)
        .map(|w| {
            let name = w[0].strip_suffix("_ns").expect("NAME_ns");
            (name.to_string(), w[1].parse().expect("nanoseconds"))
        })
        .collect();
    let m = MutexSplit {
        program,
        recording,
        measured,
    };
    // A real measurement: 20 holds of at least 90 ms and 20 rests of at least 30 (a sleep
    // never ends early; a loaded machine only makes them longer).
    assert!(
        m.measured["hold_lock"] >= 20 * 90_000_000 && m.measured["rest"] >= 20 * 30_000_000,
        "{:?}",
        m.measured
    );
    m
}

/// A program run under `rec` where it was built, as [`built_in_place_and_recorded`] makes it.
pub struct InPlaceRun {
    /// `<scratch>/<tag>`: the executable, the recording and whatever the program wrote.
    pub dir: PathBuf,
    /// `<dir>/recording.zst`.
    pub recording: PathBuf,
    /// rec's exit status and output, the program's stdout among it.
    pub output: Output,
}

/// Builds `tests/programs/<name>.c` (-O2, DWARF, build-id; not stripped: it runs where it was
/// built, its own sysroot, as a JIT runtime's binary would on this machine) into
/// `<scratch>/<tag>/<name>` and runs `rec REC_OPTS -- <name> ARGS...` into
/// `<scratch>/<tag>/recording.zst`, asserting that rec succeeded.
pub fn built_in_place_and_recorded(
    name: &str,
    tag: &str,
    rec_opts: &[&str],
    args: &[&str],
) -> InPlaceRun {
    let dir = scratch().join(tag);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let exe = dir.join(name);
    run_ok(
        Command::new("gcc")
            .args(["-O2", "-g", "-Wl,--build-id"])
            .arg(source(&format!("{name}.c")))
            .arg("-o")
            .arg(&exe),
    );
    let recording = dir.join("recording.zst");
    let mut rec_args = vec!["--out", recording.to_str().expect("UTF-8 path")];
    rec_args.extend_from_slice(rec_opts);
    rec_args.extend_from_slice(&["--", exe.to_str().expect("UTF-8 path")]);
    rec_args.extend_from_slice(args);
    let output = run_rec(&rec_args);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    InPlaceRun {
        dir,
        recording,
        output,
    }
}

/// The program's sysroot completed as a board's would be: the C library and the loader it
/// runs with, and their debug files from this machine. Returns the sysroot.
pub fn mirror_sysroot(program: &Program) -> PathBuf {
    let mirror = program.sysroot.clone();
    add_system_libs(&mirror, &program.board);
    add_host_debug_files(&mirror);
    mirror
}

/// `path`'s place inside `sysroot` (the board path without its leading `/`).
pub fn in_sysroot(sysroot: &Path, board_path: &Path) -> PathBuf {
    sysroot.join(board_path.strip_prefix("/").expect("absolute path"))
}
