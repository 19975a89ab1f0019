//! Sysroots and vDSO copies are untrusted: garbage, truncated and corrupted ELF files, files that
//! are not regular files, and compressed sections that lie about their size must give errors or
//! fallbacks, never a panic, a hang or an unbounded allocation.

mod support;

use std::path::Path;
use std::process::Command;

use crossprof_symbols::{Error, Located, Lookup, MatchKind, Module};
use support::*;

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Loads `data` as an in-memory image and, if it loads, exercises every lookup.
fn poke(data: Vec<u8>, addrs: std::ops::Range<u64>) {
    if let Ok(m) = Module::from_bytes(data) {
        for a in addrs.clone() {
            let _ = m.frames(a);
            let _ = m.offset_to_svma(a);
        }
        let _ = m.frames(0);
        let _ = m.frames(u64::MAX);
        let _ = m.offset_to_svma(u64::MAX);
    }
}

fn built(dir: &Path) -> (Vec<u8>, std::ops::Range<u64>) {
    let bin = dir.join("hot");
    compile("hot.c", &bin, &["-O2", "-g"]);
    let (addr, size) = symbol(&bin, "hot_a", false);
    (std::fs::read(&bin).unwrap(), addr..addr + size)
}

#[test]
fn garbage_bytes_are_rejected() {
    let mut rng = Rng(0x5eed);
    for len in [0, 1, 4, 16, 52, 64, 100, 4096] {
        assert!(Module::from_bytes(rng.bytes(len)).is_err());
        let mut elfish = b"\x7fELF\x02\x01\x01\0".to_vec();
        elfish.extend(rng.bytes(len));
        poke(elfish, 0..16);
    }
}

#[test]
fn truncated_and_corrupted_binaries_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let (data, range) = built(dir.path());
    for len in (0..data.len()).step_by(97) {
        poke(data[..len].to_vec(), range.clone());
    }
    let mut rng = Rng(42);
    for _ in 0..1500 {
        let mut d = data.clone();
        for _ in 0..1 + rng.below(4) {
            let i = rng.below(d.len());
            d[i] = rng.next() as u8;
        }
        poke(d, range.clone());
    }
}

#[test]
fn corrupted_compressed_debug_sections_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let (_, range) = built(dir.path());
    let z = dir.path().join("hot.z");
    sh(Command::new("objcopy")
        .arg("--compress-debug-sections=zlib")
        .arg(dir.path().join("hot"))
        .arg(&z));
    let data = std::fs::read(&z).unwrap();
    let (start, size) = section_range(&z, ".debug_info");
    let mut rng = Rng(7);
    for _ in 0..500 {
        let mut d = data.clone();
        let i = start + rng.below(size);
        d[i] = rng.next() as u8;
        poke(d, range.clone());
    }
}

/// File offset and size of a section, from `readelf -S`.
fn section_range(path: &Path, name: &str) -> (usize, usize) {
    let text = stdout(Command::new("readelf").arg("-SW").arg(path));
    let line = text
        .lines()
        .find(|l| l.split_whitespace().any(|w| w == name))
        .expect("section");
    let f: Vec<&str> = line.split(']').nth(1).unwrap().split_whitespace().collect();
    (
        usize::from_str_radix(f[3], 16).unwrap(),
        usize::from_str_radix(f[4], 16).unwrap(),
    )
}

#[test]
fn compressed_sections_that_lie_about_their_size_fall_back_to_symbols() {
    let dir = tempfile::tempdir().unwrap();
    let (_, range) = built(dir.path());
    let z = dir.path().join("hot.z");
    sh(Command::new("objcopy")
        .arg("--compress-debug-sections=zlib")
        .arg(dir.path().join("hot"))
        .arg(&z));
    let data = std::fs::read(&z).unwrap();
    let (start, _) = section_range(&z, ".debug_info");
    // Elf64_Chdr: ch_type u32, ch_reserved u32, ch_size u64 (little-endian on x86_64).
    for claimed in [1u64 << 40, 16] {
        let mut d = data.clone();
        d[start + 8..start + 16].copy_from_slice(&claimed.to_le_bytes());
        let m = Module::from_bytes(d).expect("still an ELF file");
        assert!(!m.has_dwarf(), "claimed size {claimed}");
        assert!(
            m.warnings().iter().any(|w| w.contains(".debug_info")),
            "{:?}",
            m.warnings()
        );
        let name = m
            .frames(range.start)
            .last()
            .and_then(|f| f.function.clone());
        assert_eq!(
            name.as_deref(),
            Some("hot_a"),
            "the symbol table still names it"
        );
    }
}

#[test]
fn minidebuginfo_bomb_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, range) = built(dir.path());
    let xz = dir.path().join("zeros.xz");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("head -c 70M /dev/zero | xz -1 > {}", xz.display()))
        .status()
        .unwrap();
    assert!(out.success());
    let bin = dir.path().join("bomb");
    sh(Command::new("objcopy")
        .arg(format!("--add-section=.gnu_debugdata={}", xz.display()))
        .arg(dir.path().join("hot"))
        .arg(&bin));
    let m = Module::from_bytes(std::fs::read(&bin).unwrap()).unwrap();
    assert!(
        m.warnings().iter().any(|w| w.contains("limit")),
        "{:?}",
        m.warnings()
    );
    assert!(m
        .frames(range.start)
        .last()
        .is_some_and(|f| f.function.as_deref() == Some("hot_a")));
}

#[test]
fn lookup_survives_whatever_the_sysroot_holds() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let lookup = Lookup {
        sysroot: Some(root.to_path_buf()),
        debug_dirs: vec![root.join("dbg")],
        search_dirs: vec![],
    };
    let id = [0x12u8, 0x34, 0x56, 0x78];
    let mut rng = Rng(99);
    std::fs::create_dir_all(root.join("usr/lib/dir.so")).unwrap();
    std::fs::write(root.join("usr/lib/garbage.so"), rng.bytes(5000)).unwrap();
    std::fs::write(root.join("usr/lib/empty.so"), b"").unwrap();
    std::fs::write(
        root.join("usr/lib/elfish.so"),
        [b"\x7fELF\x02\x01\x01\0".as_slice(), &rng.bytes(200)].concat(),
    )
    .unwrap();
    std::os::unix::fs::symlink("loop.so", root.join("usr/lib/loop.so")).unwrap();
    sh(Command::new("mkfifo").arg(root.join("usr/lib/fifo.so")));
    // A .build-id entry that is a FIFO: opening it would block forever.
    let fifo_dbg = build_id_path(&root.join("usr/lib/debug"), &id);
    std::fs::create_dir_all(fifo_dbg.parent().unwrap()).unwrap();
    sh(Command::new("mkfifo").arg(&fifo_dbg));
    for name in [
        "dir.so",
        "garbage.so",
        "empty.so",
        "elfish.so",
        "loop.so",
        "fifo.so",
        "absent.so",
    ] {
        let path = format!("/usr/lib/{name}");
        for build_id in [&id[..], &[]] {
            let l = lookup.locate(&path, build_id);
            assert!(
                matches!(l.match_kind, MatchKind::Missing | MatchKind::Mismatch),
                "{name}: {l:?}"
            );
            assert_eq!(l.debug_file, None, "{name}");
        }
    }
    for path in [
        "",
        "/",
        "../../etc/passwd",
        "/usr/../../../etc/passwd",
        "[vdso]",
        "//anon",
    ] {
        assert_eq!(
            lookup.locate(path, &id).match_kind,
            MatchKind::Missing,
            "{path}"
        );
    }
}

#[test]
fn loading_unusable_files_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.debug");
    std::fs::write(&garbage, Rng(5).bytes(1000)).unwrap();
    let fifo = dir.path().join("fifo.debug");
    sh(Command::new("mkfifo").arg(&fifo));
    for path in [
        garbage,
        fifo,
        dir.path().to_path_buf(),
        dir.path().join("absent"),
    ] {
        let located = Located {
            match_kind: MatchKind::BuildId,
            image: None,
            debug_file: Some(path.clone()),
            origin: crossprof_symbols::Origin::Path,
            image_origin: crossprof_symbols::Origin::Path,
        };
        let err = Module::load(&located)
            .err()
            .unwrap_or_else(|| panic!("{} loaded", path.display()));
        assert!(err.to_string().contains(path.to_str().unwrap()), "{err}");
    }
    assert!(matches!(
        Module::load(&Located::missing()),
        Err(Error::NoDebugFile)
    ));
}

/// Found by the `jitdump` fuzz target: a move record whose new address lies below the old
/// one by more than the lines' addresses, which a wrapping shift turned into huge addresses
/// ahead of small ones. Lines must stay sorted: `Code::line` searches them.
#[test]
fn jitdump_crash_80d4e2a9_move_keeps_lines_sorted() {
    let data = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jitdump-crash-80d4e2a9"),
    )
    .expect("the checked-in input");
    let dump = crossprof_symbols::jitdump::parse(&data);
    assert!(!dump.code.is_empty());
    for c in &dump.code {
        assert!(c.lines.windows(2).all(|w| w[0].addr <= w[1].addr));
    }
}
