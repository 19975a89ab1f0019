//! jitdump files (perf's `tools/perf/Documentation/jitdump-specification.txt`), as `rec`
//! carried them from the board: which code a JIT runtime loaded where and when, under which
//! name, later moved, with source lines where the runtime gave them.
//!
//! The record bodies are parsed by `linux-perf-data`'s jitdump module (samply's parser). Its
//! file reader is not used: it panics on some damaged files (a record shorter than its own
//! header, a header over 4 KiB) and sizes a vector from an untrusted count. Framing is done
//! here over bytes already in memory instead: every record must lie inside the data and be at
//! least a record header long, so the walk always advances and ends; a debug-info count larger
//! than its record could hold is refused before the crate sees it. Memory is proportional to
//! the input (names and line entries are at most what the bytes spell out).

use std::collections::HashMap;
use std::sync::Arc;

use linux_perf_data::jitdump::{
    JitCodeDebugInfoRecord, JitCodeLoadRecord, JitCodeMoveRecord, JitCodeUnwindingInfoRecord,
};
use linux_perf_data::linux_perf_event_reader::RawData;
use linux_perf_data::Endianness;

/// A function name is cut at this many bytes.
const MAX_NAME: usize = 4096;
/// Record types (the specification's `JIT_CODE_*`).
const LOAD: u32 = 0;
const MOVE: u32 = 1;
const DEBUG_INFO: u32 = 2;
const UNWINDING_INFO: u32 = 4;
/// The header's flag saying timestamps are the CPU's cycle counter, not CLOCK_MONOTONIC.
const FLAG_ARCH_TIMESTAMP: u64 = 1;

/// One source line entry: code from `addr` on (up to the next entry) comes from `file:line`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineEntry {
    /// First code address of the entry.
    pub addr: u64,
    /// Source file, as the runtime named it.
    pub file: Arc<str>,
    /// 1-based line.
    pub line: u32,
}

/// One piece of generated code, live from `time` at `start..end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Code {
    /// When it was loaded or moved here (the board's CLOCK_MONOTONIC, ns; 0 when the file's
    /// clock is not comparable with the recording's).
    pub time: u64,
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// The runtime's name for it.
    pub name: Arc<str>,
    /// Source lines, sorted by address (empty when the runtime gave none).
    pub lines: Arc<[LineEntry]>,
}

/// What one jitdump held, and what was wrong with it.
#[derive(Debug, Default)]
pub struct Dump {
    /// Every load and move, in file order.
    pub code: Vec<Code>,
    /// `JIT_CODE_UNWINDING_INFO` records seen (their tables are not used yet).
    pub unwinding_info: u64,
    /// Records that did not parse, were cut short, or referred to nothing.
    pub damaged: u64,
    /// The header's timestamps are a cycle counter: loads are not ordered against samples.
    pub arch_timestamps: bool,
    /// Line entries dropped because their file name was not a clean path.
    pub bad_file_names: u64,
    /// The data did not start with a jitdump header.
    pub not_a_jitdump: bool,
}

/// Parses one jitdump file's bytes. Never panics; stops at the first record that does not fit.
pub fn parse(data: &[u8]) -> Dump {
    let mut dump = Dump::default();
    let endian = match data.get(..4) {
        Some(b"DTiJ") => Endianness::LittleEndian,
        Some(b"JiTD") => Endianness::BigEndian,
        _ => {
            dump.not_a_jitdump = true;
            return dump;
        }
    };
    let u32_at = |off: usize| -> Option<u32> {
        let b: [u8; 4] = data.get(off..off + 4)?.try_into().ok()?;
        Some(match endian {
            Endianness::LittleEndian => u32::from_le_bytes(b),
            Endianness::BigEndian => u32::from_be_bytes(b),
        })
    };
    let u64_at = |off: usize| -> Option<u64> {
        let b: [u8; 8] = data.get(off..off + 8)?.try_into().ok()?;
        Some(match endian {
            Endianness::LittleEndian => u64::from_le_bytes(b),
            Endianness::BigEndian => u64::from_be_bytes(b),
        })
    };
    let (Some(header_size), Some(flags)) = (u32_at(8), u64_at(32)) else {
        dump.not_a_jitdump = true;
        return dump;
    };
    dump.arch_timestamps = flags & FLAG_ARCH_TIMESTAMP != 0;
    let mut pos = (header_size as usize).max(40);
    // Line tables wait for the load of the code they describe (the specification puts them
    // just before it).
    let mut pending_lines: HashMap<u64, Arc<[LineEntry]>> = HashMap::new();
    let mut files: HashMap<Vec<u8>, Option<Arc<str>>> = HashMap::new();
    let mut by_index: HashMap<u64, usize> = HashMap::new();
    while let (Some(kind), Some(size), Some(time)) = (u32_at(pos), u32_at(pos + 4), u64_at(pos + 8))
    {
        let (start, size) = (pos, size as usize);
        let Some(body) = data
            .get(pos + 16..pos.saturating_add(size))
            .filter(|_| size >= 16)
        else {
            // Cut short (the end of a truncated copy) or a size that lies: stop here.
            dump.damaged += 1;
            break;
        };
        pos += size;
        let time = if dump.arch_timestamps { 0 } else { time };
        let raw = RawData::Single(body);
        match kind {
            LOAD => match JitCodeLoadRecord::parse(endian, raw) {
                // Empty code names nothing.
                Ok(r) if r.code_bytes.is_empty() => {}
                Ok(r) => {
                    let size = r.code_bytes.len() as u64;
                    let lines = pending_lines.remove(&r.code_addr).unwrap_or_default();
                    let name = r.function_name.as_slice();
                    let name = String::from_utf8_lossy(&name[..name.len().min(MAX_NAME)]);
                    by_index.insert(r.code_index, dump.code.len());
                    dump.code.push(Code {
                        time,
                        start: r.code_addr,
                        end: r.code_addr.saturating_add(size),
                        name: name.into(),
                        lines,
                    });
                }
                _ => dump.damaged += 1,
            },
            MOVE => match JitCodeMoveRecord::parse(endian, raw) {
                Ok(r) => match by_index.get(&r.code_index).map(|&i| dump.code[i].clone()) {
                    Some(old) => {
                        // Lines keep their offset into the code. Offsets are taken with
                        // checked arithmetic: a wrapping shift of a forged move would put
                        // them out of order, and `line` searches them by address.
                        let lines: Vec<LineEntry> = old
                            .lines
                            .iter()
                            .filter_map(|l| {
                                let offset = l.addr.checked_sub(old.start)?;
                                Some(LineEntry {
                                    addr: r.new_code_addr.checked_add(offset)?,
                                    ..l.clone()
                                })
                            })
                            .collect();
                        by_index.insert(r.code_index, dump.code.len());
                        dump.code.push(Code {
                            time,
                            start: r.new_code_addr,
                            end: r.new_code_addr.saturating_add(r.code_size),
                            name: old.name,
                            lines: lines.into(),
                        });
                    }
                    None => dump.damaged += 1,
                },
                Err(_) => dump.damaged += 1,
            },
            DEBUG_INFO => {
                // Each entry takes at least 17 bytes (address, line, column, a NUL): a count
                // the record cannot hold is a lie, refused before anything is sized from it.
                let plausible = u64_at(start + 24)
                    .is_some_and(|n| n <= (body.len() as u64).saturating_sub(16) / 17);
                let parsed = plausible
                    .then(|| JitCodeDebugInfoRecord::parse(endian, raw).ok())
                    .flatten();
                match parsed {
                    Some(r) => {
                        let mut lines = Vec::with_capacity(r.entries.len());
                        let mut previous: Option<Arc<str>> = None;
                        for e in &r.entries {
                            let path = e.file_path.as_slice();
                            // `0xff` alone: the same file as the entry before (perf's
                            // convention).
                            let file = if path.as_ref() == [0xff] {
                                previous.clone()
                            } else {
                                file_name(&mut files, &path)
                            };
                            previous = file.clone();
                            if let Some(file) = file {
                                lines.push(LineEntry {
                                    addr: e.code_addr,
                                    file,
                                    line: e.line,
                                });
                            } else {
                                dump.bad_file_names += 1;
                            }
                        }
                        lines.sort_by_key(|l| l.addr);
                        pending_lines.insert(r.code_addr, lines.into());
                    }
                    None => dump.damaged += 1,
                }
            }
            UNWINDING_INFO => match JitCodeUnwindingInfoRecord::parse(endian, raw) {
                Ok(_) => dump.unwinding_info += 1,
                Err(_) => dump.damaged += 1,
            },
            // JIT_CODE_CLOSE and types added after version 1 carry nothing we use.
            _ => {}
        }
    }
    dump
}

/// The interned file name, or `None` when it is not a clean path: not UTF-8 or with control
/// characters (Node 20's V8 writes freed heap bytes over the start of script paths).
fn file_name(files: &mut HashMap<Vec<u8>, Option<Arc<str>>>, path: &[u8]) -> Option<Arc<str>> {
    files
        .entry(path.to_vec())
        .or_insert_with(|| {
            std::str::from_utf8(path)
                .ok()
                .filter(|p| !p.is_empty() && !p.chars().any(char::is_control))
                .map(Arc::from)
        })
        .clone()
}

impl Code {
    /// The source line of `addr` (inside this code), when the runtime gave lines.
    pub fn line(&self, addr: u64) -> Option<&LineEntry> {
        let n = self.lines.partition_point(|l| l.addr <= addr);
        n.checked_sub(1).map(|i| &self.lines[i])
    }
}

#[cfg(test)]
mod tests;
