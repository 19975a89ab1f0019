//! The unwind-relevant parts of one module file, copied out once so that every address space
//! that maps the module can share them.

use std::ops::Range;
use std::sync::Arc;

use object::{Object, ObjectSection, ObjectSegment, SectionKind};

use crate::bytes::{file_bytes, Section, SharedFile};

/// Why a file's unwind sections could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The bytes are not an ELF file this crate can parse.
    #[error("not a readable ELF file: {0}")]
    NotElf(#[from] object::Error),
}

/// An executable segment: enough to turn a mapping's file offset into the module's addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Segment {
    offset: u64,
    vaddr: u64,
    filesz: u64,
    exec: bool,
}

/// Unwind tables and code of one module, in its own (stated) addresses.
#[derive(Debug, Clone, Default)]
pub struct UnwindSections {
    pub(crate) text_svma: Option<Range<u64>>,
    pub(crate) text: Option<Section>,
    pub(crate) eh_frame_svma: Option<Range<u64>>,
    pub(crate) eh_frame: Option<Section>,
    pub(crate) eh_frame_hdr_svma: Option<Range<u64>>,
    pub(crate) eh_frame_hdr: Option<Section>,
    pub(crate) debug_frame: Option<Section>,
    pub(crate) text_segment_svma: Option<Range<u64>>,
    pub(crate) text_segment: Option<Section>,
    /// 32-bit ARM's own tables (EHABI and the function ranges of prologue analysis), read
    /// by [`crate::arch::arm::Tables::of`]; empty for every other architecture.
    pub(crate) arm: crate::arch::arm::Tables,
    /// `.debug_frame`, indexed.
    pub(crate) cfi: Option<Arc<crate::cfi::CfiTable>>,
    /// `.eh_frame`, indexed: the CFI of i686 and RISC-V, and the coverage check of the
    /// framehop unwinders.
    pub(crate) cfi_eh: Option<Arc<crate::cfi::CfiTable>>,
    /// The linker's PLT sections (stated addresses).
    pub(crate) plt: Vec<Range<u64>>,
    /// The ELF entry point (`_start`): a frame there is the outermost one, whether or not
    /// the start code has unwind info.
    pub(crate) entry: Option<u64>,
    pub(crate) segments: Vec<Segment>,
    /// A Go binary's own function table: frame sizes of Go code, which has no CFI.
    pub(crate) go: Option<Arc<crossprof_gopclntab::GoTable<Section>>>,
}

/// A section's address range and bytes, if the file has it.
pub(crate) type Found = Option<(Range<u64>, Section)>;

/// A section's address range and bytes (in `bytes`, the file `file` was parsed from); `None`
/// when absent, empty, or not in the file (NOBITS in a separate debug file, or compressed).
fn section(file: &object::File<'_>, bytes: &SharedFile, name: &str) -> Found {
    let s = file.section_by_name(name)?;
    if s.kind() == SectionKind::UninitializedData {
        return None;
    }
    let data = s.data().ok()?;
    if data.is_empty() || s.compressed_file_range().ok()?.format != object::CompressionFormat::None
    {
        return None;
    }
    let start = s.address();
    Some((
        start..start.saturating_add(data.len() as u64),
        Section::within(bytes, data),
    ))
}

/// The most bytes a compressed `.debug_frame` may inflate to: far more than any real
/// program's (a C library's is about 100 KiB), and a bound on what a hostile size costs.
const MAX_DEBUG_FRAME: u64 = 256 << 20;

/// `.debug_frame`, inflated when compressed: Debian's and Fedora's detached debug files
/// (`libc6-dbg`, `*-dbgsym`) compress their debug sections (`SHF_COMPRESSED`, zlib or zstd).
/// `None` when absent, empty, or not inflatable within [`MAX_DEBUG_FRAME`].
fn debug_frame(file: &object::File<'_>, bytes: &SharedFile) -> Option<Section> {
    let sec = file.section_by_name(".debug_frame")?;
    let c = sec.compressed_data().ok()?;
    let size = usize::try_from(c.uncompressed_size)
        .ok()
        .filter(|_| c.uncompressed_size <= MAX_DEBUG_FRAME)?;
    let data: Vec<u8> = match c.format {
        object::CompressionFormat::None => {
            return (!c.data.is_empty()).then(|| Section::within(bytes, c.data));
        }
        object::CompressionFormat::Zlib => {
            let mut out = Vec::new();
            out.try_reserve_exact(size).ok()?;
            // Writes only into the reserved capacity: a longer stream is an error.
            let status = flate2::Decompress::new(true)
                .decompress_vec(c.data, &mut out, flate2::FlushDecompress::Finish)
                .ok()?;
            (status == flate2::Status::StreamEnd).then_some(out)?
        }
        object::CompressionFormat::Zstandard => zstd::bulk::decompress(c.data, size).ok()?,
        _ => return None,
    };
    (!data.is_empty() && data.len() == size).then(|| Section::from(data))
}

impl UnwindSections {
    /// Reads the unwind sections of `image` (the module as mapped on the board: its
    /// `.eh_frame` and `.eh_frame_hdr` are allocated, so they survive stripping) and, when
    /// given, `.debug_frame` from a separate debug file.
    ///
    /// Copies both: for tests and small in-memory images. [`UnwindSections::from_files`]
    /// shares the caller's mapping instead.
    pub fn from_elf(image: &[u8], debug: Option<&[u8]>) -> Result<UnwindSections, Error> {
        let debug = debug.map(|d| Arc::new(d.to_vec()) as SharedFile);
        Self::from_files(&(Arc::new(image.to_vec()) as SharedFile), debug.as_ref())
    }

    /// [`UnwindSections::from_elf`] over files the caller already holds (hostside's mapped
    /// module files, shared with the symbolizer): every section is a range of them, nothing
    /// is copied except a `.debug_frame` that had to be decompressed.
    pub fn from_files(
        image: &SharedFile,
        debug: Option<&SharedFile>,
    ) -> Result<UnwindSections, Error> {
        let file = object::File::parse(file_bytes(image))?;
        let mut s = UnwindSections {
            entry: Some(file.entry()).filter(|&e| e != 0),
            ..Default::default()
        };
        if let Some((r, d)) = section(&file, image, ".text") {
            s.text_svma = Some(r);
            s.text = Some(d);
        }
        if let Some((r, d)) = section(&file, image, ".eh_frame") {
            s.eh_frame_svma = Some(r);
            s.eh_frame = Some(d);
        }
        if let Some((r, d)) = section(&file, image, ".eh_frame_hdr") {
            s.eh_frame_hdr_svma = Some(r);
            s.eh_frame_hdr = Some(d);
        }
        s.go = crossprof_gopclntab::locate(&file, file_bytes(image)).and_then(|at| {
            let bytes = file_bytes(image).get(at.file_range)?;
            let table =
                crossprof_gopclntab::GoTable::new(Section::within(image, bytes), at.text_start);
            table.ok().map(Arc::new)
        });
        s.debug_frame = debug_frame(&file, image);
        let dfile = debug.and_then(|d| Some((object::File::parse(file_bytes(d)).ok()?, d)));
        if s.debug_frame.is_none() {
            s.debug_frame = dfile.as_ref().and_then(|(f, d)| debug_frame(f, d));
        }
        if file.architecture() == object::Architecture::Arm {
            let section = |name: &str| section(&file, image, name);
            s.arm = crate::arch::arm::Tables::of(&file, dfile.as_ref().map(|(f, _)| f), section);
        }
        // Indexed CFI: the unwinders not built on framehop step through it, and the framehop
        // ones check with it that an address is covered before trusting a rule (framehop
        // silently falls back to frame pointers where it is not), and step through
        // `.debug_frame` themselves where only it covers an address. (A 32-bit ARM C library
        // built without -funwind-tables has .debug_frame but no .ARM.exidx.)
        let layout = crate::cfi::Layout {
            big_endian: !file.is_little_endian(),
            address_size: if file.is_64() { 8 } else { 4 },
            ra_in_register: !matches!(
                file.architecture(),
                object::Architecture::I386 | object::Architecture::X86_64
            ),
        };
        if let Some(d) = &s.debug_frame {
            s.cfi = Some(Arc::new(crate::cfi::CfiTable::debug_frame(
                d.clone(),
                &layout,
            )));
        }
        if let (Some(r), Some(d)) = (&s.eh_frame_svma, &s.eh_frame) {
            s.cfi_eh = Some(Arc::new(crate::cfi::CfiTable::eh_frame(
                d.clone(),
                r.start,
                &layout,
            )));
        }
        // Linker-made call stubs: GNU ld describes them with a CFA expression framehop does
        // not evaluate, lld not at all; a sample inside one is unwound by hand.
        for name in [".plt", ".plt.sec", ".plt.got", ".iplt"] {
            if let Some(sec) = file.section_by_name(name) {
                let start = sec.address();
                if sec.size() > 0 {
                    s.plt.push(start..start.saturating_add(sec.size()));
                }
            }
        }
        for seg in file.segments() {
            let (offset, filesz) = seg.file_range();
            let exec = matches!(
                seg.flags(),
                object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0
            );
            s.segments.push(Segment {
                offset,
                vaddr: seg.address(),
                filesz,
                exec,
            });
            if exec && s.text_segment.is_none() {
                if let Ok(data) = seg.data() {
                    if !data.is_empty() {
                        let start = seg.address();
                        s.text_segment_svma = Some(start..start.saturating_add(data.len() as u64));
                        s.text_segment = Some(Section::within(image, data));
                    }
                }
            }
        }
        Ok(s)
    }

    /// CFI entries (`.eh_frame`, `.debug_frame`) that did not parse and were skipped: the
    /// code they described unwinds as code without unwind info. Reports show the count.
    pub fn skipped_cfi_entries(&self) -> u64 {
        [&self.cfi, &self.cfi_eh]
            .into_iter()
            .flatten()
            .map(|t| t.skipped())
            .sum()
    }

    /// Whether the file has any unwind table (else only frame pointers can be followed).
    pub fn has_unwind_info(&self) -> bool {
        self.eh_frame.is_some()
            || self.debug_frame.is_some()
            || self.arm.exidx.is_some()
            || self.go.is_some()
    }

    /// The load bias (address on the board minus address in the file) of a mapping that
    /// starts at `start` and maps the file from offset `pgoff`, or `None` when no segment
    /// covers that offset. `executable` says whether the mapping is executable.
    ///
    /// lld and mold put the end of the read-only segment and the start of the executable one
    /// in the same file page, at virtual addresses a page apart; the loader maps that page
    /// twice. So one file offset can belong to two segments with different biases, and the
    /// segment whose permissions match the mapping's is the one it was mapped for.
    pub fn bias(&self, start: u64, pgoff: u64, executable: bool) -> Option<u64> {
        // The mapping's offset is page-aligned; the segment's may not be.
        let covers = |g: &&Segment| {
            let page_start = g.offset & !0xfff;
            g.filesz > 0 && pgoff >= page_start && pgoff < g.offset.saturating_add(g.filesz)
        };
        let seg = self
            .segments
            .iter()
            .filter(covers)
            .find(|g| g.exec == executable)
            .or_else(|| self.segments.iter().find(covers))?;
        Some(
            start
                .wrapping_sub(pgoff)
                .wrapping_add(seg.offset)
                .wrapping_sub(seg.vaddr),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_test_binary_has_unwind_tables_and_a_bias() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let s = UnwindSections::from_elf(&exe, None).unwrap();
        assert!(s.has_unwind_info() && s.eh_frame_hdr.is_some() && s.text.is_some());
        // The mapping of this very test binary's code gives the bias the loader used.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let me = std::fs::read_link("/proc/self/exe").unwrap();
        let line = maps
            .lines()
            .find(|l| l.contains(" r-xp ") && l.ends_with(me.to_str().unwrap()))
            .unwrap();
        let start = u64::from_str_radix(line.split('-').next().unwrap(), 16).unwrap();
        let pgoff = u64::from_str_radix(line.split_whitespace().nth(2).unwrap(), 16).unwrap();
        let bias = s.bias(start, pgoff, true).unwrap();
        let f = own_test_binary_has_unwind_tables_and_a_bias as fn() as usize as u64;
        let text = s.text_svma.clone().unwrap();
        assert!(
            text.contains(&(f - bias)),
            "{f:#x} - {bias:#x} not in {text:x?}"
        );
    }

    /// lld and mold: the read-only segment ends and the executable one starts in the same
    /// file page, a page apart in memory (zstd from the real-world corpus, linked by lld).
    #[test]
    fn the_executable_mapping_of_a_shared_page_takes_the_executable_segment() {
        let s = UnwindSections {
            segments: vec![
                Segment {
                    offset: 0,
                    vaddr: 0,
                    filesz: 0x1c134,
                    exec: false,
                },
                Segment {
                    offset: 0x1c140,
                    vaddr: 0x1d140,
                    filesz: 0xa9380,
                    exec: true,
                },
            ],
            ..Default::default()
        };
        let base = 0x5555_5555_4000u64;
        // The loader maps file page 0x1c000 twice: read-only at base, executable at
        // base + 0x1d000.
        assert_eq!(s.bias(base + 0x1d000, 0x1c000, true), Some(base));
        assert_eq!(s.bias(base, 0, false), Some(base));
        // GNU ld's layout (segments in pages of their own) is unaffected.
        let bfd = UnwindSections {
            segments: vec![Segment {
                offset: 0x1000,
                vaddr: 0x1000,
                filesz: 0x5000,
                exec: true,
            }],
            ..Default::default()
        };
        assert_eq!(bfd.bias(base + 0x1000, 0x1000, true), Some(base));
        assert_eq!(bfd.bias(base, 0x9000, true), None);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(UnwindSections::from_elf(b"\x7fELF junk", None).is_err());
        assert!(UnwindSections::from_elf(&[], None).is_err());
    }
}
