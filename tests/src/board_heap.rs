//! The heap interposer on an emulated board (see [`crate::boards`]): the files a `rec --heap`
//! job needs on the board image besides `rec` and the program.

use std::path::{Path, PathBuf};

use crate::boards::{Board, Files};
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
