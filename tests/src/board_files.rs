//! The files of a program's board run and its debug sysroot: the shared libraries it loads,
//! from Debian's C library for the board where that has them (the sysroot then finds their
//! debug info by build-id, as a distribution's debug filesystem does).

use std::path::{Path, PathBuf};

use crate::boards::{debian_libc, Board, Files};

/// A symbolic link at `link` (its directories made) to `target`.
pub fn symlink(target: &Path, link: &Path) {
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, link)
        .unwrap_or_else(|e| panic!("{} -> {}: {e}", link.display(), target.display()));
}

/// Puts the shared libraries a cross-built program loads (`libs`: board path, the cross
/// toolchain's copy) on the board and in its debug `sysroot`, each from Debian's C library
/// for the board where that has it (whose debug info the sysroot finds by build-id), else
/// the toolchain's copy. A library already in `files` is replaced: one copy per path.
pub fn add_libraries(board: Board, libs: &[(String, PathBuf)], sysroot: &Path, files: &mut Files) {
    let libc = debian_libc(board);
    for (guest, cross) in libs {
        let debian = libc.join(guest.trim_start_matches('/'));
        let host = if debian.exists() {
            std::fs::canonicalize(&debian).unwrap()
        } else {
            cross.clone()
        };
        let data = std::fs::read(&host).unwrap();
        match files.iter_mut().find(|(g, _, _)| g == guest) {
            Some(f) => f.1 = data,
            None => files.push((guest.clone(), data, 0o755)),
        }
        symlink(&host, &sysroot.join(guest.trim_start_matches('/')));
    }
}
