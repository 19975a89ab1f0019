//! JIT runtimes' perf maps (`/tmp/perf-PID.map`): one `START SIZE NAME` line per piece of
//! generated code, addresses and sizes in hex (with or without `0x`), as perf reads them.
//! `rec` carries the file from the board; it is untrusted text.

/// One piece of generated code a perf map names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// First address.
    pub start: u64,
    /// One past the last address (clipped at `u64::MAX` when the size would overflow).
    pub end: u64,
    /// The function's name as the runtime wrote it (everything after the size, trimmed).
    pub name: String,
}

/// The entries of perf map text, in file order. Lines that do not parse, with a zero size or
/// an empty name are skipped; this never fails. Allocates one name per entry.
pub fn parse(data: &[u8]) -> Vec<Entry> {
    let text = String::from_utf8_lossy(data);
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    text.lines()
        .filter_map(|line| {
            let mut parts = line.trim_start().splitn(3, char::is_whitespace);
            let (start, size, name) = (parts.next()?, parts.next()?, parts.next()?);
            let (start, size) = (hex(start)?, hex(size)?);
            let name = name.trim();
            (size > 0 && !name.is_empty()).then(|| Entry {
                start,
                end: start.saturating_add(size),
                name: name.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_that_parse_become_entries() {
        let e = parse(
            b"1000 10 jit_a\n0x1010 0x20 LazyCompile:*hot /s.js:3\ngarbage\nzz 10 x\n\
              2000 0 empty\n3000 10   \nfffffffffffffff0 ff edge\n  40 4 indented name \n",
        );
        let got: Vec<(u64, u64, &str)> = e.iter().map(|e| (e.start, e.end, &*e.name)).collect();
        assert_eq!(
            got,
            [
                (0x1000, 0x1010, "jit_a"),
                (0x1010, 0x1030, "LazyCompile:*hot /s.js:3"),
                (0xffff_ffff_ffff_fff0, u64::MAX, "edge"),
                (0x40, 0x44, "indented name"),
            ]
        );
    }
}
