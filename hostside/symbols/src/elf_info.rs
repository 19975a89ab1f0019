//! The facts about an ELF file that lookup and address translation need, read from headers and
//! notes only: its GNU build-id, its `.gnu_debuglink`, whether it has DWARF, and its `PT_LOAD`
//! segments for turning the file offsets `rec` records into addresses.
//!
//! Debug files made by `objcopy --only-keep-debug` keep the program headers but zero their file
//! offsets and sizes, so for those the original layout is rebuilt from the addresses (see
//! [`segments`]).

use object::{elf, Object, ObjectSection, ObjectSegment, SectionFlags, SectionKind, SegmentFlags};

/// What [`crate::Lookup`] needs to know about a candidate file.
#[derive(Clone, Debug, Default)]
pub(crate) struct ElfInfo {
    /// The `NT_GNU_BUILD_ID` note's descriptor.
    pub build_id: Option<Vec<u8>>,
    /// The `.gnu_debuglink` section.
    pub debuglink: Option<DebugLink>,
    /// Has a non-empty `.debug_info` (plain or compressed).
    pub has_dwarf: bool,
}

/// A `.gnu_debuglink`: the debug file's name and the CRC32 of its whole contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DebugLink {
    /// A plain file name (never a path: names with `/` or `..` are dropped).
    pub name: String,
    /// CRC32 (the zlib polynomial) of the debug file.
    pub crc: u32,
}

impl ElfInfo {
    /// Reads the facts from a parsed file. Corrupt notes or sections read as absent.
    pub(crate) fn of(file: &object::File<'_>) -> ElfInfo {
        let build_id = file
            .build_id()
            .ok()
            .flatten()
            .filter(|id| !id.is_empty())
            .map(<[u8]>::to_vec);
        let debuglink = file.gnu_debuglink().ok().flatten().and_then(|(name, crc)| {
            let name = std::str::from_utf8(name).ok()?;
            let plain = !name.is_empty()
                && name != "."
                && name != ".."
                && !name.contains(['/', '\\', '\0']);
            plain.then(|| DebugLink {
                name: name.to_string(),
                crc,
            })
        });
        let has_dwarf = file
            .section_by_name(".debug_info")
            .is_some_and(|s| s.size() > 0);
        ElfInfo {
            build_id,
            debuglink,
            has_dwarf,
        }
    }
}

/// One `PT_LOAD` segment: file bytes `offset..offset + size` are loaded at `vaddr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    /// File offset.
    pub offset: u64,
    /// Bytes of the file the segment covers.
    pub size: u64,
    /// Stated virtual address of the first byte.
    pub vaddr: u64,
    /// Executable (`PF_X`).
    pub exec: bool,
}

/// A segment as the debug file states it, before its file layout is rebuilt.
#[derive(Clone, Copy, Debug)]
struct Stated {
    vaddr: u64,
    memsz: u64,
    align: u64,
    exec: bool,
}

/// The file's `PT_LOAD` segments. For a debug-only file (one whose code sections were turned
/// into `NOBITS`), whose headers no longer say where each segment was in the original file, the
/// layout linkers produce is rebuilt: the first segment at `vaddr % align` and each next one at
/// the first offset after the previous segment's end that is congruent to its address modulo its
/// alignment (the ELF rule `p_offset ≡ p_vaddr (mod p_align)`), which is what GNU ld and lld do.
pub(crate) fn segments(file: &object::File<'_>) -> Vec<Segment> {
    let exec_of = |s: &object::Segment<'_, '_>| match s.flags() {
        SegmentFlags::Elf { p_flags } => p_flags & elf::PF_X != 0,
        _ => false,
    };
    if !is_debug_only(file) {
        return file
            .segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                Segment {
                    offset,
                    size,
                    vaddr: s.address(),
                    exec: exec_of(&s),
                }
            })
            .filter(|s| s.size > 0)
            .collect();
    }
    let stated: Vec<Stated> = file
        .segments()
        .map(|s| Stated {
            vaddr: s.address(),
            memsz: s.size(),
            align: s.align(),
            exec: exec_of(&s),
        })
        .collect();
    rebuild_layout(stated)
}

fn rebuild_layout(mut stated: Vec<Stated>) -> Vec<Segment> {
    stated.sort_by_key(|s| s.vaddr);
    let mut out: Vec<Segment> = Vec::with_capacity(stated.len());
    for s in stated {
        let align = s.align.max(1);
        let offset = match out.last() {
            None => s.vaddr % align,
            Some(prev) => {
                let Some(min) = prev.offset.checked_add(prev.size) else {
                    break;
                };
                let a = u128::from(align);
                let gap = (u128::from(s.vaddr) % a + (a - u128::from(min) % a)) % a;
                let Some(offset) = u64::try_from(gap).ok().and_then(|g| min.checked_add(g)) else {
                    break;
                };
                offset
            }
        };
        out.push(Segment {
            offset,
            size: s.memsz,
            vaddr: s.vaddr,
            exec: s.exec,
        });
    }
    out
}

/// True for files made by `objcopy --only-keep-debug` / `strip --only-keep-debug`: an
/// allocated, executable section has no file contents.
pub(crate) fn is_debug_only(file: &object::File<'_>) -> bool {
    file.sections().any(|s| {
        let exec = matches!(s.flags(), SectionFlags::Elf { sh_flags } if sh_flags & u64::from(elf::SHF_EXECINSTR) != 0);
        exec && s.kind() == SectionKind::UninitializedData && s.size() > 0
    })
}

/// True when the file holds loadable code: an executable `PT_LOAD` segment with file contents
/// and no code section emptied by `--only-keep-debug`. Such a file can stand in for the board's
/// image (its program headers give the offsets `rec` recorded).
pub(crate) fn is_image(file: &object::File<'_>) -> bool {
    let code = file.segments().any(|s| {
        let exec = matches!(s.flags(), SegmentFlags::Elf { p_flags } if p_flags & elf::PF_X != 0);
        exec && s.file_range().1 > 0
    });
    code && !is_debug_only(file)
}

/// Maps a file offset to the stated virtual address through the segment that contains it,
/// preferring an executable one where segments overlap in the file.
pub(crate) fn offset_to_svma(segments: &[Segment], file_offset: u64) -> Option<u64> {
    let contains = |s: &&Segment| file_offset >= s.offset && file_offset - s.offset < s.size;
    let seg = segments
        .iter()
        .filter(contains)
        .find(|s| s.exec)
        .or_else(|| segments.iter().find(contains))?;
    seg.vaddr.checked_add(file_offset - seg.offset)
}

/// The file offset of stated address `svma`, through the executable segment that holds it
/// (the inverse of [`offset_to_svma`]).
pub(crate) fn svma_to_offset(segments: &[Segment], svma: u64) -> Option<u64> {
    let contains = |s: &&Segment| svma >= s.vaddr && svma - s.vaddr < s.size;
    let seg = segments
        .iter()
        .filter(contains)
        .find(|s| s.exec)
        .or_else(|| segments.iter().find(contains))?;
    seg.offset.checked_add(svma - seg.vaddr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(vaddr: u64, memsz: u64, align: u64, exec: bool) -> Stated {
        Stated {
            vaddr,
            memsz,
            align,
            exec,
        }
    }

    #[test]
    fn rebuilds_gnu_ld_x86_64_layout() {
        // readelf -l of a gcc -O2 PIE; the debug file says offset 0 / filesz 0 for most.
        let got = rebuild_layout(vec![
            st(0, 0x618, 0x1000, false),
            st(0x1000, 0x16d, 0x1000, true),
            st(0x2000, 0xf8, 0x1000, false),
            st(0x3dd0, 0x250, 0x1000, false),
        ]);
        let offsets: Vec<u64> = got.iter().map(|s| s.offset).collect();
        assert_eq!(offsets, [0, 0x1000, 0x2000, 0x2dd0]);
    }

    #[test]
    fn rebuilds_aarch64_64k_layout() {
        let got = rebuild_layout(vec![
            st(0x10d90, 0x290, 0x10000, false),
            st(0, 0x864, 0x10000, true),
        ]);
        assert_eq!(
            got[0],
            Segment {
                offset: 0,
                size: 0x864,
                vaddr: 0,
                exec: true
            }
        );
        assert_eq!(got[1].offset, 0xd90);
        assert_eq!(offset_to_svma(&got, 0xda0), Some(0x10da0));
    }

    #[test]
    fn hostile_segments_do_not_overflow() {
        let got = rebuild_layout(vec![
            st(0x10, u64::MAX, 0x1000, true),
            st(u64::MAX, 1, u64::MAX, false),
        ]);
        assert_eq!(got.len(), 1);
        let got = rebuild_layout(vec![
            st(0, u64::MAX, 0, true),
            st(u64::MAX, u64::MAX, u64::MAX, false),
        ]);
        assert_eq!(got[1].offset, u64::MAX);
        assert_eq!(
            offset_to_svma(
                &[Segment {
                    offset: 10,
                    size: u64::MAX,
                    vaddr: u64::MAX,
                    exec: true
                }],
                20
            ),
            None
        );
        assert_eq!(offset_to_svma(&[], 0), None);
    }

    #[test]
    fn prefers_the_executable_segment() {
        let segs = [
            Segment {
                offset: 0,
                size: 0x2000,
                vaddr: 0,
                exec: false,
            },
            Segment {
                offset: 0x1000,
                size: 0x100,
                vaddr: 0x5000,
                exec: true,
            },
        ];
        assert_eq!(offset_to_svma(&segs, 0x1010), Some(0x5010));
        assert_eq!(offset_to_svma(&segs, 0x10), Some(0x10));
        assert_eq!(offset_to_svma(&segs, 0x2000), None);
    }
}
