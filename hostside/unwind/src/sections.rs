//! The unwind-relevant parts of one module file, copied out once so that every address space
//! that maps the module can share them.

use std::ops::Range;
use std::sync::Arc;

use object::{Object, ObjectSection, ObjectSegment, SectionKind};

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
struct Segment {
    offset: u64,
    vaddr: u64,
    filesz: u64,
}

/// Unwind tables and code of one module, in its own (stated) addresses.
#[derive(Debug, Clone, Default)]
pub struct UnwindSections {
    pub(crate) text_svma: Option<Range<u64>>,
    pub(crate) text: Option<Arc<[u8]>>,
    pub(crate) eh_frame_svma: Option<Range<u64>>,
    pub(crate) eh_frame: Option<Arc<[u8]>>,
    pub(crate) eh_frame_hdr_svma: Option<Range<u64>>,
    pub(crate) eh_frame_hdr: Option<Arc<[u8]>>,
    pub(crate) debug_frame: Option<Arc<[u8]>>,
    pub(crate) text_segment_svma: Option<Range<u64>>,
    pub(crate) text_segment: Option<Arc<[u8]>>,
    /// `.ARM.exidx` and `.ARM.extab` as one lookup table (32-bit ARM only).
    pub(crate) arm_exidx: Option<Arc<crate::arm::ExidxTable>>,
    /// `.debug_frame`, indexed, for the unwinders not built on framehop.
    pub(crate) cfi: Option<Arc<crate::cfi::CfiTable>>,
    /// `.eh_frame`, indexed, for the unwinders not built on framehop (i686, RISC-V).
    pub(crate) cfi_eh: Option<Arc<crate::cfi::CfiTable>>,
    /// The ELF entry point (`_start`): a frame there is the outermost one, whether or not
    /// the start code has unwind info.
    pub(crate) entry: Option<u64>,
    segments: Vec<Segment>,
}

type Found = Option<(Range<u64>, Arc<[u8]>)>;

/// A section's address range and bytes; `None` when absent, empty, or not in the file
/// (NOBITS in a separate debug file, or compressed).
fn section(file: &object::File<'_>, name: &str) -> Found {
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
        Arc::from(data),
    ))
}

/// The most bytes a compressed `.debug_frame` may inflate to: far more than any real
/// program's (a C library's is about 100 KiB), and a bound on what a hostile size costs.
const MAX_DEBUG_FRAME: u64 = 256 << 20;

/// `.debug_frame`, inflated when compressed: Debian's and Fedora's detached debug files
/// (`libc6-dbg`, `*-dbgsym`) compress their debug sections (`SHF_COMPRESSED`, zlib or zstd).
/// `None` when absent, empty, or not inflatable within [`MAX_DEBUG_FRAME`].
fn debug_frame(file: &object::File<'_>) -> Option<Arc<[u8]>> {
    let sec = file.section_by_name(".debug_frame")?;
    let c = sec.compressed_data().ok()?;
    let size = usize::try_from(c.uncompressed_size)
        .ok()
        .filter(|_| c.uncompressed_size <= MAX_DEBUG_FRAME)?;
    let data: Vec<u8> = match c.format {
        object::CompressionFormat::None => c.data.to_vec(),
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
    (!data.is_empty() && (c.format == object::CompressionFormat::None || data.len() == size))
        .then(|| Arc::from(data))
}

impl UnwindSections {
    /// Reads the unwind sections of `image` (the module as mapped on the board: its
    /// `.eh_frame` and `.eh_frame_hdr` are allocated, so they survive stripping) and, when
    /// given, `.debug_frame` from a separate debug file.
    pub fn from_elf(image: &[u8], debug: Option<&[u8]>) -> Result<UnwindSections, Error> {
        let file = object::File::parse(image)?;
        let mut s = UnwindSections {
            entry: Some(file.entry()).filter(|&e| e != 0),
            ..Default::default()
        };
        if let Some((r, d)) = section(&file, ".text") {
            s.text_svma = Some(r);
            s.text = Some(d);
        }
        if let Some((r, d)) = section(&file, ".eh_frame") {
            s.eh_frame_svma = Some(r);
            s.eh_frame = Some(d);
        }
        if let Some((r, d)) = section(&file, ".eh_frame_hdr") {
            s.eh_frame_hdr_svma = Some(r);
            s.eh_frame_hdr = Some(d);
        }
        if let Some((r, d)) = section(&file, ".ARM.exidx") {
            let (extab_svma, extab) = match section(&file, ".ARM.extab") {
                Some((er, ed)) => (er.start, ed),
                None => (0, Arc::from(&[][..])),
            };
            s.arm_exidx = Some(Arc::new(crate::arm::ExidxTable::new(
                r.start,
                &d,
                extab_svma,
                &extab,
                !file.is_little_endian(),
            )));
        }
        s.debug_frame = debug_frame(&file);
        if s.debug_frame.is_none() {
            if let Some(debug) = debug {
                if let Ok(dfile) = object::File::parse(debug) {
                    s.debug_frame = debug_frame(&dfile);
                }
            }
        }
        // The unwinders not built on framehop read CFI through these indexes. (A 32-bit ARM
        // C library built without -funwind-tables has .debug_frame but no .ARM.exidx.)
        if matches!(
            file.architecture(),
            object::Architecture::Arm | object::Architecture::I386 | object::Architecture::Riscv64
        ) {
            let size = if file.is_64() { 8 } else { 4 };
            let big = !file.is_little_endian();
            if let Some(d) = &s.debug_frame {
                s.cfi = Some(Arc::new(crate::cfi::CfiTable::debug_frame(
                    d.clone(),
                    big,
                    size,
                )));
            }
            if let (Some(r), Some(d)) = (&s.eh_frame_svma, &s.eh_frame) {
                s.cfi_eh = Some(Arc::new(crate::cfi::CfiTable::eh_frame(
                    d.clone(),
                    r.start,
                    big,
                    size,
                )));
            }
        }
        for seg in file.segments() {
            let (offset, filesz) = seg.file_range();
            s.segments.push(Segment {
                offset,
                vaddr: seg.address(),
                filesz,
            });
            let exec = matches!(
                seg.flags(),
                object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0
            );
            if exec && s.text_segment.is_none() {
                if let Ok(data) = seg.data() {
                    if !data.is_empty() {
                        let start = seg.address();
                        s.text_segment_svma = Some(start..start.saturating_add(data.len() as u64));
                        s.text_segment = Some(Arc::from(data));
                    }
                }
            }
        }
        Ok(s)
    }

    /// Whether the file has any unwind table (else only frame pointers can be followed).
    pub fn has_unwind_info(&self) -> bool {
        self.eh_frame.is_some() || self.debug_frame.is_some() || self.arm_exidx.is_some()
    }

    /// The load bias (address on the board minus address in the file) of a mapping that
    /// starts at `start` and maps the file from offset `pgoff`, or `None` when no segment
    /// covers that offset.
    pub fn bias(&self, start: u64, pgoff: u64) -> Option<u64> {
        // The mapping's offset is page-aligned; the segment's may not be.
        let seg = self.segments.iter().filter(|g| g.filesz > 0).find(|g| {
            let page_start = g.offset & !0xfff;
            pgoff >= page_start && pgoff < g.offset.saturating_add(g.filesz)
        })?;
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
        let bias = s.bias(start, pgoff).unwrap();
        let f = own_test_binary_has_unwind_tables_and_a_bias as fn() as usize as u64;
        let text = s.text_svma.clone().unwrap();
        assert!(
            text.contains(&(f - bias)),
            "{f:#x} - {bias:#x} not in {text:x?}"
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(UnwindSections::from_elf(b"\x7fELF junk", None).is_err());
        assert!(UnwindSections::from_elf(&[], None).is_err());
    }
}
