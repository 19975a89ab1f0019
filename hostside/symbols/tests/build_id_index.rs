//! The build-id index (issue 16): a module is found by build-id wherever it lies in a sysroot,
//! a debug dir or a build tree; symbolic links never lead the walk out of the tree; the cache
//! answers a second run without opening files and is invalidated by size and mtime; hostile
//! files (truncated ELF, garbage with the ELF magic, FIFOs) are skipped without hanging or
//! panicking; a file with another build-id is never returned.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use crossprof_symbols::{BuildIdIndex, IndexOptions, Lookup, MatchKind, Module, Origin};
use support::*;

const BOARD: &str = "/scratch/run/hot";

fn opts(cache: &Path) -> IndexOptions {
    IndexOptions {
        cache_dir: Some(cache.to_path_buf()),
        progress: false,
    }
}

fn lookup(sysroot: Option<&Path>, search: &[&Path]) -> Lookup {
    Lookup {
        sysroot: sysroot.map(Path::to_path_buf),
        debug_dirs: vec![],
        search_dirs: search.iter().map(|p| p.to_path_buf()).collect(),
    }
}

/// `hot_a` resolves in `module` at its address in `reference`.
fn names_hot_a(module: &Module, reference: &Path) -> bool {
    let (addr, _) = symbol(reference, "hot_a", false);
    let offset = file_offset(reference, addr);
    module
        .offset_to_svma(offset)
        .map(|svma| module.frames(svma))
        .and_then(|f| f.last().and_then(|f| f.function.clone()))
        .as_deref()
        == Some("hot_a")
}

#[test]
fn a_binary_at_another_path_of_the_sysroot_is_found_by_build_id() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sysroot");
    let bin = in_root(&root, "/usr/bin/hot");
    compile("hot.c", &bin, &["-O2", "-g"]);
    let id = build_id(&bin);
    let l = lookup(Some(&root), &[]);
    // Not at the board path: the conventional lookup misses it.
    assert_eq!(l.locate(BOARD, &id).match_kind, MatchKind::Missing);
    let index = BuildIdIndex::build(&l.index_roots(), &opts(&dir.path().join("cache")));
    let found = l
        .locate_by_index(&index, BOARD, &id)
        .expect("found by build-id");
    assert_eq!(found.match_kind, MatchKind::BuildId);
    assert_eq!(found.origin, Origin::Index);
    assert_eq!(found.image.as_deref(), Some(bin.as_path()));
    assert_eq!(found.debug_file.as_deref(), Some(bin.as_path()));
    assert!(names_hot_a(&Module::load(&found).unwrap(), &bin));
}

#[test]
fn a_build_tree_with_split_debug_gives_image_and_debug_file() {
    // A build tree holding the stripped binary and its --only-keep-debug file with no
    // debuglink, in unrelated directories: the image gives the layout, the debug file DWARF.
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("build");
    let built = dir.path().join("hot.full");
    compile("hot.c", &built, &["-O2", "-g"]);
    let id = build_id(&built);
    let image = tree.join("out/bin/hot");
    let debug = tree.join("symbols/deep/er/hot.dbg");
    std::fs::create_dir_all(debug.parent().unwrap()).unwrap();
    only_keep_debug(&built, &debug);
    strip(&built, &image, None);
    let l = lookup(None, &[&tree]);
    let index = BuildIdIndex::build(&l.index_roots(), &opts(&dir.path().join("cache")));
    let found = l.locate_by_index(&index, BOARD, &id).expect("found");
    assert_eq!(found.image.as_deref(), Some(image.as_path()));
    assert_eq!(found.debug_file.as_deref(), Some(debug.as_path()));
    assert!(names_hot_a(&Module::load(&found).unwrap(), &built));
}

#[test]
fn another_build_id_is_never_returned() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    compile("hot.c", &tree.join("a/hot"), &["-O2", "-g"]);
    compile("hot.c", &tree.join("b/hot"), &["-O1", "-g"]);
    let a = build_id(&tree.join("a/hot"));
    let b = build_id(&tree.join("b/hot"));
    assert_ne!(a, b);
    let l = lookup(None, &[&tree]);
    let index = BuildIdIndex::build(&l.index_roots(), &opts(&dir.path().join("cache")));
    let mut unknown = a.clone();
    unknown[0] ^= 0xff;
    assert!(l.locate_by_index(&index, BOARD, &unknown).is_none());
    assert!(l.locate_by_index(&index, BOARD, &[]).is_none());
    let found = l.locate_by_index(&index, BOARD, &b).unwrap();
    assert_eq!(found.image.as_deref(), Some(tree.join("b/hot").as_path()));

    // The cache says a/hot has build-id `a`; replace it by the other binary padded to the same
    // size and give it back its mtime (a stale cache): the candidate is reopened and refused.
    let a_path = tree.join("a/hot");
    let stamp = dir.path().join("stamp");
    std::fs::write(&stamp, b"").unwrap();
    sh(Command::new("touch").arg("-r").arg(&a_path).arg(&stamp));
    let mut other = std::fs::read(tree.join("b/hot")).unwrap();
    other.resize(std::fs::metadata(&a_path).unwrap().len() as usize, 0);
    std::fs::write(&a_path, &other).unwrap();
    sh(Command::new("touch").arg("-r").arg(&stamp).arg(&a_path));
    let stale = BuildIdIndex::build(&l.index_roots(), &opts(&dir.path().join("cache")));
    assert_eq!(stale.stats().read, 0, "the cache answered for every file");
    assert_eq!(
        stale.files_with(&a).len(),
        1,
        "the cache still claims a/hot is `a`"
    );
    assert!(l.locate_by_index(&stale, BOARD, &a).is_none());
}

#[test]
fn symlinks_out_of_the_tree_are_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let outside = dir.path().join("outside");
    compile("hot.c", &outside.join("hot"), &["-O2", "-g"]);
    let id = build_id(&outside.join("hot"));
    std::fs::create_dir_all(&tree).unwrap();
    std::os::unix::fs::symlink(&outside, tree.join("dir-link")).unwrap();
    std::os::unix::fs::symlink(outside.join("hot"), tree.join("file-link")).unwrap();
    std::os::unix::fs::symlink(&tree, tree.join("loop")).unwrap();
    let index = BuildIdIndex::build(
        std::slice::from_ref(&tree),
        &opts(&dir.path().join("cache")),
    );
    assert!(index.files_with(&id).is_empty());
    assert_eq!(index.stats().symlinks, 3);
    assert_eq!(index.stats().files, 0);
}

#[test]
fn hostile_files_are_skipped_and_the_cache_answers_the_second_run() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    let bin = tree.join("bin/hot");
    compile("hot.c", &bin, &["-O2", "-g"]);
    let id = build_id(&bin);
    let full = std::fs::read(&bin).unwrap();
    // Truncated ELF at several lengths, ELF magic followed by garbage, a header claiming
    // enormous section tables, an empty file and a FIFO (opening it would block forever).
    for cut in [4usize, 16, 52, 64, 200, full.len() / 2] {
        std::fs::write(tree.join(format!("cut-{cut}")), &full[..cut]).unwrap();
    }
    let mut garbage = b"\x7fELF".to_vec();
    garbage.extend((0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
    std::fs::write(tree.join("garbage"), &garbage).unwrap();
    let mut huge = full[..64].to_vec();
    huge[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes()); // e_shoff
    huge[0x3c..0x3e].copy_from_slice(&u16::MAX.to_le_bytes()); // e_shnum
    std::fs::write(tree.join("huge-tables"), &huge).unwrap();
    std::fs::write(tree.join("empty"), b"").unwrap();
    sh(Command::new("mkfifo").arg(tree.join("fifo")));

    let cache = dir.path().join("cache");
    let first = BuildIdIndex::build(std::slice::from_ref(&tree), &opts(&cache));
    let regular = 10; // bin/hot, six cuts, garbage, huge-tables, empty
    assert_eq!(first.stats().files, regular);
    assert_eq!(first.stats().read, regular);
    assert_eq!(
        first.stats().elf_files,
        1,
        "only bin/hot has a readable build-id"
    );
    assert_eq!(first.files_with(&id).len(), 1);

    let second = BuildIdIndex::build(std::slice::from_ref(&tree), &opts(&cache));
    assert_eq!(second.stats().read, 0);
    assert_eq!(second.stats().from_cache, regular);
    assert_eq!(second.files_with(&id), first.files_with(&id));

    // An ELF file relinked in place (same directory entries) is `stat`ed, seen changed and
    // read again; the others still come from the cache.
    let other = dir.path().join("other");
    compile("hot.c", &other, &["-O1", "-g"]);
    let other_id = build_id(&other);
    std::fs::write(&bin, std::fs::read(&other).unwrap()).unwrap();
    let third = BuildIdIndex::build(std::slice::from_ref(&tree), &opts(&cache));
    assert_eq!(third.stats().read, 1);
    assert_eq!(third.stats().from_cache, regular - 1);
    assert!(third.files_with(&id).is_empty());
    assert_eq!(third.files_with(&other_id).len(), 1);

    // A new file changes its directory: the directory is listed again, only the new file is
    // read (the others' sizes and mtimes are unchanged).
    std::fs::write(tree.join("new-file"), vec![7u8; 100]).unwrap();
    let fourth = BuildIdIndex::build(std::slice::from_ref(&tree), &opts(&cache));
    assert_eq!(fourth.stats().read, 1);
    assert_eq!(fourth.stats().files, regular + 1);

    // Without a cache every file is read.
    let none = IndexOptions {
        cache_dir: None,
        progress: false,
    };
    assert_eq!(
        BuildIdIndex::build(std::slice::from_ref(&tree), &none)
            .stats()
            .read,
        regular + 1
    );
}

#[test]
fn missing_roots_and_duplicates_are_harmless() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    compile("hot.c", &tree.join("hot"), &["-O2", "-g"]);
    let id = build_id(&tree.join("hot"));
    let roots: Vec<PathBuf> = vec![
        dir.path().join("does-not-exist"),
        tree.clone(),
        tree.join("."),
        tree.join("hot"), // a file, not a directory
    ];
    let index = BuildIdIndex::build(&roots, &opts(&dir.path().join("cache")));
    assert_eq!(index.files_with(&id).len(), 1);
}
