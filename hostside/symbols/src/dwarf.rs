//! DWARF from a mapped debug file: addr2line contexts whose sections point into the map
//! (uncompressed sections are not copied; compressed ones are inflated once, within a size
//! limit, and only those addr2line reads), and the inline chain of an address.
//!
//! Units are parsed only when an address falls in them ([`crate::dwarf_units`]), unless the
//! file's references cross units; then one addr2line `Context` covers the file. addr2line
//! parses lazily through interior mutability, so a `Context` is `Send` but not `Sync`;
//! [`Dwarf`] keeps its contexts behind a `Mutex`. A lookup holds the lock for microseconds
//! once its unit is parsed.

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use object::{CompressionFormat, Object, ObjectSection};

use crate::backing::{Backing, Bytes};
use crate::demangle::demangle;
use crate::dwarf_units::{refers_across_units, LazyUnits};
use crate::error::Error;
use crate::SymFrame;

/// The reader type gimli parses with: a byte range of a mapped file.
pub(crate) type Reader = gimli::EndianReader<gimli::RunTimeEndian, Bytes>;

/// The largest size one compressed debug section may inflate to.
pub(crate) const MAX_SECTION: u64 = 1 << 30;
/// The most bytes all compressed debug sections of one file may inflate to together.
pub(crate) const MAX_INFLATED_TOTAL: u64 = 2 << 30;
/// More inline levels than any real program has; stops a crafted chain early.
const MAX_FRAMES: usize = 64;

/// A file's DWARF, ready for lookups from any thread.
pub(crate) struct Dwarf {
    context: Mutex<Contexts>,
    /// Lookups whose DWARF failed part way (a damaged unit, line program or inline entry):
    /// the address is then named from the symbol tables or with a shortened inline chain.
    lookup_errors: AtomicU64,
    /// Compilation units skipped because they did not parse (see [`Dwarf::unreadable_units`]).
    unreadable_units: u64,
}

/// How a file's units are looked up.
enum Contexts {
    /// One context per unit, made when an address falls in it.
    Lazy(Box<LazyUnits>),
    /// One context for the whole file (its references cross units).
    Whole(Box<addr2line::Context<Reader>>),
}

/// Sections addr2line never reads (locations, type units, macros): not loaded, so a
/// compressed one is not inflated either.
const UNUSED: [gimli::SectionId; 3] = [
    gimli::SectionId::DebugLoc,
    gimli::SectionId::DebugLocLists,
    gimli::SectionId::DebugTypes,
];

impl Dwarf {
    /// Loads the DWARF of `file` (parsed from `backing`), or `None` when it has no
    /// `.debug_info`. Parses unit headers and address ranges now; the rest lazily.
    pub(crate) fn load(
        file: &object::File<'_>,
        backing: &Arc<Backing>,
        path: &Path,
    ) -> Result<Option<Dwarf>, Error> {
        let Some(mut dwarf) = sections(file, backing, path)? else {
            return Ok(None);
        };
        // addr2line is a third-party parser fed hostile bytes: a panic in it (an arithmetic
        // overflow check, say) loses this file's DWARF, not the whole run.
        let context = std::panic::catch_unwind(AssertUnwindSafe(|| {
            if refers_across_units(&dwarf) {
                let unreadable = unreadable_units(&dwarf);
                dwarf.populate_abbreviations_cache(gimli::AbbreviationsCacheStrategy::Duplicates);
                addr2line::Context::from_dwarf(dwarf)
                    .map(|c| (Contexts::Whole(Box::new(c)), unreadable))
            } else {
                LazyUnits::index(dwarf).map(|lazy| {
                    let unreadable = lazy.unreadable();
                    (Contexts::Lazy(Box::new(lazy)), unreadable)
                })
            }
        }))
        .map_err(|_| Error::ParserPanic {
            path: path.to_path_buf(),
            parser: "addr2line",
        })?
        .map_err(|source| Error::Dwarf {
            path: path.to_path_buf(),
            source,
        })?;
        let (context, unreadable_units) = context;
        Ok(Some(Dwarf {
            lookup_errors: AtomicU64::new(0),
            unreadable_units,
            context: Mutex::new(context),
        }))
    }

    /// The inline chain at `svma`, innermost first, with demangled names. Empty when no unit
    /// covers the address, or once a lookup has panicked inside addr2line (the poisoned lock
    /// then turns this file's DWARF off).
    pub(crate) fn frames(&self, svma: u64) -> Vec<SymFrame> {
        // addr2line computes `probe + 1`.
        if svma == u64::MAX {
            return Vec::new();
        }
        let mut failed = false;
        // The guard lives inside the closure, so a panic poisons the lock on its way out.
        let lookup = || {
            self.context
                .lock()
                .map(|mut contexts| match &mut *contexts {
                    Contexts::Whole(context) => {
                        frames_of(context, svma, &mut failed).unwrap_or_default()
                    }
                    Contexts::Lazy(units) => frames_lazy(units, svma, &mut failed),
                })
                .unwrap_or_default()
        };
        let frames = std::panic::catch_unwind(AssertUnwindSafe(lookup)).unwrap_or_default();
        if failed {
            self.lookup_errors.fetch_add(1, Ordering::Relaxed);
        }
        frames
    }

    /// Compilation units that did not parse (their root entry, abbreviations or line table
    /// header damaged): addr2line skips them, so every address in them is named from the
    /// symbol tables, without file:line or inlined functions.
    pub(crate) fn unreadable_units(&self) -> u64 {
        self.unreadable_units
    }

    /// Lookups so far whose DWARF failed part way (see [`Dwarf::frames`]).
    pub(crate) fn lookup_errors(&self) -> u64 {
        self.lookup_errors.load(Ordering::Relaxed)
    }

    /// True once a lookup panicked inside addr2line: this file's DWARF is off from then on
    /// and its addresses are named from the symbol tables.
    pub(crate) fn disabled(&self) -> bool {
        self.context.is_poisoned()
    }
}

/// How many compilation units of `dwarf` do not parse: those addr2line's whole-file context
/// skips without a word.
fn unreadable_units(dwarf: &gimli::Dwarf<Reader>) -> u64 {
    let mut n = 0;
    let mut headers = dwarf.units();
    while let Ok(Some(header)) = headers.next() {
        if dwarf.unit(header).is_err() {
            n += 1;
        }
    }
    n
}

/// The DWARF sections of `file` that addr2line reads, or `None` when it has no
/// `.debug_info`.
pub(crate) fn sections(
    file: &object::File<'_>,
    backing: &Arc<Backing>,
    path: &Path,
) -> Result<Option<gimli::Dwarf<Reader>>, Error> {
    let info_size = file.section_by_name(".debug_info").map_or(0, |s| s.size());
    if info_size == 0 {
        return Ok(None);
    }
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let mut inflated = 0u64;
    let dwarf = gimli::Dwarf::load(|id| -> Result<Reader, Error> {
        let bytes = if UNUSED.contains(&id) {
            Bytes::empty()
        } else {
            section_bytes(file, backing, path, id.name(), &mut inflated)?
        };
        Ok(gimli::EndianReader::new(bytes, endian))
    })?;
    Ok(Some(dwarf))
}

/// The frames from the first unit covering `svma` that knows the address, trying the units
/// in the order a whole-file context does. Sets `failed` when a unit that covers the address
/// could not be parsed or its lookup failed.
pub(crate) fn frames_lazy(units: &mut LazyUnits, svma: u64, failed: &mut bool) -> Vec<SymFrame> {
    for id in units.candidates(svma) {
        let Some(context) = units.context(id) else {
            *failed = true;
            continue;
        };
        match frames_of(context, svma, failed) {
            Some(frames) if frames.is_empty() => continue,
            Some(frames) => return frames,
            None => return Vec::new(),
        }
    }
    Vec::new()
}

/// The inline chain `context` gives for `svma`: empty when no unit of it knows the address,
/// `None` when the lookup failed (damaged DWARF). Sets `failed` on any error, also one that
/// only cut the inline chain short.
pub(crate) fn frames_of(
    context: &addr2line::Context<Reader>,
    svma: u64,
    failed: &mut bool,
) -> Option<Vec<SymFrame>> {
    let mut out = Vec::new();
    let Ok(mut iter) = context.find_frames(svma).skip_all_loads() else {
        *failed = true;
        return None;
    };
    while out.len() < MAX_FRAMES {
        let frame = match iter.next() {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(_) => {
                *failed = true;
                if out.is_empty() {
                    return None;
                }
                break;
            }
        };
        let function = frame
            .function
            .as_ref()
            .and_then(|f| f.raw_name().ok())
            .map(|n| demangle(&n));
        let (file, line) = match frame.location {
            Some(loc) => (loc.file.map(str::to_string), loc.line),
            None => (None, None),
        };
        out.push(SymFrame {
            function,
            file,
            line,
        });
    }
    Some(out)
}

/// The bytes of section `name`: a range of the map when stored plainly, an inflated copy when
/// compressed (`SHF_COMPRESSED` or `.zdebug_*`), empty when absent.
fn section_bytes(
    file: &object::File<'_>,
    backing: &Arc<Backing>,
    path: &Path,
    name: &str,
    inflated: &mut u64,
) -> Result<Bytes, Error> {
    let Some(section) = file.section_by_name(name) else {
        return Ok(Bytes::empty());
    };
    let elf_err = |source| Error::Elf {
        path: path.to_path_buf(),
        source,
    };
    let compressed = section.compressed_data().map_err(elf_err)?;
    if compressed.format == CompressionFormat::None {
        return Ok(Bytes::within(backing, compressed.data).unwrap_or_else(Bytes::empty));
    }
    let size = compressed.uncompressed_size;
    let too_large = |limit| Error::TooLarge {
        path: path.to_path_buf(),
        section: name.to_string(),
        size,
        limit,
    };
    if size > MAX_SECTION {
        return Err(too_large(MAX_SECTION));
    }
    if inflated.saturating_add(size) > MAX_INFLATED_TOTAL {
        return Err(too_large(MAX_INFLATED_TOTAL));
    }
    *inflated += size;
    let data =
        inflate(compressed.format, compressed.data, size).map_err(|message| Error::Decompress {
            path: path.to_path_buf(),
            section: name.to_string(),
            message,
        })?;
    Ok(Bytes::whole(Arc::new(Backing::Owned(data))))
}

/// Inflates `data` into exactly `size` bytes: output past `size` is an error, never an
/// allocation (the header's size is a claim of an untrusted file).
fn inflate(format: CompressionFormat, data: &[u8], size: u64) -> Result<Vec<u8>, String> {
    let size = usize::try_from(size).map_err(|_| "size does not fit in memory".to_string())?;
    let out = match format {
        CompressionFormat::Zlib => {
            let mut out = Vec::new();
            out.try_reserve_exact(size).map_err(|e| e.to_string())?;
            // Writes only into the reserved capacity.
            let status = flate2::Decompress::new(true)
                .decompress_vec(data, &mut out, flate2::FlushDecompress::Finish)
                .map_err(|e| e.to_string())?;
            if status != flate2::Status::StreamEnd {
                return Err("zlib stream longer than the stated size, or truncated".into());
            }
            out
        }
        CompressionFormat::Zstandard => {
            zstd::bulk::decompress(data, size).map_err(|e| e.to_string())?
        }
        other => return Err(format!("unsupported compression {other:?}")),
    };
    if out.len() != size {
        return Err(format!(
            "inflated to {} bytes, the header says {size}",
            out.len()
        ));
    }
    Ok(out)
}
