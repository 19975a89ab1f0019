//! The lazy per-unit lookup gives the frames a whole-file addr2line context gives, on real
//! debug files: this machine's libc (libc6-dbg: 4,000+ units, compressed sections, DWARF 5)
//! and programs gcc builds here with and without LTO.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use object::{Object, ObjectSymbol, SymbolKind};

use super::{refers_across_units, LazyUnits};
use crate::backing::Backing;
use crate::dwarf::{frames_lazy, frames_of, sections};
use crate::elf_info::ElfInfo;

/// This machine's libc debug file (libc6-dbg, installed by scripts/setup.sh).
fn libc_debug_file() -> PathBuf {
    let image = Backing::map(Path::new("/lib/x86_64-linux-gnu/libc.so.6")).expect("libc");
    let file = object::File::parse(image.as_slice()).expect("libc is ELF");
    let id = ElfInfo::of(&file).build_id.expect("libc has a build-id");
    let hex = crate::lookup::hex(&id);
    let path = PathBuf::from(format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        &hex[..2],
        &hex[2..]
    ));
    assert!(
        path.is_file(),
        "{} missing: install libc6-dbg (scripts/setup.sh)",
        path.display()
    );
    path
}

/// Every function symbol's start, middle and last byte, plus the byte after its end.
fn probes(file: &object::File<'_>) -> Vec<u64> {
    let mut out = Vec::new();
    for s in file.symbols().filter(|s| s.kind() == SymbolKind::Text) {
        let (a, n) = (s.address(), s.size());
        out.extend([a, a + n / 2, a + n.saturating_sub(1), a + n]);
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Looks every probe up both ways; returns how many found frames and the units parsed.
fn compare(path: &Path) -> (usize, usize, usize) {
    let backing: Arc<Backing> = Backing::map(path).expect("map");
    let file = object::File::parse(backing.as_slice()).expect("ELF");
    let whole = sections(&file, &backing, path).unwrap().expect("DWARF");
    let whole = addr2line::Context::from_dwarf(whole).expect("whole-file context");
    let dwarf = sections(&file, &backing, path).unwrap().expect("DWARF");
    assert!(!refers_across_units(&dwarf), "{}", path.display());
    let mut units = dwarf.units();
    let mut total = 0;
    while units.next().unwrap().is_some() {
        total += 1;
    }
    let mut lazy = LazyUnits::index(dwarf).expect("index");
    let mut found = 0;
    for probe in probes(&file) {
        let expected = frames_of(&whole, probe, &mut false).unwrap_or_default();
        assert_eq!(
            frames_lazy(&mut lazy, probe, &mut false),
            expected,
            "at {probe:#x}"
        );
        found += usize::from(!expected.is_empty());
    }
    (found, lazy.parsed(), total)
}

#[test]
fn libc_frames_equal_a_whole_file_context() {
    let (found, parsed, total) = compare(&libc_debug_file());
    assert!(found > 10_000, "only {found} probes had frames");
    assert!(total > 1000, "{total} units");
    assert!(parsed > 100 && parsed <= total, "{parsed} of {total}");
}

#[test]
fn one_lookup_parses_one_unit() {
    let path = libc_debug_file();
    let backing: Arc<Backing> = Backing::map(&path).expect("map");
    let file = object::File::parse(backing.as_slice()).expect("ELF");
    let malloc = file
        .symbols()
        .find(|s| s.name() == Ok("__libc_malloc"))
        .expect("__libc_malloc in libc's symbol table")
        .address();
    let dwarf = sections(&file, &backing, &path).unwrap().expect("DWARF");
    let mut lazy = LazyUnits::index(dwarf).expect("index");
    let frames = frames_lazy(&mut lazy, malloc, &mut false);
    let outer = frames.last().expect("frames at malloc");
    assert_eq!(outer.function.as_deref(), Some("__GI___libc_malloc"));
    assert!(outer
        .file
        .as_deref()
        .is_some_and(|f| f.ends_with("malloc.c")));
    assert_eq!(lazy.parsed(), 1);
}

/// Builds `a.c` and `b.c` (one calls the other) with `flags`.
fn two_units(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    std::fs::write(
        dir.join("a.c"),
        "int helper(int x);\nint main(int argc, char **argv) { return helper(argc) + 1; }\n",
    )
    .unwrap();
    std::fs::write(dir.join("b.c"), "int helper(int x) { return x * 3; }\n").unwrap();
    let out = dir.join(name);
    let status = Command::new("gcc")
        .args(flags)
        .arg(dir.join("a.c"))
        .arg(dir.join("b.c"))
        .arg("-o")
        .arg(&out)
        .status()
        .expect("gcc");
    assert!(status.success());
    out
}

#[test]
fn lto_references_cross_units_and_keep_a_whole_file_context() {
    let dir = tempfile::tempdir().unwrap();
    let lto = two_units(dir.path(), "lto", &["-O2", "-g", "-flto"]);
    let plain = two_units(dir.path(), "plain", &["-O2", "-g"]);
    let across = |path: &Path| {
        let backing = Backing::map(path).unwrap();
        let file = object::File::parse(backing.as_slice()).unwrap();
        refers_across_units(&sections(&file, &backing, path).unwrap().unwrap())
    };
    assert!(
        across(&lto),
        "gcc -flto refers to DIEs with DW_FORM_ref_addr"
    );
    assert!(!across(&plain));
    let (found, _, _) = compare(&plain);
    assert!(found >= 2, "main and helper");
}
