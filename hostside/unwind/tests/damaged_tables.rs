//! Damaged unwind tables are counted, not silently dropped: each `.eh_frame` entry that does
//! not parse is one skipped entry, and the others still index.

use crossprof_unwind::UnwindSections;
use object::{Object, ObjectSection};

/// This test binary with the CIE pointer of `n` FDEs of its `.eh_frame` pointing at the FDE
/// itself, which is no CIE: the entry reads, but does not parse.
fn with_broken_fdes(n: usize) -> Vec<u8> {
    let mut data = std::fs::read("/proc/self/exe").unwrap();
    let (offset, size) = {
        let file = object::File::parse(&*data).unwrap();
        let s = file.section_by_name(".eh_frame").unwrap();
        let (o, l) = s.file_range().unwrap();
        (o as usize, l as usize)
    };
    let word = |d: &[u8], at: usize| u32::from_le_bytes(d[at..at + 4].try_into().unwrap());
    let (mut at, mut broken) = (offset, 0);
    while broken < n && at + 8 <= offset + size {
        let len = word(&data, at) as usize;
        assert!(
            len != 0 && len != 0xffff_ffff,
            "32-bit entries up to the terminator"
        );
        if word(&data, at + 4) != 0 {
            data[at + 4..at + 8].copy_from_slice(&4u32.to_le_bytes());
            broken += 1;
        }
        at += 4 + len;
    }
    assert_eq!(broken, n);
    data
}

#[test]
fn fdes_that_do_not_parse_are_counted_as_skipped() {
    let intact = UnwindSections::from_elf(&with_broken_fdes(0), None).unwrap();
    assert_eq!(intact.skipped_cfi_entries(), 0);
    for n in [1, 3] {
        let s = UnwindSections::from_elf(&with_broken_fdes(n), None).unwrap();
        assert_eq!(s.skipped_cfi_entries(), n as u64);
    }
}
