//! Finding the table in an ELF file, stripped or not.

use std::ops::Range;

use object::{Object, ObjectSection};

use crate::header::{uint, version, Header};

/// Where a Go function table lies in an ELF file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The table's bytes in the file: from its header to the end of its section.
    pub file_range: Range<usize>,
    /// The address the table's function offsets count from, when its header leaves it to a
    /// dynamic relocation (a position-independent executable): the relocation's addend, else
    /// the start of `.text`. `None` when the header states it.
    pub text_start: Option<u64>,
}

/// The sections a Go linker names for the table: its own section in a plain executable, and
/// a read-only-after-relocation one in a position-independent executable.
const NAMED: &[&str] = &[".gopclntab", ".data.rel.ro.gopclntab"];
/// Where an external linker merges the table when its section name is gone.
const SCANNED: &[&str] = &[".data.rel.ro", ".rodata"];
/// Sections only Go's linker writes: a file with neither is not scanned, so no C program's
/// data can pass for a table.
const GO_MARKS: &[&str] = &[".note.go.buildid", ".go.buildinfo"];

/// Finds the Go function table of `file`, parsed from `whole`: by section name, else by
/// scanning the read-only data sections of a Go binary for a valid header (an externally
/// linked binary has no section of its own for it). `None` when the file is not a Go binary.
pub fn locate(file: &object::File<'_>, whole: &[u8]) -> Option<Location> {
    let data_of = |s: &object::Section<'_, '_>| {
        let (off, len) = s.file_range()?;
        let start = usize::try_from(off).ok()?;
        Some((
            start..start.checked_add(usize::try_from(len).ok()?)?,
            s.address(),
        ))
    };
    let big_endian = !file.is_little_endian();
    for name in NAMED {
        if let Some((range, addr)) = file.section_by_name(name).as_ref().and_then(data_of) {
            let bytes = whole.get(range.clone())?;
            if let Ok(h) = Header::parse(bytes) {
                return Some(finish(file, range, addr, &h));
            }
        }
    }
    if !GO_MARKS.iter().any(|m| file.section_by_name(m).is_some()) {
        return None;
    }
    for name in SCANNED {
        let Some((range, addr)) = file.section_by_name(name).as_ref().and_then(data_of) else {
            continue;
        };
        let Some(bytes) = whole.get(range.clone()) else {
            continue;
        };
        for at in (0..bytes.len().saturating_sub(8)).step_by(4) {
            if uint(bytes, at, 4, big_endian).and_then(version).is_none() {
                continue;
            }
            if let Ok(h) = Header::parse(&bytes[at..]) {
                let table = (range.start + at)..range.end;
                return Some(finish(file, table, addr + at as u64, &h));
            }
        }
    }
    None
}

/// The location, with the text start taken from the relocation or `.text` when the header
/// leaves it zero.
fn finish(file: &object::File<'_>, file_range: Range<usize>, addr: u64, h: &Header) -> Location {
    let text_start = (h.text_start == 0 && h.version != crate::Version::Go116).then(|| {
        let field = addr + 8 + 2 * u64::from(h.ptr);
        file.dynamic_relocations()
            .into_iter()
            .flatten()
            .find(|(at, _)| *at == field)
            .map(|(_, r)| r.addend() as u64)
            .filter(|&a| a != 0)
            .or_else(|| file.section_by_name(".text").map(|s| s.address()))
            .unwrap_or(0)
    });
    Location {
        file_range,
        text_start,
    }
}
