//! Lookup and symbolization against programs compiled here with gcc/g++ and split, stripped and
//! linked with binutils, the way Yocto and Buildroot sysroots hold them. Ground truth comes from
//! binutils (readelf, nm) and from `// LINE:` markers in the sources.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crossprof_symbols::{Located, Lookup, MatchKind, Module, SymFrame};
use support::*;
use tempfile::TempDir;

const BOARD: &str = "/usr/bin/hot";

/// `hot.c` built into a fresh directory.
struct Hot {
    dir: TempDir,
    unstripped: PathBuf,
    id: Vec<u8>,
}

fn hot(flags: &[&str]) -> Hot {
    let dir = tempfile::tempdir().unwrap();
    let unstripped = dir.path().join("build/hot");
    compile("hot.c", &unstripped, flags);
    let id = build_id(&unstripped);
    Hot {
        dir,
        unstripped,
        id,
    }
}

impl Hot {
    fn root(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn sysroot(root: &Path) -> Lookup {
    Lookup {
        sysroot: Some(root.to_path_buf()),
        debug_dirs: vec![],
        search_dirs: vec![],
    }
}

/// Every address of `hot_a` resolves to `hot_a` in hot.c, the marker line among them, and the
/// file offset of its entry maps back to its address.
fn assert_resolves_hot_a(module: &Module, reference: &Path) {
    let (addr, size) = symbol(reference, "hot_a", false);
    let mut lines = BTreeSet::new();
    for a in addr..addr + size {
        let frames = module.frames(a);
        let outer = frames
            .last()
            .unwrap_or_else(|| panic!("no frames at {a:#x}"));
        assert_eq!(
            outer.function.as_deref(),
            Some("hot_a"),
            "at {a:#x}: {frames:?}"
        );
        assert!(
            outer.file.as_deref().is_some_and(|f| f.ends_with("hot.c")),
            "{frames:?}"
        );
        lines.extend(frames[0].line);
    }
    assert!(
        lines.contains(&marker_line("hot.c", "hot_a")),
        "lines {lines:?}"
    );
    assert_eq!(
        module.offset_to_svma(file_offset(reference, addr)),
        Some(addr)
    );
    assert!(module.has_dwarf());
}

#[test]
fn unstripped_binary_at_its_path_matches_by_build_id() {
    let h = hot(&["-O2", "-g"]);
    let root = h.root("sysroot");
    let bin = in_root(&root, BOARD);
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(&h.unstripped, &bin).unwrap();
    let located = sysroot(&root).locate(BOARD, &h.id);
    assert_eq!(located.match_kind, MatchKind::BuildId);
    assert_eq!(located.image.as_deref(), Some(bin.as_path()));
    assert_eq!(located.debug_file.as_deref(), Some(bin.as_path()));
    let module = Module::load(&located).unwrap();
    assert_resolves_hot_a(&module, &h.unstripped);
    assert!(module.warnings().is_empty(), "{:?}", module.warnings());
    assert!(module.stats().dwarf > 0 && module.stats().unresolved == 0);
}

#[test]
fn build_id_tree_alone_symbolizes_like_the_binary() {
    // Only usr/lib/debug/.build-id/ab/cdef….debug: its program headers have zeroed offsets, so
    // offsets are mapped through the rebuilt layout, which must equal the binary's.
    let h = hot(&["-O2", "-g"]);
    let root = h.root("sysroot");
    let dbg = build_id_path(&root.join("usr/lib/debug"), &h.id);
    only_keep_debug(&h.unstripped, &dbg);
    let located = sysroot(&root).locate(BOARD, &h.id);
    assert_eq!(
        (
            located.match_kind,
            located.image.as_deref(),
            located.debug_file.as_deref()
        ),
        (MatchKind::BuildId, None, Some(dbg.as_path()))
    );
    let module = Module::load(&located).unwrap();
    assert_resolves_hot_a(&module, &h.unstripped);
    for (offset, vaddr, filesz) in load_segments(&h.unstripped) {
        for off in [offset, offset + filesz / 2, offset + filesz - 1] {
            assert_eq!(
                module.offset_to_svma(off),
                Some(vaddr + (off - offset)),
                "offset {off:#x}"
            );
        }
    }
}

#[test]
fn build_id_tree_in_a_debug_dir() {
    let h = hot(&["-O2", "-g"]);
    let root = h.root("sysroot");
    let bin = in_root(&root, BOARD);
    strip(&h.unstripped, &bin, None);
    for (i, sub) in ["", "usr/lib/debug"].into_iter().enumerate() {
        let debug_dir = h.root(&format!("debug{i}"));
        let dbg = build_id_path(&debug_dir.join(sub), &h.id);
        only_keep_debug(&h.unstripped, &dbg);
        let lookup = Lookup {
            sysroot: Some(root.clone()),
            debug_dirs: vec![h.root("elsewhere"), debug_dir],
            search_dirs: vec![],
        };
        let located = lookup.locate(BOARD, &h.id);
        assert_eq!(located.match_kind, MatchKind::BuildId);
        assert_eq!(located.image.as_deref(), Some(bin.as_path()));
        assert_eq!(located.debug_file.as_deref(), Some(dbg.as_path()));
        assert_resolves_hot_a(&Module::load(&located).unwrap(), &h.unstripped);
    }
}

#[test]
fn debuglink_next_to_the_binary_in_dot_debug_and_under_usr_lib_debug() {
    let h = hot(&["-O2", "-g"]);
    let layouts = [
        ("next", "usr/bin/hot.debug"),
        ("dotdebug", "usr/bin/.debug/hot.debug"),
        ("usrlibdebug", "usr/lib/debug/usr/bin/hot.debug"),
    ];
    for (tag, rel) in layouts {
        let root = h.root(tag);
        let dbg = root.join(rel);
        only_keep_debug(&h.unstripped, &dbg);
        let bin = in_root(&root, BOARD);
        strip(&h.unstripped, &bin, Some(&dbg));
        let located = sysroot(&root).locate(BOARD, &h.id);
        assert_eq!(located.match_kind, MatchKind::BuildId, "{tag}");
        assert_eq!(located.image.as_deref(), Some(bin.as_path()), "{tag}");
        assert_eq!(located.debug_file.as_deref(), Some(dbg.as_path()), "{tag}");
        assert_resolves_hot_a(&Module::load(&located).unwrap(), &h.unstripped);
    }
}

#[test]
fn debuglink_into_a_separate_debug_rootfs() {
    // Yocto's IMAGE_GEN_DEBUGFS: the stripped rootfs as sysroot, the debug rootfs (same layout,
    // debug files in .debug/ folders) as a debug dir.
    let h = hot(&["-O2", "-g"]);
    let (rootfs, debugfs) = (h.root("rootfs"), h.root("rootfs-dbg"));
    let dbg = debugfs.join("usr/bin/.debug/hot.debug");
    only_keep_debug(&h.unstripped, &dbg);
    strip(&h.unstripped, &in_root(&rootfs, BOARD), Some(&dbg));
    let lookup = Lookup {
        sysroot: Some(rootfs),
        debug_dirs: vec![debugfs],
        search_dirs: vec![],
    };
    let located = lookup.locate(BOARD, &h.id);
    assert_eq!(
        (located.match_kind, located.debug_file.as_deref()),
        (MatchKind::BuildId, Some(dbg.as_path()))
    );
    assert_resolves_hot_a(&Module::load(&located).unwrap(), &h.unstripped);
}

#[test]
fn debuglink_with_a_wrong_crc_is_not_used() {
    let h = hot(&["-O2", "-g"]);
    let root = h.root("sysroot");
    let dbg = root.join("usr/bin/.debug/hot.debug");
    only_keep_debug(&h.unstripped, &dbg);
    let bin = in_root(&root, BOARD);
    strip(&h.unstripped, &bin, Some(&dbg));
    // Same name, other contents: the CRC no longer matches.
    let mut bytes = std::fs::read(&dbg).unwrap();
    bytes.push(0);
    std::fs::write(&dbg, bytes).unwrap();
    let located = sysroot(&root).locate(BOARD, &h.id);
    assert_eq!(located.match_kind, MatchKind::BuildId);
    assert_eq!(
        located.debug_file.as_deref(),
        Some(bin.as_path()),
        "falls back to the stripped image"
    );
}

#[test]
fn a_rebuilt_binary_is_a_mismatch_and_never_used() {
    let h = hot(&["-O2", "-g"]);
    let root = h.root("sysroot");
    let bin = in_root(&root, BOARD);
    compile("hot.c", &bin, &["-O1", "-g"]);
    assert_ne!(build_id(&bin), h.id);
    let located = sysroot(&root).locate(BOARD, &h.id);
    assert_eq!(
        (
            located.match_kind,
            located.image.as_deref(),
            located.debug_file.as_deref()
        ),
        (MatchKind::Mismatch, None, None)
    );
    assert!(Module::load(&located).is_err());

    // A debug file with the recorded build-id still symbolizes; the rebuilt binary stays unused.
    let dbg = build_id_path(&root.join("usr/lib/debug"), &h.id);
    only_keep_debug(&h.unstripped, &dbg);
    let located = sysroot(&root).locate(BOARD, &h.id);
    assert_eq!(
        (
            located.match_kind,
            located.image.as_deref(),
            located.debug_file.as_deref()
        ),
        (MatchKind::BuildId, None, Some(dbg.as_path()))
    );
    assert_resolves_hot_a(&Module::load(&located).unwrap(), &h.unstripped);
}

#[test]
fn without_a_recorded_build_id_the_path_is_trusted_and_said_so() {
    let h = hot(&["-O2", "-g"]);
    let root = h.root("sysroot");
    let bin = in_root(&root, BOARD);
    let dbg = build_id_path(&root.join("usr/lib/debug"), &h.id);
    only_keep_debug(&h.unstripped, &dbg);
    strip(&h.unstripped, &bin, None);
    let located = sysroot(&root).locate(BOARD, &[]);
    // The image's own build-id still finds its debug file.
    assert_eq!(
        (
            located.match_kind,
            located.image.as_deref(),
            located.debug_file.as_deref()
        ),
        (
            MatchKind::PathOnly,
            Some(bin.as_path()),
            Some(dbg.as_path())
        )
    );
    let missing = sysroot(&root).locate("/usr/bin/absent", &[0xab; 20]);
    assert_eq!(
        (missing.match_kind, missing.image, missing.debug_file),
        (MatchKind::Missing, None, None)
    );
    // Found by build-id alone, wherever the module was on the board.
    let elsewhere = sysroot(&root).locate("/opt/moved/hot", &h.id);
    assert_eq!(
        (elsewhere.match_kind, elsewhere.debug_file.as_deref()),
        (MatchKind::BuildId, Some(dbg.as_path()))
    );
    let missing = sysroot(&root).locate("/usr/bin/absent", &[]);
    assert_eq!(missing.match_kind, MatchKind::Missing);
}

#[test]
fn without_a_sysroot_modules_are_found_at_their_paths() {
    let h = hot(&["-O2", "-g"]);
    let path = h.unstripped.to_str().unwrap();
    let located = Lookup::default().locate(path, &h.id);
    assert_eq!(located.match_kind, MatchKind::BuildId);
    assert_eq!(located.debug_file.as_deref(), Some(h.unstripped.as_path()));
    assert_eq!(
        Lookup::default().locate(path, &[1, 2, 3, 4]).match_kind,
        MatchKind::Mismatch
    );
}

#[test]
fn an_inlined_cpp_helper_is_its_own_frame() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("usr/bin/inline");
    compile("inline.cpp", &bin, &["-O2", "-g"]);
    let located = Lookup {
        sysroot: Some(dir.path().into()),
        debug_dirs: vec![],
        search_dirs: vec![],
    }
    .locate("/usr/bin/inline", &build_id(&bin));
    assert_eq!(located.match_kind, MatchKind::BuildId);
    let module = Module::load(&located).unwrap();
    let (addr, size) = symbol(&bin, "_ZN4work6Engine5hot_aEl", false);
    let (mix, hot_a) = (
        marker_line("inline.cpp", "mix"),
        marker_line("inline.cpp", "hot_a"),
    );
    let inlined: Vec<Vec<SymFrame>> = (addr..addr + size)
        .map(|a| module.frames(a))
        .filter(|f| f.len() >= 2)
        .collect();
    assert!(!inlined.is_empty(), "no inlined frames in hot_a");
    let at_marker = inlined
        .iter()
        .find(|f| f[0].line == Some(mix))
        .unwrap_or_else(|| panic!("no address on the mix marker line: {inlined:?}"));
    assert_eq!(at_marker.len(), 2, "{at_marker:?}");
    // GCC gives the internal-linkage helper no linkage name, only DW_AT_name (llvm-symbolizer
    // shows the same).
    assert_eq!(at_marker[0].function.as_deref(), Some("mix"));
    assert!(at_marker[0]
        .file
        .as_deref()
        .is_some_and(|f| f.ends_with("inline.cpp")));
    assert_eq!(
        at_marker[1].function.as_deref(),
        Some("work::Engine::hot_a(long)")
    );
    assert_eq!(at_marker[1].line, Some(hot_a));
}

#[test]
fn symtab_names_functions_of_a_binary_built_without_debug_info() {
    let h = hot(&["-O2"]);
    let located = Lookup::default().locate(h.unstripped.to_str().unwrap(), &h.id);
    assert_eq!(located.debug_file.as_deref(), Some(h.unstripped.as_path()));
    let module = Module::load(&located).unwrap();
    assert!(!module.has_dwarf());
    for name in ["hot_a", "hot_b"] {
        let (addr, size) = symbol(&h.unstripped, name, false);
        let want = vec![SymFrame {
            function: Some(name.into()),
            file: None,
            line: None,
        }];
        assert_eq!(module.frames(addr), want);
        assert_eq!(module.frames(addr + size - 1), want);
    }
    assert!(module.stats().symbol_table >= 4);
}

#[test]
fn dynsym_names_exported_functions_of_a_stripped_shared_library() {
    let dir = tempfile::tempdir().unwrap();
    let built = dir.path().join("build/libhot.so");
    compile("lib.c", &built, &["-O2", "-g", "-fPIC", "-shared"]);
    let lib = dir.path().join("usr/lib/libhot.so");
    strip(&built, &lib, None);
    let located = Lookup {
        sysroot: Some(dir.path().into()),
        debug_dirs: vec![],
        search_dirs: vec![],
    }
    .locate("/usr/lib/libhot.so", &build_id(&built));
    assert_eq!(
        (located.match_kind, located.debug_file.as_deref()),
        (MatchKind::BuildId, Some(lib.as_path()))
    );
    let module = Module::load(&located).unwrap();
    assert!(!module.has_dwarf());
    for name in ["lib_hot", "lib_cold"] {
        let (addr, _) = symbol(&lib, name, true);
        assert_eq!(
            module
                .frames(addr + 1)
                .last()
                .and_then(|f| f.function.clone())
                .as_deref(),
            Some(name)
        );
        assert_eq!(module.offset_to_svma(file_offset(&lib, addr)), Some(addr));
    }
}

#[test]
fn minidebuginfo_names_static_functions_of_a_stripped_binary() {
    // As Fedora and Yocto's PACKAGE_MINIDEBUGINFO do: an xz-compressed ELF holding only the
    // function symbols .dynsym lacks, added as .gnu_debugdata.
    let h = hot(&["-O2", "-g"]);
    let mini = h.root("mini");
    sh(Command::new("objcopy")
        .args(["--only-keep-debug", "--strip-debug"])
        .arg(&h.unstripped)
        .arg(&mini));
    sh(Command::new("xz").arg("-k").arg(&mini));
    let root = h.root("sysroot");
    let bin = in_root(&root, BOARD);
    strip(&h.unstripped, &bin, None);
    sh(Command::new("objcopy")
        .arg(format!(
            "--add-section=.gnu_debugdata={}.xz",
            mini.display()
        ))
        .arg(&bin));
    let located = sysroot(&root).locate(BOARD, &h.id);
    assert_eq!(located.debug_file.as_deref(), Some(bin.as_path()));
    let module = Module::load(&located).unwrap();
    assert!(module.warnings().is_empty(), "{:?}", module.warnings());
    let (addr, _) = symbol(&h.unstripped, "hot_b", false);
    assert_eq!(
        module
            .frames(addr)
            .last()
            .and_then(|f| f.function.clone())
            .as_deref(),
        Some("hot_b")
    );
    assert_eq!(module.offset_to_svma(file_offset(&bin, addr)), Some(addr));
}

#[test]
fn compressed_debug_sections_are_read() {
    let h = hot(&["-O2", "-g"]);
    for kind in ["zlib", "zstd"] {
        let bin = h.root(&format!("{kind}/hot"));
        std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
        let ok = Command::new("objcopy")
            .arg(format!("--compress-debug-sections={kind}"))
            .arg(&h.unstripped)
            .arg(&bin)
            .status()
            .unwrap()
            .success();
        if !ok && kind == "zstd" {
            eprintln!("objcopy cannot write zstd sections here; zstd not tested");
            continue;
        }
        assert!(ok, "objcopy --compress-debug-sections={kind}");
        let located = Located {
            match_kind: MatchKind::BuildId,
            image: Some(bin.clone()),
            debug_file: Some(bin.clone()),
            origin: crossprof_symbols::Origin::Path,
            image_origin: crossprof_symbols::Origin::Path,
        };
        assert_resolves_hot_a(&Module::load(&located).unwrap(), &h.unstripped);
    }
}

#[test]
fn one_module_serves_many_threads() {
    let h = hot(&["-O2", "-g"]);
    let located = Lookup::default().locate(h.unstripped.to_str().unwrap(), &h.id);
    let module = Module::load(&located).unwrap();
    let (addr, size) = symbol(&h.unstripped, "hot_a", false);
    let expected: Vec<_> = (addr..addr + size).map(|a| module.frames(a)).collect();
    let fresh = Module::load(&located).unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let got: Vec<_> = (addr..addr + size).map(|a| fresh.frames(a)).collect();
                assert_eq!(got, expected);
            });
        }
    });
}
