//! The real-world corpus (`tests/realworld/`): programs nobody here wrote, fetched from the
//! registries (Debian source packages, crates.io) and built the way embedded teams build them,
//! each with a stripped board copy, its unstripped copy in a debug sysroot at the same path,
//! and a deterministic workload of a few seconds.
//!
//! ```no_run
//! let p = crossprof_tests::realworld::build("sqlite3", "lld-O2-pie");
//! let status = p.command().status().unwrap(); // or hand p.command_line() to rec / perf
//! # let _ = status;
//! ```
//!
//! Builds are cached under `~/.cache/crossprof/realworld/` by `tests/realworld/build.sh`; the
//! first build of a variant takes a minute or two (ripgrep longer), later ones cost a stamp
//! check. Several tests may ask for the same build at once: the script serialises them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::root;

/// The programs of the corpus: a database, an interpreter, a compressor, a C++ build tool
/// with exceptions enabled, and a multi-threaded Rust program.
pub const PROGRAMS: &[&str] = &["sqlite3", "lua", "zstd", "ninja", "ripgrep"];

/// The C/C++ programs (every linker variant applies to them; ripgrep's only variant is
/// `rust`).
pub const C_PROGRAMS: &[&str] = &["sqlite3", "lua", "zstd", "ninja"];

/// The linkers of the C/C++ variants (x86_64 and the boards).
pub const LINKERS: &[&str] = &["bfd", "lld", "mold"];

/// The programs that are also cross-built for the emulated boards (variants
/// `aarch64-LINKER-O2-pie` and `armv7-LINKER-O2-pie`), with a smaller workload for them
/// ([`RealProgram::board_args`]).
pub const BOARD_PROGRAMS: &[&str] = &["sqlite3", "lua"];

/// One program built in one variant.
#[derive(Debug, Clone)]
pub struct RealProgram {
    /// Corpus name (`sqlite3`, `lua`, ...).
    pub program: String,
    /// Variant (`bfd-O2-pie`, `aarch64-bfd-O2-pie`, `rust`, ...).
    pub variant: String,
    /// `x86_64`, `aarch64` or `armv7`.
    pub arch: String,
    /// Source version (Debian package version or crates.io version).
    pub version: String,
    /// The stripped copy to run (on x86_64 it runs where it lies).
    pub board: PathBuf,
    /// The path of the program on the board: `board` itself on x86_64, `/usr/bin/NAME` for
    /// the cross builds.
    pub guest: String,
    /// The unstripped copy, inside `sysroot` at `guest`.
    pub unstripped: PathBuf,
    /// Debug sysroot: the unstripped program and (as symlinks to the files of this machine or
    /// of the cross toolchain) the shared libraries it loads, at their board paths.
    pub sysroot: PathBuf,
    /// The workload's directory (inputs generated there, shared by all variants of the
    /// program): run the program with this as its working directory.
    pub workdir: PathBuf,
    /// The workload's arguments (paths relative to `workdir`).
    pub args: Vec<String>,
    /// The smaller workload of the emulated boards (empty for programs that do not run
    /// there): its arguments, relative to the directory holding `board_inputs`.
    pub board_args: Vec<String>,
    /// The files of `workdir` the board workload reads.
    pub board_inputs: Vec<String>,
    /// The shared libraries the program needs: (path on the board, file on this machine).
    /// For the cross builds these come from Debian's cross C library.
    pub libs: Vec<(String, PathBuf)>,
}

impl RealProgram {
    /// The program and its workload arguments, for `rec --` or `perf record --`.
    pub fn command_line(&self) -> Vec<String> {
        let mut v = vec![self.board.to_string_lossy().into_owned()];
        v.extend(self.args.iter().cloned());
        v
    }

    /// The workload as a command: working directory set, output discarded.
    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.board);
        c.args(&self.args)
            .current_dir(&self.workdir)
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        c
    }

    /// Wraps the workload in another command (a profiler): `wrapper... board args...`, run
    /// in the workload's directory with its output discarded.
    pub fn wrapped(&self, wrapper: &Path, wrapper_args: &[&str]) -> Command {
        let mut c = Command::new(wrapper);
        c.args(wrapper_args)
            .args(self.command_line())
            .current_dir(&self.workdir)
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        c
    }
}

/// The programs of the corpus used as Debian ships them, not built here (variant `debian`):
/// stripped, with no debug packages, so the sysroot is this machine's root.
///
/// - `gst-jpeg`, `gst-vorbis`: GStreamer's `gst-launch-1.0` encoding video to JPEG
///   (libjpeg-turbo's SIMD assembly without CFI, ORC code generated into a deleted file) and
///   audio to Vorbis (streaming threads with large stack frames).
/// - `python`: the Python 3 interpreter running `tests/realworld/workloads/python.py`. The
///   interpreter exports its API in `.dynsym`, but its static functions (much of the eval loop's
///   helpers) have no symbol anywhere on the machine: code grouped by unwind-table function.
///
/// `tests/realworld/setup.sh all` installs them.
pub const INSTALLED: &[&str] = &["gst-jpeg", "gst-vorbis", "python"];

/// The Debian package and executable of one of [`INSTALLED`], with its arguments.
fn installed_command(program: &str) -> (&'static str, PathBuf, Vec<String>) {
    if program == "python" {
        let script = root().join("tests/realworld/workloads/python.py");
        // The versioned file: /usr/bin/python3 is a symbolic link to it.
        let board = std::fs::canonicalize("/usr/bin/python3").unwrap_or_else(|e| {
            panic!("/usr/bin/python3: {e}: run scripts/test-setup.sh (tests/realworld/setup.sh installs it)")
        });
        return (
            "python3",
            board,
            vec![script.to_string_lossy().into_owned()],
        );
    }
    let board = PathBuf::from("/usr/bin/gst-launch-1.0");
    assert!(
        board.exists(),
        "{} is missing: run scripts/test-setup.sh (tests/realworld/setup.sh installs GStreamer)",
        board.display()
    );
    let pipeline: &[&str] = match program {
        "gst-jpeg" => &[
            "videotestsrc num-buffers=300 pattern=snow",
            "video/x-raw,width=1280,height=720",
            "jpegenc",
            "fakesink",
        ],
        "gst-vorbis" => &[
            "audiotestsrc num-buffers=12000 wave=pink-noise",
            "audioconvert",
            "vorbisenc quality=0.9",
            "oggmux",
            "fakesink",
        ],
        other => panic!("no installed program {other} (have {INSTALLED:?})"),
    };
    let mut args = vec!["-q".to_string()];
    for (i, element) in pipeline.iter().enumerate() {
        if i > 0 {
            args.push("!".into());
        }
        args.extend(element.split(' ').map(str::to_string));
    }
    ("gstreamer1.0-tools", board, args)
}

/// One of [`INSTALLED`], with its workload. Panics, naming the setup command, when the
/// packages are missing.
pub fn installed(program: &str) -> RealProgram {
    let (package, board, args) = installed_command(program);
    let version = Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", package])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let workdir = crate::scratch().join(program);
    std::fs::create_dir_all(&workdir).expect("mkdir");
    RealProgram {
        program: program.into(),
        variant: "debian".into(),
        arch: "x86_64".into(),
        version,
        guest: board.to_string_lossy().into_owned(),
        unstripped: board.clone(),
        board,
        sysroot: PathBuf::from("/"),
        workdir,
        args,
        board_args: Vec::new(),
        board_inputs: Vec::new(),
        libs: Vec::new(),
    }
}

/// Builds (or finds cached) `program` in `variant` with `tests/realworld/build.sh` and reads
/// its manifest. Panics with the script's message when the build fails (a missing tool, no
/// network for a first fetch).
pub fn build(program: &str, variant: &str) -> RealProgram {
    let script = root().join("tests/realworld/build.sh");
    let out = Command::new(&script)
        .args([program, variant])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "tests/realworld/build.sh {program} {variant} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let manifest = Path::new(&dir).join("manifest");
    let text = std::fs::read_to_string(&manifest)
        .unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    parse_manifest(&text).unwrap_or_else(|| panic!("{}: malformed manifest", manifest.display()))
}

fn parse_manifest(text: &str) -> Option<RealProgram> {
    let mut p = RealProgram {
        program: String::new(),
        variant: String::new(),
        arch: String::new(),
        version: String::new(),
        board: PathBuf::new(),
        guest: String::new(),
        unstripped: PathBuf::new(),
        sysroot: PathBuf::new(),
        workdir: PathBuf::new(),
        args: Vec::new(),
        board_args: Vec::new(),
        board_inputs: Vec::new(),
        libs: Vec::new(),
    };
    for line in text.lines() {
        let (k, v) = line.split_once('=')?;
        match k {
            "program" => p.program = v.into(),
            "variant" => p.variant = v.into(),
            "arch" => p.arch = v.into(),
            "version" => p.version = v.into(),
            "board" => p.board = v.into(),
            "guest" => p.guest = v.into(),
            "unstripped" => p.unstripped = v.into(),
            "sysroot" => p.sysroot = v.into(),
            "workdir" => p.workdir = v.into(),
            "arg" => p.args.push(v.into()),
            "board_arg" => p.board_args.push(v.into()),
            "board_input" => p.board_inputs.push(v.into()),
            "lib" => {
                let (guest, host) = v.split_once(' ')?;
                p.libs.push((guest.into(), host.into()));
            }
            _ => {}
        }
    }
    (!p.program.is_empty() && p.board.is_absolute() && p.sysroot.is_absolute()).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_lines_become_fields() {
        let p = parse_manifest(
            "program=lua\nvariant=bfd-O2-pie\narch=x86_64\nversion=5.4\nboard=/c/board/lua\n\
             guest=/c/board/lua\nunstripped=/c/sysroot/c/board/lua\nsysroot=/c/sysroot\n\
             workdir=/w\narg=bench.lua\narg=.read x y\nlib=/lib/x/libc.so.6 /usr/lib/x/libc.so.6\n\
             board_arg=bench.lua\nboard_arg=1\nboard_input=bench.lua\n",
        )
        .unwrap();
        assert_eq!(p.args, ["bench.lua", ".read x y"]);
        assert_eq!(p.board_args, ["bench.lua", "1"]);
        assert_eq!(p.board_inputs, ["bench.lua"]);
        assert_eq!(
            p.libs,
            [(
                "/lib/x/libc.so.6".to_string(),
                PathBuf::from("/usr/lib/x/libc.so.6")
            )]
        );
        assert_eq!(p.command_line(), ["/c/board/lua", "bench.lua", ".read x y"]);
        assert!(parse_manifest("garbage").is_none());
    }
}
