//! The heap interposer on an emulated board (see [`crate::boards`]): the files a `rec --heap`
//! job needs on the board image besides `rec` and the program, and the real-world corpus's
//! programs prepared for a heap run ([`prepare_real`]).

use std::path::{Path, PathBuf};

use crate::board_files::{add_libraries, symlink};
use crate::boards::{debian_libc, Board, Files};
use crate::realworld::{build, RealProgram};
use crate::root;

/// The heap interposer built for the board's glibc, from `dist/<triple>/gnu/` (or
/// `$CROSSPROF_DIST`), at `/libcrossprof_heap.so` (next to `/rec`, where rec looks first),
/// and the C libraries it links besides libc (glibc >= 2.34 keeps them as stubs; the
/// interposer is linked for 2.17), and libgcc_s, which ARM code built with
/// `-funwind-tables` needs for its personality routines.
pub fn interposer_files(board: Board) -> Files {
    let dist = std::env::var_os("CROSSPROF_DIST")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("dist"));
    let lib = dist.join(board.triple()).join("gnu/libcrossprof_heap.so");
    let read = |p: &Path| {
        std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}; run targets/dist.sh", p.display()))
    };
    let mut files = vec![("/libcrossprof_heap.so".to_string(), read(&lib), 0o755)];
    let cross = Path::new("/usr").join(board.gnu()).join("lib");
    for name in ["libpthread.so.0", "libdl.so.2", "libgcc_s.so.1"] {
        let guest = format!("/lib/{}/{name}", board.gnu());
        files.push((guest, read(&cross.join(name)), 0o755));
    }
    files
}

/// A program of the real-world corpus prepared for a board heap run.
pub struct RealCase {
    /// Its board build.
    pub program: RealProgram,
    /// Its corpus name, also its board path (`/NAME`) and its recording's (`/out/NAME.zst`).
    pub name: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its debug sysroot.
    pub sysroot: PathBuf,
}

/// The board files of `name` built as `variant` (at `/NAME`, so that `./NAME` runs it from
/// `/`, the jobs' working directory, with its libraries from Debian's C library and its
/// input in `/`) and its debug sysroot under `dir`.
pub fn prepare_real(
    board: Board,
    name: &str,
    variant: &str,
    args: &[String],
    dir: &Path,
    files: &mut Files,
) -> RealCase {
    let p = build(name, variant);
    let libc = debian_libc(board);
    let sysroot = dir.join(format!("{name}-sysroot"));
    let guest = format!("/{name}");
    symlink(&p.unstripped, &sysroot.join(name));
    symlink(&libc.join("usr/lib/debug"), &sysroot.join("usr/lib/debug"));
    files.push((guest, std::fs::read(&p.board).unwrap(), 0o755));
    add_libraries(board, &p.libs, &sysroot, files);
    for input in &p.board_inputs {
        let data = std::fs::read(p.workdir.join(input)).unwrap();
        files.push((format!("/{input}"), data, 0o644));
    }
    RealCase {
        program: p,
        name: name.to_string(),
        args: args.to_vec(),
        sysroot,
    }
}
