//! Ground-truth builds and recordings that several suites start from, made one way so that a
//! change to how the "board" copy or the sysroot is laid out happens in one place.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{add_host_debug_files, add_system_libs, build, record, run_ok, scratch, source};
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
