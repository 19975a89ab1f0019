//! Kernel symbols from the board's `/proc/kallsyms`, for kernel frames: the text is copied into
//! the recording and parsed here.
//!
//! Lines read `ffffffff81000000 T _stext` with an optional `[module]`. When the board hid kernel
//! pointers (`kptr_restrict`) every address reads as zero; those lines are skipped, so such a
//! table is empty and kernel frames stay as raw addresses.

/// A sorted table of kernel text symbols. Building it allocates once per symbol name.
#[derive(Clone, Debug, Default)]
pub struct Kallsyms {
    /// `(address, name)`, sorted by address.
    symbols: Vec<(u64, Box<str>)>,
}

impl Kallsyms {
    /// Parses `/proc/kallsyms` text. Malformed lines, zero addresses and non-text symbols (data,
    /// absolute) are skipped; this never fails.
    pub fn parse(text: &[u8]) -> Kallsyms {
        let mut symbols: Vec<(u64, Box<str>)> =
            text.split(|&b| b == b'\n').filter_map(parse_line).collect();
        symbols.sort_by_key(|(addr, _)| *addr);
        symbols.dedup_by_key(|(addr, _)| *addr);
        Kallsyms { symbols }
    }

    /// The name of the nearest symbol at or below `addr`, if any.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let idx = self.symbols.partition_point(|(a, _)| *a <= addr);
        idx.checked_sub(1).map(|i| &*self.symbols[i].1)
    }

    /// Number of usable symbols (zero when the board hid kernel addresses).
    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    /// True when no symbol is usable.
    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }
}

fn parse_line(line: &[u8]) -> Option<(u64, Box<str>)> {
    let line = std::str::from_utf8(line).ok()?;
    let mut fields = line.split_ascii_whitespace();
    let addr = u64::from_str_radix(fields.next()?, 16)
        .ok()
        .filter(|&a| a != 0)?;
    let kind = fields.next()?;
    if !matches!(kind, "t" | "T" | "w" | "W") {
        return None;
    }
    let name = fields.next()?;
    Some((addr, name.into()))
}

#[cfg(test)]
mod tests {
    use super::Kallsyms;

    const TEXT: &[u8] = b"ffffffff81000000 T _stext\n\
ffffffff81000100 t do_one_initcall\n\
ffffffff82000000 D some_data\n\
ffffffffc0001000 t e1000_xmit_frame\t[e1000]\n\
0000000000000000 A fixed_percpu_data\n\
ffffffff81000080 T startup_64\n\
garbage line\n\
zzzz T bad_hex\n\
ffffffff81000200\n";

    #[test]
    fn nearest_symbol_at_or_below() {
        let k = Kallsyms::parse(TEXT);
        assert_eq!(k.len(), 4);
        assert_eq!(k.lookup(0xffffffff81000000), Some("_stext"));
        assert_eq!(k.lookup(0xffffffff8100007f), Some("_stext"));
        assert_eq!(k.lookup(0xffffffff81000080), Some("startup_64"));
        assert_eq!(k.lookup(0xffffffff81000150), Some("do_one_initcall"));
        assert_eq!(k.lookup(0xffffffffc0001010), Some("e1000_xmit_frame"));
        assert_eq!(k.lookup(0xffffffff80ffffff), None);
        assert_eq!(k.lookup(0), None);
    }

    #[test]
    fn hidden_addresses_give_an_empty_table() {
        let k = Kallsyms::parse(b"0000000000000000 T _stext\n0000000000000000 t do_one_initcall\n");
        assert!(k.is_empty());
        assert_eq!(k.lookup(0xffffffff81000000), None);
    }

    #[test]
    fn garbage_does_not_panic() {
        let k = Kallsyms::parse(&[0xff, 0x00, b'\n', b' ', b'T']);
        assert!(k.is_empty());
    }
}
