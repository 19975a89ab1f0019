//! Lazy per-unit DWARF: an address-to-unit index built in one pass over the unit headers,
//! and an addr2line `Context` made for a unit only when an address falls in it.
//!
//! addr2line builds a `gimli::Unit` for every unit when its `Context` is made: the unit's
//! abbreviation table and line program header, kept for the life of the context. For a
//! large debug file that is most of the memory symbolization costs: Debian's libc debug file
//! has 4,126 units, and their tables took 24 MB of heap when a heap report printed a
//! handful of libc frames. Here each unit's tables are parsed once while the index is built
//! and dropped at once; only the units that lookups reach keep theirs.
//!
//! A unit's context sees a `.debug_info` that holds that unit alone, so offsets inside it are
//! relative to its start. That is exact for every reference inside a unit (`DW_FORM_ref1`
//! to `ref_udata`), and wrong for `DW_FORM_ref_addr`, which names a `.debug_info` offset:
//! files whose abbreviations use it (LTO builds, dwz) are not indexed here and keep one
//! context for the whole file (see [`crate::dwarf::Dwarf`]). The index reproduces
//! addr2line's choice of each unit's ranges and the order it tries units in, so the frames
//! are those a whole-file context gives.

use std::collections::HashMap;
use std::sync::Arc;

use gimli::{Reader as _, Section as _};

use crate::backing::{Backing, Bytes};
use crate::dwarf::Reader;

/// One unit of the file: where it lies in `.debug_info`, and the `.debug_aranges` entries
/// that gave its ranges (addr2line takes them over low/high pc; the unit's own context gets
/// them back as a one-set `.debug_aranges`).
struct UnitSpan {
    offset: usize,
    len: usize,
    address_size: u8,
    aranges: Vec<gimli::Range>,
}

/// An address range of a unit, in addr2line's lookup order: sorted by end, each with the
/// lowest begin of itself and every later range.
struct UnitRange {
    range: gimli::Range,
    unit: usize,
    min_begin: u64,
}

/// The unit index of one file and the contexts made so far. Not `Sync`: [`crate::dwarf::Dwarf`]
/// keeps it behind its lock.
pub(crate) struct LazyUnits {
    sections: gimli::Dwarf<Reader>,
    units: Vec<UnitSpan>,
    ranges: Vec<UnitRange>,
    contexts: HashMap<usize, Option<addr2line::Context<Reader>>>,
    /// Units whose root entry did not parse (a damaged abbreviation or line table header):
    /// skipped, as addr2line skips them, so their addresses are named from the symbol tables.
    unreadable: u64,
}

impl LazyUnits {
    /// Indexes the units of `sections`, which must not refer across units (see
    /// [`refers_across_units`]). Fails where addr2line's whole-file context fails.
    pub(crate) fn index(sections: gimli::Dwarf<Reader>) -> gimli::Result<LazyUnits> {
        let mut aranges = Vec::new();
        let mut headers = sections.debug_aranges.headers();
        while let Some(header) = headers.next()? {
            aranges.push((header.debug_info_offset(), header.offset()));
        }
        aranges.sort_by_key(|a| a.0);

        let mut units = Vec::new();
        let mut ranges = Vec::new();
        let mut unreadable = 0;
        let mut iter = sections.units();
        while let Some(header) = iter.next()? {
            let Some(info_offset) = header.offset().as_debug_info_offset() else {
                continue;
            };
            let mut need_range = match header.type_() {
                gimli::UnitType::Type { .. } | gimli::UnitType::SplitType { .. } => continue,
                gimli::UnitType::Partial => false,
                _ => true,
            };
            let span = (info_offset.0, header.length_including_self());
            let address_size = header.address_size();
            // Parsed for its root entry and dropped before the next unit.
            let Ok(unit) = sections.unit(header) else {
                unreadable += 1;
                continue;
            };
            let unit = gimli::UnitRef::new(&sections, &unit);
            let id = units.len();
            let mut unit_aranges = Vec::new();
            if need_range {
                let Some(attrs) = RootRanges::read(unit)? else {
                    continue;
                };
                let i = match attrs.ranges_offset {
                    Some(_) => None,
                    None => aranges.binary_search_by_key(&info_offset, |a| a.0).ok(),
                };
                if let Some(mut i) = i {
                    while i > 0 && aranges[i - 1].0 == info_offset {
                        i -= 1;
                    }
                    for (_, set) in aranges[i..].iter().take_while(|a| a.0 == info_offset) {
                        let mut entries = sections.debug_aranges.header(*set)?.entries();
                        while let Some(arange) = entries.next()? {
                            if arange.length() != 0 {
                                unit_aranges.push(arange.range());
                                need_range = false;
                            }
                        }
                    }
                    for &range in &unit_aranges {
                        ranges.push(UnitRange::new(range, id));
                    }
                } else {
                    need_range &= !attrs.for_each_range(unit, |r| {
                        ranges.push(UnitRange::new(r, id));
                    })?;
                }
            }
            if need_range {
                for r in line_sequences(unit) {
                    ranges.push(UnitRange::new(r, id));
                }
            }
            units.push(UnitSpan {
                offset: span.0,
                len: span.1,
                address_size,
                aranges: unit_aranges,
            });
        }
        ranges.sort_by_key(|r| r.range.end);
        let mut min = u64::MAX;
        for r in ranges.iter_mut().rev() {
            min = min.min(r.range.begin);
            r.min_begin = min;
        }
        Ok(LazyUnits {
            sections,
            units,
            ranges,
            contexts: HashMap::new(),
            unreadable,
        })
    }

    /// Units skipped because their root entry did not parse.
    pub(crate) fn unreadable(&self) -> u64 {
        self.unreadable
    }

    /// The units whose ranges contain `probe`, in the order addr2line tries them.
    pub(crate) fn candidates(&self, probe: u64) -> Vec<usize> {
        let high = probe.saturating_add(1);
        let pos = match self.ranges.binary_search_by_key(&probe, |r| r.range.end) {
            Ok(i) => i + 1,
            Err(i) => i,
        };
        self.ranges[pos..]
            .iter()
            .take_while(|r| high > r.min_begin)
            .filter(|r| probe < r.range.end && high > r.range.begin)
            .map(|r| r.unit)
            .collect()
    }

    /// The context of unit `id`, made on first use; `None` when it cannot be made.
    pub(crate) fn context(&mut self, id: usize) -> Option<&addr2line::Context<Reader>> {
        if !self.contexts.contains_key(&id) {
            let context = self.make_context(id);
            self.contexts.insert(id, context);
        }
        self.contexts.get(&id).and_then(Option::as_ref)
    }

    /// How many units have a context now.
    #[cfg(test)]
    pub(crate) fn parsed(&self) -> usize {
        self.contexts.values().filter(|c| c.is_some()).count()
    }

    fn make_context(&self, id: usize) -> Option<addr2line::Context<Reader>> {
        let span = self.units.get(id)?;
        let mut info = self.sections.debug_info.reader().clone();
        info.skip(span.offset).ok()?;
        info.truncate(span.len).ok()?;
        let endian = info.endian();
        let aranges = arange_set(&span.aranges, span.address_size, endian)?;
        let s = &self.sections;
        let dwarf = gimli::Dwarf {
            debug_abbrev: s.debug_abbrev.clone(),
            debug_addr: s.debug_addr.clone(),
            debug_aranges: gimli::EndianReader::new(aranges, endian).into(),
            debug_info: info.into(),
            debug_line: s.debug_line.clone(),
            debug_line_str: s.debug_line_str.clone(),
            debug_str: s.debug_str.clone(),
            debug_str_offsets: s.debug_str_offsets.clone(),
            debug_types: gimli::EndianReader::new(Bytes::empty(), endian).into(),
            locations: s.locations.clone(),
            ranges: s.ranges.clone(),
            file_type: s.file_type,
            sup: None,
            abbreviations_cache: gimli::AbbreviationsCache::new(),
        };
        // A panic in the parser loses this unit, not the file.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            addr2line::Context::from_dwarf(dwarf).ok()
        }))
        .ok()
        .flatten()
    }
}

impl UnitRange {
    fn new(range: gimli::Range, unit: usize) -> UnitRange {
        UnitRange {
            range,
            unit,
            min_begin: 0,
        }
    }
}

/// The range attributes of a unit's root entry, as addr2line reads them.
struct RootRanges {
    low_pc: Option<u64>,
    high_pc: Option<u64>,
    size: Option<u64>,
    ranges_offset: Option<gimli::RangeListsOffset<usize>>,
}

impl RootRanges {
    /// `None` when the unit has no root entry.
    fn read(unit: gimli::UnitRef<'_, Reader>) -> gimli::Result<Option<RootRanges>> {
        let mut entries = unit.entries_raw(None)?;
        let Some(abbrev) = entries.read_abbreviation()? else {
            return Ok(None);
        };
        let mut out = RootRanges {
            low_pc: None,
            high_pc: None,
            size: None,
            ranges_offset: None,
        };
        for spec in abbrev.attributes() {
            let attr = entries.read_attribute(*spec)?;
            match (attr.name(), attr.value()) {
                (gimli::DW_AT_low_pc, gimli::AttributeValue::Addr(v)) => out.low_pc = Some(v),
                (gimli::DW_AT_low_pc, gimli::AttributeValue::DebugAddrIndex(i)) => {
                    out.low_pc = Some(unit.address(i)?);
                }
                (gimli::DW_AT_high_pc, gimli::AttributeValue::Addr(v)) => out.high_pc = Some(v),
                (gimli::DW_AT_high_pc, gimli::AttributeValue::DebugAddrIndex(i)) => {
                    out.high_pc = Some(unit.address(i)?);
                }
                (gimli::DW_AT_high_pc, gimli::AttributeValue::Udata(v)) => out.size = Some(v),
                (gimli::DW_AT_ranges, value) => {
                    out.ranges_offset = unit.attr_ranges_offset(value)?;
                }
                _ => {}
            }
        }
        Ok(Some(out))
    }

    /// Calls `f` with each non-empty range; true when there was one.
    fn for_each_range(
        &self,
        unit: gimli::UnitRef<'_, Reader>,
        mut f: impl FnMut(gimli::Range),
    ) -> gimli::Result<bool> {
        let mut added = false;
        let mut add = |r: gimli::Range| {
            if r.begin < r.end {
                f(r);
                added = true;
            }
        };
        if let Some(offset) = self.ranges_offset {
            let mut list = unit.ranges(offset)?;
            while let Some(r) = list.next()? {
                add(r);
            }
        } else if let (Some(begin), Some(end)) = (self.low_pc, self.high_pc) {
            add(gimli::Range { begin, end });
        } else if let (Some(begin), Some(size)) = (self.low_pc, self.size) {
            add(gimli::Range {
                begin,
                end: begin.wrapping_add(size),
            });
        }
        Ok(added)
    }
}

/// The address ranges of a unit's line program sequences (for units that state no ranges),
/// sorted by start; empty when the program cannot be read.
fn line_sequences(unit: gimli::UnitRef<'_, Reader>) -> Vec<gimli::Range> {
    let Some(program) = unit.line_program.clone() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut start = None;
    let mut rows = program.rows();
    loop {
        match rows.next_row() {
            Ok(Some((_, row))) if row.end_sequence() => {
                if let Some(begin) = start.take() {
                    out.push(gimli::Range {
                        begin,
                        end: row.address(),
                    });
                }
            }
            Ok(Some((_, row))) => {
                start.get_or_insert(row.address());
            }
            Ok(None) => break,
            Err(_) => return Vec::new(),
        }
    }
    out.sort_by_key(|r| r.begin);
    out
}

/// A `.debug_aranges` section with one set for the unit at offset 0 holding `ranges`; an
/// empty section when there are none. `None` for an address size aranges cannot hold.
fn arange_set(
    ranges: &[gimli::Range],
    address_size: u8,
    endian: gimli::RunTimeEndian,
) -> Option<Bytes> {
    if ranges.is_empty() {
        return Some(Bytes::empty());
    }
    let size = usize::from(address_size);
    if size != 4 && size != 8 {
        return None;
    }
    let put = |out: &mut Vec<u8>, v: u64, n: usize| {
        let bytes = match endian {
            gimli::RunTimeEndian::Little => v.to_le_bytes(),
            gimli::RunTimeEndian::Big => v.to_be_bytes(),
        };
        match endian {
            gimli::RunTimeEndian::Little => out.extend_from_slice(&bytes[..n]),
            gimli::RunTimeEndian::Big => out.extend_from_slice(&bytes[8 - n..]),
        }
    };
    // Header: length, version 2, .debug_info offset 0, address size, no segment selector;
    // the tuples start at a multiple of the tuple size.
    let tuple = 2 * size;
    let header = 12usize.next_multiple_of(tuple);
    let len = header + tuple * (ranges.len() + 1);
    let mut out = Vec::with_capacity(len);
    put(&mut out, u64::try_from(len - 4).ok()?, 4);
    put(&mut out, 2, 2);
    put(&mut out, 0, 4);
    out.push(address_size);
    out.push(0);
    out.resize(header, 0);
    for r in ranges {
        put(&mut out, r.begin, size);
        put(&mut out, r.end.wrapping_sub(r.begin), size);
    }
    out.resize(len, 0);
    Some(Bytes::whole(Arc::new(Backing::Owned(out))))
}

/// True when an abbreviation of any unit uses `DW_FORM_ref_addr` (or `DW_FORM_indirect`,
/// which could hide it): such a file's references can cross units. Reads each distinct
/// abbreviation table once, allocating nothing per entry. An error (a table that does not
/// parse) leaves the file to the whole-file context, which handles it as it always has.
pub(crate) fn refers_across_units(sections: &gimli::Dwarf<Reader>) -> bool {
    scan_abbreviations(sections).unwrap_or(true)
}

fn scan_abbreviations(sections: &gimli::Dwarf<Reader>) -> gimli::Result<bool> {
    let mut offsets = Vec::new();
    let mut iter = sections.units();
    while let Some(header) = iter.next()? {
        offsets.push(header.debug_abbrev_offset().0);
    }
    offsets.sort_unstable();
    offsets.dedup();
    for offset in offsets {
        let mut table = sections.debug_abbrev.reader().clone();
        table.skip(offset)?;
        loop {
            if table.read_uleb128()? == 0 {
                break;
            }
            table.read_uleb128()?; // tag
            table.read_u8()?; // children
            loop {
                let name = table.read_uleb128()?;
                let form = table.read_uleb128()?;
                if name == 0 && form == 0 {
                    break;
                }
                let form = gimli::DwForm(u16::try_from(form).unwrap_or(u16::MAX));
                if form == gimli::DW_FORM_ref_addr || form == gimli::DW_FORM_indirect {
                    return Ok(true);
                }
                if form == gimli::DW_FORM_implicit_const {
                    table.read_sleb128()?;
                }
            }
        }
    }
    Ok(false)
}

#[cfg(test)]
#[path = "dwarf_units_tests.rs"]
mod tests;
