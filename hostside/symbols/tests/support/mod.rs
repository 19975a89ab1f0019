//! Building real programs for the tests with the system's gcc/g++ and binutils, and reading
//! ground truth about them with binutils (readelf, nm), independently of the code under test.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `cmd`, panicking with its stderr if it fails.
pub fn sh(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Output of `cmd`, which must succeed.
pub fn stdout(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Path of a test program's source.
pub fn source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(name)
}

/// Compiles `name` (gcc for .c, g++ for .cpp) into `out` with `flags`, creating its directory.
pub fn compile(name: &str, out: &Path, flags: &[&str]) {
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).unwrap();
    }
    let compiler = if name.ends_with(".cpp") { "g++" } else { "gcc" };
    sh(Command::new(compiler)
        .args(flags)
        .arg("-Wl,--build-id")
        .arg(source(name))
        .arg("-o")
        .arg(out));
}

/// The 1-based line of the `// LINE:tag` marker in a test program.
pub fn marker_line(name: &str, tag: &str) -> u32 {
    let text = std::fs::read_to_string(source(name)).unwrap();
    let marker = format!("// LINE:{tag}");
    let idx = text
        .lines()
        .position(|l| l.trim_end().ends_with(&marker))
        .unwrap_or_else(|| panic!("no {marker} in {name}"));
    idx as u32 + 1
}

/// The GNU build-id of `path`, from `readelf -n`.
pub fn build_id(path: &Path) -> Vec<u8> {
    let text = stdout(Command::new("readelf").arg("-n").arg(path));
    let hex = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("build-id")
        .trim()
        .to_string();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// Address and size of the defined symbol `name` (mangled) per `nm -S`; `dynamic` reads
/// `.dynsym`.
pub fn symbol(path: &Path, name: &str, dynamic: bool) -> (u64, u64) {
    let mut cmd = Command::new("nm");
    cmd.arg("-S").arg("--defined-only");
    if dynamic {
        cmd.arg("-D");
    }
    let text = stdout(cmd.arg(path));
    text.lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4 && f[3] == name).then(|| {
                (
                    u64::from_str_radix(f[0], 16).unwrap(),
                    u64::from_str_radix(f[1], 16).unwrap(),
                )
            })
        })
        .unwrap_or_else(|| panic!("no {name} in nm of {}", path.display()))
}

/// `(offset, vaddr, filesz)` of each `PT_LOAD` of `path`, from `readelf -l`.
pub fn load_segments(path: &Path) -> Vec<(u64, u64, u64)> {
    let text = stdout(Command::new("readelf").arg("-lW").arg(path));
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.first() == Some(&"LOAD")).then(|| (hex(f[1]), hex(f[2]), hex(f[4])))
        })
        .collect()
}

/// The file offset of `svma` in `path`, per its program headers.
pub fn file_offset(path: &Path, svma: u64) -> u64 {
    load_segments(path)
        .into_iter()
        .find(|&(_, vaddr, filesz)| svma >= vaddr && svma < vaddr + filesz)
        .map(|(offset, vaddr, _)| offset + (svma - vaddr))
        .expect("address in a segment")
}

/// `path` relative to the sysroot `root`, for the board path `board`.
pub fn in_root(root: &Path, board: &str) -> PathBuf {
    root.join(board.trim_start_matches('/'))
}

/// `ROOT/.build-id/ab/cdef….debug` for `id`.
pub fn build_id_path(root: &Path, id: &[u8]) -> PathBuf {
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    root.join(".build-id")
        .join(&hex[..2])
        .join(format!("{}.debug", &hex[2..]))
}

/// `objcopy --only-keep-debug src dst`.
pub fn only_keep_debug(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    sh(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(src)
        .arg(dst));
}

/// A fully stripped copy of `src` at `dst`, with a debuglink to `link` when given.
pub fn strip(src: &Path, dst: &Path, link: Option<&Path>) {
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    sh(Command::new("strip").arg(src).arg("-o").arg(dst));
    if let Some(link) = link {
        sh(Command::new("objcopy")
            .arg(format!("--add-gnu-debuglink={}", link.display()))
            .arg(dst));
    }
}
