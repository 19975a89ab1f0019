//! A build-id index of whole directory trees: every ELF file under a sysroot, a debug dir or a
//! developer's build tree, by GNU build-id, so that a module is found wherever it lies and not
//! only at the board's path.
//!
//! This exists because real sysroots rarely mirror the board exactly: a program run from a
//! scratch directory on the board has its unstripped copy under `usr/bin/` of the sysroot, or
//! in a build tree that is no sysroot at all. perf solves the same problem with its build-id
//! cache; hotspot with `--extraLibPaths`.
//!
//! Building reads only ELF headers and notes (through a memory map, so a huge file costs no
//! heap), in parallel across cores, with a progress bar on a terminal. What each file held is
//! cached between runs under the user's cache directory, keyed by path, size and modification
//! time, so a second run only walks the tree and `stat`s its files. Symbolic links are never
//! followed: a link cannot lead the index out of the directory it indexes (the file a link
//! inside the tree points to is indexed at its own path). The index is a hint: [`crate::Lookup`]
//! reopens every candidate and checks its build-id before using it.

use std::collections::HashMap;
use std::fs::File;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;

use crate::backing::Backing;
use crate::elf_info::{self, ElfInfo};
use crate::index_cache::{Cache, CachedDir, CachedFile, Others};

/// The most files one root may contribute; past it the walk stops (and says so in the stats),
/// so that pointing the index at `/` by mistake costs bounded memory and time.
pub const MAX_FILES_PER_ROOT: usize = 2_000_000;

/// Files shorter than this cannot hold an ELF header with a build-id note.
const MIN_ELF_SIZE: u64 = 64;

/// How to build an index.
#[derive(Clone, Debug)]
pub struct IndexOptions {
    /// Where the per-root caches live; `None` disables caching.
    pub cache_dir: Option<PathBuf>,
    /// Draw a progress bar on standard error.
    pub progress: bool,
}

impl IndexOptions {
    /// Caches in `$XDG_CACHE_HOME/crossprof/build-id-index` (or the platform's equivalent),
    /// progress bar only when standard error is a terminal.
    pub fn for_user() -> IndexOptions {
        IndexOptions {
            cache_dir: dirs::cache_dir().map(|d| d.join("crossprof").join("build-id-index")),
            progress: std::io::stderr().is_terminal(),
        }
    }
}

/// One ELF file the index found for a build-id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexedFile {
    /// Where it is.
    pub path: PathBuf,
    /// It has DWARF (`.debug_info`).
    pub has_dwarf: bool,
    /// It holds loadable code (a binary or library, not an `--only-keep-debug` file).
    pub is_image: bool,
}

/// What building the index did, for reports and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Regular files seen.
    pub files: u64,
    /// ELF files with a build-id among them.
    pub elf_files: u64,
    /// Files whose facts came from the cache (not opened).
    pub from_cache: u64,
    /// Files opened and read.
    pub read: u64,
    /// Symbolic links not followed.
    pub symlinks: u64,
    /// Entries that could not be read (permissions, races).
    pub errors: u64,
    /// Roots whose walk stopped at [`MAX_FILES_PER_ROOT`].
    pub truncated_roots: u64,
}

/// ELF files by build-id. Build it once per run with [`BuildIdIndex::build`].
#[derive(Debug, Default)]
pub struct BuildIdIndex {
    by_id: HashMap<Vec<u8>, Vec<IndexedFile>>,
    stats: IndexStats,
}

/// What one file held, as read or as cached.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    /// The build-id, when the file is ELF and has one.
    pub build_id: Option<Vec<u8>>,
    pub has_dwarf: bool,
    pub is_image: bool,
}

impl BuildIdIndex {
    /// Indexes every regular file under each of `roots` (missing roots are skipped). Never
    /// fails: unreadable entries are counted in [`IndexStats::errors`] and a cache that cannot
    /// be read or written only costs time.
    pub fn build(roots: &[PathBuf], opts: &IndexOptions) -> BuildIdIndex {
        let mut index = BuildIdIndex::default();
        let mut seen: Vec<PathBuf> = Vec::new();
        for root in roots {
            let Ok(root) = std::fs::canonicalize(root) else {
                continue;
            };
            if seen.contains(&root) || !root.is_dir() {
                continue;
            }
            index.add_root(&root, opts);
            seen.push(root);
        }
        for files in index.by_id.values_mut() {
            files.sort_by(|a, b| a.path.cmp(&b.path));
            files.dedup();
        }
        index
    }

    /// The files carrying build-id `id`, sorted by path.
    pub fn files_with(&self, id: &[u8]) -> &[IndexedFile] {
        self.by_id.get(id).map(Vec::as_slice).unwrap_or(&[])
    }

    /// What building did.
    pub fn stats(&self) -> IndexStats {
        self.stats
    }

    fn add_root(&mut self, root: &Path, opts: &IndexOptions) {
        let cache = opts
            .cache_dir
            .as_deref()
            .map(|d| Cache::load(d, root))
            .unwrap_or_default();
        let bar = progress_bar(opts.progress, root);
        let mut fresh: Vec<Pending> = Vec::new();
        let mut changed = false;
        // Breadth first, one level at a time: the directories of a level are listed in
        // parallel, then all their files are checked in parallel (one huge directory such as
        // usr/lib spreads over every core too).
        let mut level = vec![String::new()];
        let mut files_seen = 0usize;
        while !level.is_empty() {
            let mut listed: Vec<Listing> = level
                .par_iter()
                .map(|rel| list_dir(root, rel, &cache))
                .collect::<Vec<_>>()
                .into_iter()
                .filter_map(|l| {
                    self.stats.errors += u64::from(l.is_none());
                    l
                })
                .collect();
            let mut next = Vec::new();
            let mut jobs: Vec<(usize, Option<CachedFile>, String)> = Vec::new();
            for (d, l) in listed.iter_mut().enumerate() {
                self.stats.symlinks += l.symlinks;
                self.stats.files += l.kept_non_elf as u64;
                self.stats.from_cache += l.kept_non_elf as u64;
                files_seen += l.kept_non_elf;
                changed |= l.kept.is_none();
                next.extend(l.dirs.iter().map(|name| join_rel(&l.rel, name)));
                for (name, cached) in std::mem::take(&mut l.files) {
                    if files_seen >= MAX_FILES_PER_ROOT {
                        self.stats.truncated_roots += 1;
                        next.clear();
                        break;
                    }
                    files_seen += 1;
                    jobs.push((d, cached, join_rel(&l.rel, &name)));
                }
            }
            if let Some(bar) = &bar {
                bar.inc_length(jobs.len() as u64);
            }
            let scanned: Vec<Option<(CachedFile, bool)>> = jobs
                .par_iter()
                .map(|(_, cached, rel)| {
                    let r = scan(root, rel, cached.as_ref());
                    if let Some(bar) = &bar {
                        bar.inc(1);
                    }
                    r
                })
                .collect();
            let mut dirs: Vec<Pending> = listed
                .into_iter()
                .map(|l| Pending {
                    dir: CachedDir {
                        rel: l.rel,
                        mtime_ns: l.mtime_ns,
                        dirs: l.dirs,
                        files: Vec::new(),
                        others: Others::default(),
                        cacheable: l.cacheable,
                    },
                    kept: l.kept,
                })
                .collect();
            for ((d, _, rel), s) in jobs.iter().zip(scanned) {
                let Some((file, from_cache)) = s else {
                    self.stats.errors += 1;
                    continue;
                };
                self.stats.files += 1;
                if from_cache {
                    self.stats.from_cache += 1;
                } else {
                    self.stats.read += 1;
                    changed = true;
                }
                if let Some(id) = &file.facts.build_id {
                    self.stats.elf_files += 1;
                    self.by_id.entry(id.clone()).or_default().push(IndexedFile {
                        path: root.join(rel),
                        has_dwarf: file.facts.has_dwarf,
                        is_image: file.facts.is_image,
                    });
                }
                let dir = &mut dirs[*d].dir;
                if file.facts.build_id.is_some() {
                    dir.files.push(file);
                } else {
                    dir.others.push(&file.name, file.size, file.mtime_ns);
                }
            }
            fresh.extend(dirs);
            level = next;
        }
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        changed |= fresh.len() != cache.len();
        if let (Some(dir), true) = (&opts.cache_dir, changed) {
            let dirs = fresh.into_iter().map(Pending::finish).collect();
            // Best effort: a read-only cache directory only makes the next run slower.
            let _ = Cache::store(dir, root, dirs);
        }
    }
}

/// A directory walked this run, before it is written to the cache.
struct Pending<'c> {
    dir: CachedDir,
    /// The unchanged cached directory whose non-ELF files were trusted without a `stat`.
    kept: Option<&'c CachedDir>,
}

impl Pending<'_> {
    /// The directory with the trusted files put back (only when the cache is rewritten).
    fn finish(self) -> CachedDir {
        let mut dir = self.dir;
        if let Some(kept) = self.kept {
            dir.others = kept.others.clone();
        }
        dir.files.sort_by(|a, b| a.name.cmp(&b.name));
        dir
    }
}

/// One directory's entries: from the cache when the directory's mtime is unchanged (no entry
/// was added, removed or renamed since), else from `readdir`.
struct Listing<'c> {
    rel: String,
    mtime_ns: u64,
    /// Subdirectory names (never symbolic links).
    dirs: Vec<String>,
    /// Regular files to check, with their cached facts when the cache had the directory. For
    /// an unchanged directory only its ELF files: the others are trusted.
    files: Vec<(String, Option<CachedFile>)>,
    /// The cached directory, when it is unchanged and reused.
    kept: Option<&'c CachedDir>,
    /// Non-ELF files of the unchanged directory, trusted without a `stat`.
    kept_non_elf: usize,
    symlinks: u64,
    /// All names were UTF-8 (others cannot be cached: the directory is listed every run).
    cacheable: bool,
}

fn list_dir<'c>(root: &Path, rel: &str, cache: &'c Cache) -> Option<Listing<'c>> {
    let path = root.join(rel);
    let meta = std::fs::symlink_metadata(&path).ok()?;
    if !meta.is_dir() {
        return None;
    }
    let mtime_ns = mtime_ns(&meta);
    let old = cache.dir(rel);
    if let Some(c) = old.filter(|c| c.mtime_ns == mtime_ns && mtime_ns != 0) {
        return Some(Listing {
            rel: rel.to_string(),
            mtime_ns,
            dirs: c.dirs.clone(),
            files: c
                .files
                .iter()
                .map(|f| (f.name.clone(), Some(f.clone())))
                .collect(),
            kept: Some(c),
            kept_non_elf: c.others.len(),
            symlinks: 0,
            cacheable: true,
        });
    }
    let old_others: HashMap<&str, (u64, u64)> = old
        .map(|c| c.others.iter().map(|(n, s, m)| (n, (s, m))).collect())
        .unwrap_or_default();
    let mut l = Listing {
        rel: rel.to_string(),
        mtime_ns,
        dirs: Vec::new(),
        files: Vec::new(),
        kept: None,
        kept_non_elf: 0,
        symlinks: 0,
        cacheable: true,
    };
    for entry in std::fs::read_dir(&path).ok()? {
        let Ok(entry) = entry else { continue };
        // The type comes from readdir (d_type) and never follows a link.
        let Ok(ty) = entry.file_type() else { continue };
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            l.cacheable = false;
            continue;
        };
        if ty.is_symlink() {
            l.symlinks += 1;
        } else if ty.is_dir() {
            l.dirs.push(name);
        } else if ty.is_file() {
            // The old entry still saves reading the file if its size and mtime are unchanged.
            let cached = old.and_then(|c| c.file(&name)).cloned().or_else(|| {
                let (size, mtime_ns) = *old_others.get(name.as_str())?;
                Some(CachedFile {
                    name: name.clone(),
                    size,
                    mtime_ns,
                    facts: Facts::default(),
                })
            });
            l.files.push((name, cached));
        }
    }
    l.dirs.sort();
    l.files.sort_by(|a, b| a.0.cmp(&b.0));
    Some(l)
}

/// A file's facts: reused from the cache when its size and mtime are unchanged, else read.
/// (In an unchanged directory, non-ELF files never get here: they are trusted.) The bool says
/// whether the cache answered.
fn scan(root: &Path, rel: &str, cached: Option<&CachedFile>) -> Option<(CachedFile, bool)> {
    let path = root.join(rel);
    let meta = std::fs::symlink_metadata(&path).ok()?;
    let size = meta.len();
    let mtime_ns = mtime_ns(&meta);
    if let Some(c) = cached.filter(|c| c.size == size && c.mtime_ns == mtime_ns && mtime_ns != 0) {
        return Some((c.clone(), true));
    }
    let facts = if meta.is_file() && size >= MIN_ELF_SIZE {
        read_facts(&path)
    } else {
        Facts::default()
    };
    Some((
        CachedFile {
            name: rel.rsplit('/').next().unwrap_or(rel).to_string(),
            size,
            mtime_ns,
            facts,
        },
        false,
    ))
}

fn mtime_ns(meta: &std::fs::Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64)
}

fn join_rel(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// Reads the magic, then (for ELF) maps the file and reads its notes and section headers.
/// Anything unreadable or malformed is "not an indexed ELF file".
pub(crate) fn read_facts(path: &Path) -> Facts {
    let mut magic = [0u8; 4];
    let is_elf = File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF";
    if !is_elf {
        return Facts::default();
    }
    let Ok(backing) = Backing::map(path) else {
        return Facts::default();
    };
    let Ok(file) = object::File::parse(backing.as_slice()) else {
        return Facts::default();
    };
    let info = ElfInfo::of(&file);
    Facts {
        build_id: info.build_id,
        has_dwarf: info.has_dwarf,
        is_image: elf_info::is_image(&file),
    }
}

/// A bar on standard error, or none (even a hidden indicatif bar reads the clock per update).
fn progress_bar(enabled: bool, root: &Path) -> Option<ProgressBar> {
    if !enabled {
        return None;
    }
    let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("indexing {msg} {bar:30} {pos}/{len} files") {
        bar.set_style(style);
    }
    bar.set_message(root.display().to_string());
    Some(bar)
}
