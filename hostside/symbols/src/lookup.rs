//! Finding a recorded module's files in a debug sysroot: the binary at its board path (verified
//! by GNU build-id), the `.build-id/ab/cdef….debug` tree, `.gnu_debuglink` targets (CRC checked)
//! and the image itself as a last resort, following the rules in DESIGN.md.
//!
//! Lookup only reads ELF headers, notes and (for debuglink candidates) computes a CRC; it never
//! parses DWARF, so locating every module of a recording is cheap. A file whose build-id differs
//! from the recorded one is never returned: symbolizing with it would give confident, wrong
//! names.

use std::path::{Component, Path, PathBuf};

use crate::backing::Backing;
use crate::elf_info::{DebugLink, ElfInfo};
use crate::index::{BuildIdIndex, IndexedFile};

/// Where to look for modules' files. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Lookup {
    /// The board's filesystem with unstripped binaries or debug files; `None` means this
    /// machine's own `/` (profiling on the machine that runs hostside).
    pub sysroot: Option<PathBuf>,
    /// Extra directories searched for `.build-id/ab/cdef….debug` files (directly and under
    /// `usr/lib/debug/`) and for debuglink targets (under the module's board directory, its
    /// `.debug/` subdirectory, and `usr/lib/debug/<board directory>/`).
    pub debug_dirs: Vec<PathBuf>,
    /// Directory trees (a developer's build tree) whose ELF files are found by build-id
    /// wherever they lie, through the [`BuildIdIndex`]; the sysroot and the debug dirs are
    /// indexed the same way when a module is not at its path.
    pub search_dirs: Vec<PathBuf>,
}

/// What [`Lookup::locate`] found for one module.
#[derive(Clone, Debug)]
pub struct Located {
    /// How the module was matched.
    pub match_kind: MatchKind,
    /// The binary at the module's path, when its build-id matched (or could not be checked
    /// because none was recorded). Its program headers map file offsets to addresses.
    pub image: Option<PathBuf>,
    /// The file symbols come from: a separate debug file when one was found, else the image.
    pub debug_file: Option<PathBuf>,
    /// How the symbol file was found.
    pub origin: Origin,
    /// How the image was found: a board whose C library lives at `/usr/lib/...` (merged /usr)
    /// and a sysroot that has it at `/lib/...` give the debug file by the `.build-id` layout and
    /// the image, which holds the unwind tables, only by build-id elsewhere.
    pub image_origin: Origin,
}

/// How a module's files were found, for the report's `modules` section.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Origin {
    /// At the board path or the conventional debug layouts (`.build-id`, debuglink).
    #[default]
    Path,
    /// By build-id at another place of the sysroot, a debug dir or a search dir.
    Index,
    /// Downloaded from a debuginfod server.
    Debuginfod,
}

impl Origin {
    /// The name used in reports: `path`, `index` or `debuginfod`.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Path => "path",
            Origin::Index => "index",
            Origin::Debuginfod => "debuginfod",
        }
    }
}

impl Located {
    /// Nothing usable was found.
    pub fn missing() -> Located {
        Located {
            match_kind: MatchKind::Missing,
            image: None,
            debug_file: None,
            origin: Origin::Path,
            image_origin: Origin::Path,
        }
    }

    /// True when symbols come from an image without DWARF (symbol tables only): a debug file
    /// found elsewhere would add lines and inlines. Reads the file's section headers.
    pub fn lacks_dwarf(&self) -> bool {
        match &self.debug_file {
            Some(d) if !self.is_unusable() => {
                Candidate::open(d.clone()).is_some_and(|c| !c.info.has_dwarf)
            }
            _ => false,
        }
    }

    /// True when nothing usable was found (missing or mismatched), so that another source may
    /// be tried.
    pub fn is_unusable(&self) -> bool {
        matches!(self.match_kind, MatchKind::Missing | MatchKind::Mismatch)
            || self.debug_file.is_none()
    }
}

/// How a module was matched to files on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchKind {
    /// The file's build-id equals the recorded one.
    BuildId,
    /// No build-id was recorded; the file was found by path and cannot be verified.
    PathOnly,
    /// No file was found.
    Missing,
    /// A file exists at the path but its build-id differs, and no debug file with the recorded
    /// build-id was found. Nothing is symbolized from it.
    Mismatch,
}

impl MatchKind {
    /// The name used in reports: `build-id`, `path-only`, `missing` or `mismatch`.
    pub fn as_str(self) -> &'static str {
        match self {
            MatchKind::BuildId => "build-id",
            MatchKind::PathOnly => "path-only",
            MatchKind::Missing => "missing",
            MatchKind::Mismatch => "mismatch",
        }
    }
}

/// A candidate file that parsed as ELF.
struct Candidate {
    path: PathBuf,
    info: ElfInfo,
}

impl Candidate {
    fn open(path: PathBuf) -> Option<Candidate> {
        let backing = Backing::map(&path).ok()?;
        let file = object::File::parse(backing.as_slice()).ok()?;
        let info = ElfInfo::of(&file);
        Some(Candidate { path, info })
    }
}

/// The files `index` lists with build-id `build_id` that pass `wanted` (what the index
/// recorded of them), each reopened and kept only if it still carries that build-id: the
/// index may be stale, and a wrong file must never be used. Lazy: files are opened as the
/// caller asks for them.
fn verified_by_index<'i>(
    index: &'i BuildIdIndex,
    build_id: &'i [u8],
    wanted: impl Fn(&IndexedFile) -> bool + 'i,
) -> impl Iterator<Item = (Candidate, &'i IndexedFile)> + 'i {
    index
        .files_with(build_id)
        .iter()
        .filter(move |f| wanted(f))
        .filter_map(move |f| {
            let c = Candidate::open(f.path.clone())?;
            (c.info.build_id.as_deref() == Some(build_id)).then_some((c, f))
        })
}

impl Lookup {
    /// Finds the image and debug file of the module recorded at board path `path` with GNU
    /// build-id `build_id` (empty when the board's file had none). Never fails: problems are
    /// reported as [`MatchKind::Missing`] or [`MatchKind::Mismatch`]. Costs a few `stat`s and
    /// header reads, plus a CRC pass over each debuglink candidate that exists.
    ///
    /// Symbols are taken from, in order: the image itself when it has DWARF; a `.build-id`
    /// debug file; the image's debuglink target; else the image (its `.symtab`, MiniDebugInfo or
    /// `.dynsym`). A separate debug file is preferred to an image with only a `.symtab` because
    /// it brings lines and inlines.
    pub fn locate(&self, path: &str, build_id: &[u8]) -> Located {
        let root = self.sysroot.clone().unwrap_or_else(|| PathBuf::from("/"));
        let Some(rel) = board_relative(path) else {
            return Located::missing();
        };
        let wanted = (!build_id.is_empty()).then_some(build_id);

        // The file at the board path, and whether it is the recorded one (something that is not
        // a readable ELF file counts as a different file).
        let candidate = root.join(rel);
        let exists = candidate.is_file();
        let (image, mismatched) = match (Candidate::open(candidate), wanted) {
            (Some(c), Some(id)) if c.info.build_id.as_deref() == Some(id) => (Some(c), false),
            (Some(c), None) => (Some(c), false),
            (_, Some(_)) => (None, exists),
            (None, None) => (None, false),
        };
        // The build-id debug files must carry: the recorded one, else (path-only) the image's.
        let id = wanted
            .map(<[u8]>::to_vec)
            .or_else(|| image.as_ref().and_then(|c| c.info.build_id.clone()));
        let kind = if wanted.is_some() {
            MatchKind::BuildId
        } else {
            MatchKind::PathOnly
        };

        let debug = match &image {
            Some(c) if c.info.has_dwarf => Some(c.path.clone()),
            _ => id
                .as_deref()
                .and_then(|id| self.by_build_id(&root, id))
                .or_else(|| {
                    image
                        .as_ref()
                        .and_then(|c| self.by_debuglink(&root, rel, c, id.as_deref()))
                }),
        };
        match (debug, image) {
            (Some(debug), image) => Located {
                match_kind: kind,
                image: image.map(|c| c.path),
                debug_file: Some(debug),
                origin: Origin::Path,
                image_origin: Origin::Path,
            },
            // No separate debug file: the image's own .symtab, MiniDebugInfo or .dynsym.
            (None, Some(image)) => Located {
                match_kind: kind,
                debug_file: Some(image.path.clone()),
                image: Some(image.path),
                origin: Origin::Path,
                image_origin: Origin::Path,
            },
            (None, None) if mismatched => Located {
                match_kind: MatchKind::Mismatch,
                ..Located::missing()
            },
            (None, None) => Located::missing(),
        }
    }

    /// The trees the [`BuildIdIndex`] covers: the sysroot (never this machine's whole `/`),
    /// each debug dir and each search dir.
    pub fn index_roots(&self) -> Vec<PathBuf> {
        let mut roots: Vec<PathBuf> = self.sysroot.iter().cloned().collect();
        roots.extend(self.debug_dirs.iter().cloned());
        roots.extend(self.search_dirs.iter().cloned());
        roots
    }

    /// The module with build-id `build_id` found through `index`, wherever it lies: symbols
    /// from a file with DWARF, else the image's debuglink target, else the image's own symbol
    /// tables; program headers from an image. Each candidate is reopened and its build-id
    /// checked (the index may be stale), so a wrong file is never returned. `None` when the
    /// index holds no usable file with that build-id.
    pub fn locate_by_index(
        &self,
        index: &BuildIdIndex,
        path: &str,
        build_id: &[u8],
    ) -> Option<Located> {
        if build_id.is_empty() {
            return None;
        }
        let verified: Vec<(Candidate, &IndexedFile)> =
            verified_by_index(index, build_id, |_| true).collect();
        let image = verified.iter().find(|(_, f)| f.is_image).map(|(c, _)| c);
        let debug = verified
            .iter()
            .find(|(c, _)| c.info.has_dwarf)
            .map(|(c, _)| c.path.clone())
            .or_else(|| {
                let root = self.sysroot.clone().unwrap_or_else(|| PathBuf::from("/"));
                let rel = board_relative(path).unwrap_or(Path::new(""));
                image.and_then(|c| self.by_debuglink(&root, rel, c, Some(build_id)))
            })
            .or_else(|| image.map(|c| c.path.clone()))?;
        Some(Located {
            match_kind: MatchKind::BuildId,
            image: image.map(|c| c.path.clone()),
            debug_file: Some(debug),
            origin: Origin::Index,
            image_origin: Origin::Index,
        })
    }

    /// The image (a file with program headers and unwind tables) with build-id `build_id`
    /// found through `index`, reopened and verified, for a module whose symbols were found but
    /// whose image was not at its board path.
    pub fn image_by_index(&self, index: &BuildIdIndex, build_id: &[u8]) -> Option<PathBuf> {
        if build_id.is_empty() {
            return None;
        }
        verified_by_index(index, build_id, |f| f.is_image)
            .next()
            .map(|(c, _)| c.path)
    }

    /// A file with DWARF and build-id `build_id` found through `index` (reopened and verified),
    /// for a module whose image was found but carries only symbol tables: the DWARF brings
    /// lines and inlines.
    pub fn dwarf_by_index(&self, index: &BuildIdIndex, build_id: &[u8]) -> Option<PathBuf> {
        if build_id.is_empty() {
            return None;
        }
        verified_by_index(index, build_id, |f| f.has_dwarf)
            .find(|(c, _)| c.info.has_dwarf)
            .map(|(c, _)| c.path)
    }

    /// Directories that may hold a `.build-id` tree, in search order.
    fn build_id_roots(&self, root: &Path) -> Vec<PathBuf> {
        let mut roots = vec![root.join("usr/lib/debug")];
        for d in &self.debug_dirs {
            roots.push(d.clone());
            roots.push(d.join("usr/lib/debug"));
        }
        roots
    }

    /// `ROOT/.build-id/ab/cdef….debug` whose own build-id is `id`.
    fn by_build_id(&self, root: &Path, id: &[u8]) -> Option<PathBuf> {
        if id.len() < 2 {
            return None;
        }
        let hex = hex(id);
        let name = format!(".build-id/{}/{}.debug", &hex[..2], &hex[2..]);
        self.build_id_roots(root)
            .into_iter()
            .map(|r| r.join(&name))
            .find(|p| {
                Candidate::open(p.clone()).is_some_and(|c| c.info.build_id.as_deref() == Some(id))
            })
    }

    /// The image's `.gnu_debuglink` target: next to the image, in its `.debug/`, under
    /// `usr/lib/debug/<board dir>/` of the sysroot, and the same layouts under each debug dir.
    /// The target's CRC must match, and its build-id too when both are known.
    fn by_debuglink(
        &self,
        root: &Path,
        rel: &Path,
        image: &Candidate,
        id: Option<&[u8]>,
    ) -> Option<PathBuf> {
        let link = image.info.debuglink.as_ref()?;
        let board_dir = rel.parent().unwrap_or(Path::new(""));
        let mut dirs = Vec::new();
        if let Some(dir) = image.path.parent() {
            dirs.push(dir.to_path_buf());
            dirs.push(dir.join(".debug"));
        }
        dirs.push(root.join("usr/lib/debug").join(board_dir));
        for d in &self.debug_dirs {
            dirs.push(d.join(board_dir));
            dirs.push(d.join(board_dir).join(".debug"));
            dirs.push(d.join("usr/lib/debug").join(board_dir));
            dirs.push(d.clone());
        }
        dirs.into_iter()
            .map(|d| d.join(&link.name))
            .filter(|p| *p != image.path)
            .find(|p| debuglink_matches(p, link, id))
    }
}

/// True when `path` is a regular ELF file with the link's CRC and, if it has a build-id and one
/// is expected, the expected one.
fn debuglink_matches(path: &Path, link: &DebugLink, id: Option<&[u8]>) -> bool {
    let Ok(backing) = Backing::map(path) else {
        return false;
    };
    let data = backing.as_slice();
    if crc32fast::hash(data) != link.crc {
        return false;
    }
    let Ok(file) = object::File::parse(data) else {
        return false;
    };
    match (ElfInfo::of(&file).build_id, id) {
        (Some(have), Some(want)) => have == want,
        _ => true,
    }
}

/// The board path relative to a root: leading `/` removed; `None` for paths that are empty or
/// climb out with `..` (a recording is untrusted input too).
fn board_relative(path: &str) -> Option<&Path> {
    let rel = Path::new(path.trim_start_matches('/'));
    let ok = rel
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        && rel.components().next().is_some();
    ok.then_some(rel)
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn board_paths_cannot_escape_the_sysroot() {
        assert_eq!(
            board_relative("/usr/lib/libfoo.so"),
            Some(Path::new("usr/lib/libfoo.so"))
        );
        assert_eq!(board_relative("/usr/../../etc/passwd"), None);
        assert_eq!(board_relative("/"), None);
        assert_eq!(board_relative(""), None);
    }

    #[test]
    fn match_kind_names() {
        let all = [
            MatchKind::BuildId,
            MatchKind::PathOnly,
            MatchKind::Missing,
            MatchKind::Mismatch,
        ];
        let names: Vec<_> = all.iter().map(|k| k.as_str()).collect();
        assert_eq!(names, ["build-id", "path-only", "missing", "mismatch"]);
    }

    #[test]
    fn hex_is_lower_case() {
        assert_eq!(hex(&[0xab, 0x01, 0xff]), "ab01ff");
    }
}
