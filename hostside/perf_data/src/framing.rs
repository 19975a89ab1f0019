//! The checks a `perf.data` file passes before the parser reads it: every section it names
//! lies inside the file, every event attribute says a size the parser reads whole, every count the parser reads ahead of what it counts (events, their
//! ids and names, the command line's words) fits in the bytes that follow it, and the data
//! section's records (and the trace data `AUXTRACE` records carry) end inside it. The parser
//! reserves memory by such counts; unchecked, one flipped bit asks for terabytes. Walking the
//! records reads the data section once more: sequentially, it costs far less than the
//! conversion.
//!
//! Layout (tools/perf/util/header.h): a 104-byte header (magic, its own size, the size of one
//! attribute entry, then the attribute, data and event-type sections as offset and size, and a
//! 256-bit set of features); after the data section, one section per feature present, in bit
//! order.

use std::io::{Read, Seek, SeekFrom};

use anyhow::{bail, ensure, Context, Result};

/// Bytes of the header (`struct perf_file_header`).
const HEADER_SIZE: usize = 104;
/// Event attributes a file may hold: far more than any `perf record` writes.
const MAX_ATTRS: u64 = 4096;
/// The largest feature section the checks read whole (an event description or a command
/// line is a few kilobytes).
const MAX_FEATURE: u64 = 64 << 20;
/// Feature bits (`HEADER_*`) of the sections the parser reads by counts.
const FEATURE_CMDLINE: usize = 11;
const FEATURE_EVENT_DESC: usize = 12;

/// A file's words in its own byte order.
#[derive(Clone, Copy)]
struct Order {
    big: bool,
}

impl Order {
    fn u64(self, b: &[u8], at: usize) -> Option<u64> {
        let b: [u8; 8] = b.get(at..at + 8)?.try_into().ok()?;
        Some(if self.big {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        })
    }

    fn u32(self, b: &[u8], at: usize) -> Option<u32> {
        let b: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
        Some(if self.big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }
}

/// A section: offset and size.
type Section = (u64, u64);

/// Checks the file `data` reads, `len` bytes long.
pub fn check<R: Read + Seek>(data: &mut R, len: u64) -> Result<()> {
    let mut head = [0u8; HEADER_SIZE];
    data.seek(SeekFrom::Start(0))?;
    data.read_exact(&mut head)
        .context("too short for a perf.data header")?;
    let order = match &head[..8] {
        b"PERFILE2" => Order { big: false },
        b"2ELIFREP" => Order { big: true },
        _ => bail!("no perf.data magic"),
    };
    let word = |i: usize| order.u64(&head, i * 8).unwrap_or(0);
    if word(1) == 16 {
        bail!("written to a pipe (`perf record -o -`): record to a file, or `perf inject -o FILE`");
    }
    ensure!(
        word(1) == HEADER_SIZE as u64,
        "header of {} bytes, not {HEADER_SIZE}",
        word(1)
    );
    let (attr_size, attrs, data_section, types) = (
        word(2),
        (word(3), word(4)),
        (word(5), word(6)),
        (word(7), word(8)),
    );
    for (what, s) in [
        ("attribute", attrs),
        ("data", data_section),
        ("event type", types),
    ] {
        inside(what, s, len)?;
    }
    ensure!(
        attr_size >= 64 && attrs.1 % attr_size == 0 && attrs.1 / attr_size <= MAX_ATTRS,
        "{} bytes of event attributes of {attr_size} bytes each",
        attrs.1
    );
    // Each attribute entry ends with the section of its event ids.
    let entries = Entries {
        section: attrs,
        size: attr_size,
        attr_size,
    };
    entries.check(data, order, len, ("an event attribute", "event id"))?;

    // Without an event description the parser reads the event types: per event an attribute
    // and the section of its ids.
    ensure!(types.1 <= MAX_FEATURE, "event types of {} bytes", types.1);
    let entries = Entries {
        section: types,
        size: attr_size + 16,
        attr_size,
    };
    entries.check(data, order, len, ("an event type", "event type id"))?;

    // The feature sections' table follows the data.
    let features: Vec<usize> = (0..256)
        .filter(|bit| word(9 + bit / 64) & (1 << (bit % 64)) != 0)
        .collect();
    let table_at = data_section.0.saturating_add(data_section.1);
    let table_len = features.len() as u64 * 16;
    inside("feature table", (table_at, table_len), len)?;
    let mut table = vec![0u8; table_len as usize];
    data.seek(SeekFrom::Start(table_at))?;
    data.read_exact(&mut table)?;
    for (i, &bit) in features.iter().enumerate() {
        let s = (
            order.u64(&table, i * 16).unwrap_or(0),
            order.u64(&table, i * 16 + 8).unwrap_or(0),
        );
        inside(&format!("feature {bit}"), s, len)?;
        // The parser reads every feature section whole.
        ensure!(s.1 <= MAX_FEATURE, "feature {bit} of {} bytes", s.1);
        if bit == FEATURE_EVENT_DESC || bit == FEATURE_CMDLINE {
            let mut body = vec![0u8; s.1 as usize];
            data.seek(SeekFrom::Start(s.0))?;
            data.read_exact(&mut body)?;
            let fits = if bit == FEATURE_EVENT_DESC {
                event_desc_fits(order, &body)
            } else {
                strings_fit(order, &body, 0).is_some()
            };
            ensure!(
                fits,
                "its feature {bit} section does not hold what it counts"
            );
        }
    }
    records(data, order, data_section)
}

/// `PERF_RECORD_AUXTRACE`: its data (hardware trace) follows the record, its size in the body.
const RECORD_AUXTRACE: u32 = 71;

/// Walks the records of the data section: each at least its 8-byte header, and none (with
/// the trace data an `AUXTRACE` record carries after it) running past the section's end.
fn records<R: Read + Seek>(data: &mut R, order: Order, (start, size): Section) -> Result<()> {
    let end = start.saturating_add(size);
    data.seek(SeekFrom::Start(start))?;
    let (mut at, mut body) = (start, vec![0u8; 1 << 16]);
    let mut head = [0u8; 8];
    while at < end {
        ensure!(end - at >= 8, "a record cut short at byte {at}");
        data.read_exact(&mut head)?;
        let kind = order.u32(&head, 0).unwrap_or(0);
        let len = if order.big {
            u16::from_be_bytes([head[6], head[7]])
        } else {
            u16::from_le_bytes([head[6], head[7]])
        } as u64;
        ensure!(len >= 8, "a record of {len} bytes at byte {at}");
        let mut next = at + len;
        ensure!(next <= end, "a record at byte {at} runs past the data");
        data.read_exact(&mut body[..len as usize - 8])?;
        if kind == RECORD_AUXTRACE {
            let aux = order.u64(&body, 0).unwrap_or(u64::MAX);
            next = next.saturating_add(aux);
            ensure!(next <= end, "trace data at byte {at} runs past the data");
            data.seek(SeekFrom::Start(next))?;
        }
        at = next;
    }
    Ok(())
}

/// Whether the `perf_event_attr` at the start of `attr` says a size the parser consumes
/// exactly and that fits the `space` its entry gives it. The parser reads the fields of the
/// largest version not above that size and then skips to the entry's end by the size said:
/// a size between two versions leaves it reading what follows from the wrong place.
fn attr_fits(order: Order, attr: &[u8], space: u64) -> bool {
    /// `PERF_ATTR_SIZE_VER0` to `VER6`; from `VER7` (128) on, every size is read whole.
    const VERSIONS: [u32; 7] = [64, 72, 80, 96, 104, 112, 120];
    order
        .u32(attr, 4)
        .is_some_and(|size| u64::from(size) <= space && (size >= 128 || VERSIONS.contains(&size)))
}

/// A section of entries that each begin with an event attribute and end with the section of
/// the event's ids (the attribute section, and the event types).
struct Entries {
    section: Section,
    /// Bytes per entry.
    size: u64,
    /// The attribute size the header gives: no attribute may say it is larger.
    attr_size: u64,
}

impl Entries {
    /// Reads the entries and checks each attribute's size and that each id section lies in
    /// the file of `len` bytes; `(entry, ids)` name them in the errors.
    fn check<R: Read + Seek>(
        &self,
        data: &mut R,
        order: Order,
        len: u64,
        (entry, ids): (&str, &str),
    ) -> Result<()> {
        let mut entries = vec![0u8; self.section.1 as usize];
        data.seek(SeekFrom::Start(self.section.0))?;
        data.read_exact(&mut entries)?;
        for e in entries.chunks_exact(self.size as usize) {
            ensure!(
                attr_fits(order, e, self.attr_size),
                "{entry} of an odd size"
            );
            let section = (
                order.u64(e, e.len() - 16).unwrap_or(0),
                order.u64(e, e.len() - 8).unwrap_or(0),
            );
            inside(ids, section, len)?;
        }
        Ok(())
    }
}

/// Whether section `s` lies inside a file of `len` bytes, as an error naming it.
fn inside(what: &str, (offset, size): Section, len: u64) -> Result<()> {
    ensure!(
        offset.checked_add(size).is_some_and(|end| end <= len),
        "its {what} section ({size} bytes at {offset}) runs past its end ({len} bytes)"
    );
    Ok(())
}

/// Whether an event description (`HEADER_EVENT_DESC`: a count and an attribute size, then per
/// event its attribute, a count of ids, its name and its ids) holds all it counts.
fn event_desc_fits(order: Order, b: &[u8]) -> bool {
    let (Some(nr), Some(attr_size)) = (order.u32(b, 0), order.u32(b, 4)) else {
        return false;
    };
    let mut at = 8usize;
    for _ in 0..nr {
        let Some(after_attr) = at.checked_add(attr_size as usize) else {
            return false;
        };
        if !b
            .get(at..)
            .is_some_and(|a| attr_fits(order, a, u64::from(attr_size)))
        {
            return false;
        }
        let Some(ids) = order.u32(b, after_attr) else {
            return false;
        };
        let Some(after_name) = string_end(order, b, after_attr + 4) else {
            return false;
        };
        match (ids as usize)
            .checked_mul(8)
            .and_then(|n| after_name.checked_add(n))
        {
            Some(end) if end <= b.len() => at = end,
            _ => return false,
        }
    }
    true
}

/// The end of the string (a 32-bit length, then its bytes) at `at`, if it fits.
fn string_end(order: Order, b: &[u8], at: usize) -> Option<usize> {
    let n = order.u32(b, at)? as usize;
    let end = at.checked_add(4)?.checked_add(n)?;
    (end <= b.len()).then_some(end)
}

/// The end of a string list (a 32-bit count, then the strings) at `at`, if it fits.
fn strings_fit(order: Order, b: &[u8], at: usize) -> Option<usize> {
    let n = order.u32(b, at)?;
    let mut end = at + 4;
    for _ in 0..n {
        end = string_end(order, b, end)?;
    }
    Some(end)
}
