//! Emulated boards: `qemu-system-aarch64 -M virt` and `qemu-system-arm -M virt` booting a real
//! Debian bookworm kernel with an initramfs built here, holding the cross-built static `rec`,
//! test programs built by Debian's cross gcc with the target's C library, and a tiny static init
//! (`tests/boards/init.c`) that runs the jobs and writes the files they leave in `/out` to a
//! virtual disk, which is read back here. qemu-user cannot do this: it has no perf_event_open.
//!
//! Needs `tests/boards/setup.sh` (QEMU, cross compilers, kernels in the user cache) and the
//! board's `rec` in `dist/<triple>/` (`targets/dist.sh`); a missing piece fails the test with
//! the command that provides it. A boot takes about 5 s (AArch64) or 9 s (ARMv7).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{root, scratch};

/// An emulated board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Board {
    /// `qemu-system-aarch64 -M virt -cpu cortex-a57` with Debian's arm64 kernel.
    Aarch64,
    /// `qemu-system-arm -M virt -cpu cortex-a15` with Debian's armmp (armhf) kernel.
    Armv7,
}

impl Board {
    /// Debian's name for the architecture (kernel cache directory).
    pub fn debian_arch(self) -> &'static str {
        match self {
            Board::Aarch64 => "arm64",
            Board::Armv7 => "armhf",
        }
    }

    /// The Rust target triple `rec` is built for.
    pub fn triple(self) -> &'static str {
        match self {
            Board::Aarch64 => "aarch64-unknown-linux-musl",
            Board::Armv7 => "armv7-unknown-linux-musleabihf",
        }
    }

    /// The GNU triplet of Debian's cross toolchain and multiarch library directory.
    pub fn gnu(self) -> &'static str {
        match self {
            Board::Aarch64 => "aarch64-linux-gnu",
            Board::Armv7 => "arm-linux-gnueabihf",
        }
    }

    /// The recording header's `arch`.
    pub fn arch_name(self) -> &'static str {
        match self {
            Board::Aarch64 => "aarch64",
            Board::Armv7 => "arm",
        }
    }

    /// The dynamic loader's file name in `/lib` of the board (the program interpreter).
    pub fn dynamic_linker(self) -> &'static str {
        match self {
            Board::Aarch64 => "ld-linux-aarch64.so.1",
            Board::Armv7 => "ld-linux-armhf.so.3",
        }
    }

    fn qemu(self) -> (&'static str, &'static str) {
        match self {
            // `-cpu max` is several times slower: it emulates pointer authentication.
            Board::Aarch64 => ("qemu-system-aarch64", "cortex-a57"),
            Board::Armv7 => ("qemu-system-arm", "cortex-a15"),
        }
    }

    /// Debian's cross C compiler for this board.
    pub fn gcc(self) -> String {
        format!("{}-gcc", self.gnu())
    }

    fn tool(self, name: &str) -> String {
        format!("{}-{name}", self.gnu())
    }
}

fn setup_hint() -> &'static str {
    "run tests/boards/setup.sh (QEMU, cross compilers, Debian kernels) and targets/dist.sh (rec for each board)"
}

/// Where tests/boards/setup.sh keeps the kernels.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CROSSPROF_BOARDS_CACHE") {
        return d.into();
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .expect("HOME or XDG_CACHE_HOME");
    base.join("crossprof/boards")
}

/// Debian's own C library for the board (`libc6`) with its detached debug info
/// (`libc6-dbg`, under `usr/lib/debug/.build-id/`), unpacked by tests/boards/setup.sh: the
/// library at its board path under the returned directory (`lib/<gnu>/libc.so.6`, ...).
pub fn debian_libc(board: Board) -> PathBuf {
    let d = cache_dir().join(format!("libc-{}", board.debian_arch()));
    assert!(
        d.join(".done").exists(),
        "no Debian C library at {}: {}",
        d.display(),
        setup_hint()
    );
    d
}

/// Debian's `perf` for the board with the shared libraries it loads, unpacked by
/// tests/boards/setup.sh (AArch64 only): every file at its board path (`/usr/bin/perf`,
/// `/lib/<gnu>/libc.so.6`, ...), ready for [`boot`].
pub fn debian_perf(board: Board) -> Files {
    let dir = cache_dir().join(format!("perf-{}", board.debian_arch()));
    assert!(
        dir.join(".done").exists(),
        "no Debian perf at {}: {}",
        dir.display(),
        setup_hint()
    );
    let mut files = Files::new();
    let mut todo = vec![dir.clone()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                todo.push(path);
            } else if path.parent() != Some(dir.as_path()) {
                let guest = Path::new("/").join(path.strip_prefix(&dir).expect("under dir"));
                let data =
                    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                files.push((guest.to_string_lossy().into_owned(), data, 0o755));
            }
        }
    }
    files
}

/// The static `rec` built for the board, from `dist/<triple>/rec` (or `$CROSSPROF_DIST`).
pub fn board_rec(board: Board) -> PathBuf {
    let dist = std::env::var_os("CROSSPROF_DIST")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("dist"));
    let p = dist.join(board.triple()).join("rec");
    assert!(p.exists(), "{} is missing: {}", p.display(), setup_hint());
    p
}

fn run_ok(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}; {}", setup_hint()));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A program cross-built for a board.
#[derive(Debug, Clone)]
pub struct BoardProgram {
    /// Its path on the board.
    pub guest: String,
    /// The stripped copy that goes onto the board.
    pub stripped: PathBuf,
    /// The unstripped copy, also placed in the sysroot at the guest path.
    pub unstripped: PathBuf,
    /// The source file.
    pub source: PathBuf,
}

/// A debug sysroot for one board run: the unstripped programs at their board paths and the
/// board's C library, as a Yocto or Buildroot sysroot holds them.
#[derive(Debug, Clone)]
pub struct Sysroot {
    /// The directory.
    pub dir: PathBuf,
}

impl Sysroot {
    /// An empty sysroot under the scratch directory, with the board's C library.
    pub fn new(board: Board, tag: &str) -> Sysroot {
        let dir = scratch().join(tag).join("sysroot");
        let lib = Path::new("/usr").join(board.gnu()).join("lib");
        for (from, to) in [
            (
                board.dynamic_linker().to_string(),
                format!("lib/{}", board.dynamic_linker()),
            ),
            (
                "libc.so.6".to_string(),
                format!("lib/{}/libc.so.6", board.gnu()),
            ),
        ] {
            let dest = dir.join(to);
            std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
            std::fs::copy(lib.join(&from), &dest)
                .unwrap_or_else(|e| panic!("{}: {e}; {}", lib.join(&from).display(), setup_hint()));
        }
        Sysroot { dir }
    }

    /// Cross-builds a C program from `tests/programs/` for the board, as `/usr/bin/<name>`,
    /// with debug info and a build-id, plus `flags`; the stripped copy is for the board.
    pub fn build_c(&self, board: Board, src: &str, name: &str, flags: &[&str]) -> BoardProgram {
        self.build(board, src, name, |source, unstripped| {
            run_ok(
                Command::new(board.gcc())
                    .args(["-g", "-Wl,--build-id"])
                    .args(flags)
                    .arg(source)
                    .arg("-o")
                    .arg(unstripped),
            )
        })
    }

    /// Builds `src` from `tests/programs/` with `compile(source, output)` into the sysroot as
    /// `/usr/bin/<name>` and strips a copy for the board.
    fn build(
        &self,
        board: Board,
        src: &str,
        name: &str,
        compile: impl FnOnce(&Path, &Path),
    ) -> BoardProgram {
        let source = crate::source(src);
        let guest = format!("/usr/bin/{name}");
        let unstripped = self.dir.join(guest.trim_start_matches('/'));
        std::fs::create_dir_all(unstripped.parent().expect("parent")).expect("mkdir");
        compile(&source, &unstripped);
        let stripped = self.dir.parent().expect("tag dir").join(name);
        run_ok(
            Command::new(board.tool("strip"))
                .arg("-o")
                .arg(&stripped)
                .arg(&unstripped),
        );
        BoardProgram {
            guest,
            stripped,
            unstripped,
            source,
        }
    }
}

impl Sysroot {
    /// Cross-builds a Go program from `tests/programs/` for the board (AArch64 only: the
    /// 32-bit ARM unwinder does not read Go's tables), as `/usr/bin/<name>`; the stripped copy
    /// is for the board. Go binaries are static: they need nothing else on the board.
    pub fn build_go(&self, board: Board, src: &str, name: &str) -> BoardProgram {
        assert_eq!(
            board,
            Board::Aarch64,
            "Go programs are built for the AArch64 board"
        );
        self.build(board, src, name, |source, unstripped| {
            crate::golang::go_build(source, unstripped, "arm64")
        })
    }

    /// Cross-builds the stack-unwinding ground truth: `deep_lib.c` as `/usr/lib/libdeep.so`
    /// and `deep.c` as `/usr/bin/deep` linked against it, with `flags` (the compiler's defaults
    /// when empty: no frame pointers). Returns (library, executable).
    pub fn build_deep(&self, board: Board, flags: &[&str]) -> (BoardProgram, BoardProgram) {
        let lib_guest = "/usr/lib/libdeep.so".to_string();
        let lib = self.dir.join(lib_guest.trim_start_matches('/'));
        std::fs::create_dir_all(lib.parent().expect("parent")).expect("mkdir");
        run_ok(
            Command::new(board.gcc())
                .args(["-g", "-Wl,--build-id", "-shared", "-fPIC"])
                .args(flags)
                .arg(crate::source("deep_lib.c"))
                .arg("-o")
                .arg(&lib),
        );
        let exe_guest = "/usr/bin/deep".to_string();
        let exe = self.dir.join(exe_guest.trim_start_matches('/'));
        std::fs::create_dir_all(exe.parent().expect("parent")).expect("mkdir");
        run_ok(
            Command::new(board.gcc())
                .args(["-g", "-Wl,--build-id"])
                .args(flags)
                .arg(crate::source("deep.c"))
                .arg(format!("-L{}", lib.parent().expect("parent").display()))
                .args(["-ldeep", "-Wl,-rpath,/usr/lib"])
                .arg("-o")
                .arg(&exe),
        );
        let strip = |unstripped: &Path, name: &str| {
            let stripped = self.dir.parent().expect("tag dir").join(name);
            run_ok(
                Command::new(board.tool("strip"))
                    .arg("-o")
                    .arg(&stripped)
                    .arg(unstripped),
            );
            stripped
        };
        let lib_p = BoardProgram {
            stripped: strip(&lib, "libdeep.so"),
            guest: lib_guest,
            unstripped: lib,
            source: crate::source("deep_lib.c"),
        };
        let exe_p = BoardProgram {
            stripped: strip(&exe, "deep"),
            guest: exe_guest,
            unstripped: exe,
            source: crate::source("deep.c"),
        };
        (lib_p, exe_p)
    }
}

/// Files for the initramfs: (path on the board, contents, mode).
pub type Files = Vec<(String, Vec<u8>, u32)>;

fn newc_entry(out: &mut Vec<u8>, ino: u32, name: &str, mode: u32, data: &[u8]) {
    let fields = [
        ino,
        mode,
        0,
        0,
        1,
        0,
        data.len() as u32,
        0,
        0,
        0,
        0,
        name.len() as u32 + 1,
        0,
    ];
    out.extend_from_slice(b"070701");
    for f in fields {
        out.extend_from_slice(format!("{f:08x}").as_bytes());
    }
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    while out.len() & 3 != 0 {
        out.push(0);
    }
    out.extend_from_slice(data);
    while out.len() & 3 != 0 {
        out.push(0);
    }
}

/// A `newc` cpio archive (the initramfs format) of `files`, with their parent directories.
pub fn cpio(files: &Files) -> Vec<u8> {
    let mut dirs = std::collections::BTreeSet::new();
    for d in ["dev", "proc", "sys", "out"] {
        dirs.insert(d.to_string());
    }
    for (path, _, _) in files {
        let mut p = Path::new(path.trim_start_matches('/'));
        while let Some(parent) = p.parent() {
            if parent.as_os_str().is_empty() {
                break;
            }
            dirs.insert(parent.to_string_lossy().into_owned());
            p = parent;
        }
    }
    let mut out = Vec::new();
    let mut ino = 1;
    for d in &dirs {
        newc_entry(&mut out, ino, d, 0o040755, &[]);
        ino += 1;
    }
    for (path, data, mode) in files {
        newc_entry(
            &mut out,
            ino,
            path.trim_start_matches('/'),
            0o100000 | mode,
            data,
        );
        ino += 1;
    }
    newc_entry(&mut out, 0, "TRAILER!!!", 0, &[]);
    out
}

/// What came back from a boot.
#[derive(Debug)]
pub struct BoardRun {
    /// Files the jobs left in /out (`job<N>.log` holds command N's output).
    pub files: HashMap<String, Vec<u8>>,
    /// Wait status of each command.
    pub statuses: Vec<i32>,
    /// The serial console.
    pub console: String,
    /// Wall time of the boot, power-off included.
    pub elapsed: Duration,
}

impl BoardRun {
    /// Fails, with each job's output and the console, unless all `jobs` commands exited 0.
    pub fn assert_ok(&self, jobs: usize) {
        let logs: Vec<String> = (0..jobs)
            .map(|i| String::from_utf8_lossy(self.file(&format!("job{i}.log"))).into_owned())
            .collect();
        assert_eq!(
            self.statuses,
            vec![0; jobs],
            "rec failed on the board: {}\n{}",
            logs.join("\n"),
            self.console
        );
    }

    /// Writes the file `/out/<name>` to the test's scratch directory `tag` and returns its
    /// path there.
    pub fn save(&self, name: &str, tag: &str) -> PathBuf {
        let out = scratch().join(tag).join(name);
        std::fs::write(&out, self.file(name)).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
        out
    }

    /// A file from /out, or a panic that shows the console.
    pub fn file(&self, name: &str) -> &[u8] {
        self.files.get(name).unwrap_or_else(|| {
            panic!(
                "the board left no /out/{name}; files {:?}, statuses {:?}, console:\n{}",
                self.files.keys().collect::<Vec<_>>(),
                self.statuses,
                self.console
            )
        })
    }
}

/// Files by name and each command's wait status, as the board's init wrote them.
type Results = (HashMap<String, Vec<u8>>, Vec<i32>);

fn parse_disk(disk: &[u8]) -> Option<Results> {
    let mut rest = disk.strip_prefix(b"CROSSPROF-OUT\n")?;
    let mut files = HashMap::new();
    let mut statuses = Vec::new();
    loop {
        let nl = rest.iter().position(|&b| b == b'\n')?;
        let line = std::str::from_utf8(&rest[..nl]).ok()?.to_string();
        rest = &rest[nl + 1..];
        let words: Vec<&str> = line.split(' ').collect();
        match words.as_slice() {
            ["FILE", name, size] => {
                let size: usize = size.parse().ok()?;
                files.insert(name.to_string(), rest.get(..size)?.to_vec());
                rest = &rest[size..];
            }
            ["STATUS", _, s] => statuses.push(s.parse().ok()?),
            ["END"] => return Some((files, statuses)),
            _ => return None,
        }
    }
}

/// Boots `board` with `files` (plus the init, the rec binary at `/rec`, the virtio modules and
/// the cross toolchain's C library where `files` has none) and runs `jobs` one after the
/// other, in `/`; returns what they left in /out.
pub fn boot(board: Board, tag: &str, mut files: Files, jobs: &[Vec<String>]) -> BoardRun {
    let kernels = cache_dir().join(board.debian_arch());
    let kernel = kernels.join("vmlinuz");
    assert!(
        kernel.exists(),
        "no kernel at {}: {}",
        kernel.display(),
        setup_hint()
    );
    let dir = scratch().join(tag);
    std::fs::create_dir_all(&dir).expect("mkdir");

    let init = dir.join("init");
    run_ok(
        Command::new(board.gcc())
            .args(["-static", "-O2", "-o"])
            .arg(&init)
            .arg(root().join("tests/boards/init.c")),
    );
    let read = |p: &Path| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    files.push(("/init".into(), read(&init), 0o755));
    files.push(("/rec".into(), read(&board_rec(board)), 0o755));
    for m in ["virtio_mmio", "virtio_blk"] {
        files.push((
            format!("/lib/modules/{m}.ko"),
            read(&kernels.join(format!("{m}.ko"))),
            0o644,
        ));
    }
    // The cross toolchain's C library, unless the test brought its own.
    let lib = Path::new("/usr").join(board.gnu()).join("lib");
    for (guest, name) in [
        (
            format!("/lib/{}", board.dynamic_linker()),
            board.dynamic_linker(),
        ),
        (format!("/lib/{}/libc.so.6", board.gnu()), "libc.so.6"),
    ] {
        if !files.iter().any(|(p, _, _)| *p == guest) {
            files.push((guest, read(&lib.join(name)), 0o755));
        }
    }
    let job: Vec<String> = jobs.join(&["--next--".to_string()][..]);
    files.push(("/job".into(), (job.join("\n") + "\n").into_bytes(), 0o644));
    let initrd = dir.join("initrd.cpio");
    std::fs::write(&initrd, cpio(&files)).expect("write initramfs");

    let disk = dir.join("out.img");
    let f = std::fs::File::create(&disk).expect("create disk");
    f.set_len(64 << 20).expect("size disk");
    drop(f);

    let (qemu, cpu) = board.qemu();
    let console = dir.join("console.log");
    let started = Instant::now();
    let mut child = Command::new(qemu)
        .args(["-M", "virt", "-cpu", cpu, "-smp", "1", "-m", "512"])
        .args(["-nographic", "-no-reboot", "-nic", "none", "-kernel"])
        .arg(&kernel)
        .arg("-initrd")
        .arg(&initrd)
        .args([
            "-append",
            "console=ttyAMA0 rdinit=/init panic=-1 quiet",
            "-drive",
        ])
        .arg(format!(
            "file={},format=raw,if=none,id=d0",
            disk.to_str().expect("utf-8 path")
        ))
        .args(["-device", "virtio-blk-device,drive=d0"])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&console).expect("console log"))
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {qemu}: {e}; {}", setup_hint()));
    // A hung guest must not hang the suite.
    let limit = Duration::from_secs(180);
    loop {
        if child.try_wait().expect("wait qemu").is_some() {
            break;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{qemu} did not power off within {limit:?}; console:\n{}",
                std::fs::read_to_string(&console).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let elapsed = started.elapsed();
    let console =
        String::from_utf8_lossy(&std::fs::read(&console).unwrap_or_default()).replace("\r\n", "\n");
    let (files, statuses) = parse_disk(&read(&disk))
        .unwrap_or_else(|| panic!("the board wrote no results; console:\n{console}"));
    eprintln!("{tag}: {qemu} boot and run took {elapsed:.1?}");
    BoardRun {
        files,
        statuses,
        console,
        elapsed,
    }
}

/// The callers printed for `leaf` in the text report's call chains (`leaf <- caller <- ...`),
/// each as printed (`main (cpu_split.c:30)`).
pub fn callers(report_text: &str, leaf: &str) -> Vec<String> {
    let chain = report_text.lines().find_map(|l| {
        let (pct, rest) = l.split_once('%')?;
        pct.trim().parse::<f64>().ok()?;
        let rest = rest.trim_start();
        (rest.starts_with(leaf) && rest.contains(" <- ")).then_some(rest)
    });
    chain.map_or_else(Vec::new, |c| {
        c.split(" <- ").skip(1).map(str::to_string).collect()
    })
}
