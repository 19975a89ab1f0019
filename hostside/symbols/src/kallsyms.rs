//! Kernel symbols from the board's `/proc/kallsyms`, for kernel frames: the text is copied into
//! the recording and parsed here, with the board's `/proc/modules` when `rec` carried it.
//!
//! Lines read `ffffffff81000000 T _stext` with an optional `[module]`: a loadable module's
//! functions carry its name, and frames in them are shown in module `[name]` as perf does.
//! `/proc/modules` gives each module's address range, so an address inside a module whose
//! symbol the table lacks is still placed in that module (and never named after a symbol of
//! another module or of the kernel below it). When the board hid kernel pointers
//! (`kptr_restrict`) every address reads as zero; those lines are skipped, so such a table is
//! empty and kernel frames stay as raw addresses.

/// A sorted table of kernel text symbols. Building it allocates once per symbol name.
#[derive(Clone, Debug, Default)]
pub struct Kallsyms {
    /// `(address, name, module)`, sorted by address; `module` indexes `modules`.
    symbols: Vec<(u64, Box<str>, Option<u32>)>,
    /// Module names, each once.
    modules: Vec<Box<str>>,
    /// `(start, end, module)` from `/proc/modules`, sorted by start.
    ranges: Vec<(u64, u64, u32)>,
}

/// What the table says about a kernel address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelSymbol<'a> {
    /// The function, when a symbol covers the address.
    pub function: Option<&'a str>,
    /// The loadable module the address lies in; `None` for the kernel image.
    pub module: Option<&'a str>,
    /// The module's load address (0 for the kernel image or when unknown).
    pub module_start: u64,
}

impl Kallsyms {
    /// Parses `/proc/kallsyms` text. Malformed lines, zero addresses and non-text symbols (data,
    /// absolute) are skipped; this never fails.
    pub fn parse(text: &[u8]) -> Kallsyms {
        let mut k = Kallsyms::default();
        let mut index = std::collections::HashMap::new();
        let mut symbols: Vec<(u64, Box<str>, Option<u32>)> = text
            .split(|&b| b == b'\n')
            .filter_map(parse_line)
            .map(|(addr, name, module)| {
                let module = module.map(|m| k.module_index(&mut index, m));
                (addr, name, module)
            })
            .collect();
        symbols.sort_by_key(|(addr, _, _)| *addr);
        symbols.dedup_by_key(|(addr, _, _)| *addr);
        k.symbols = symbols;
        k
    }

    fn module_index(
        &mut self,
        index: &mut std::collections::HashMap<String, u32>,
        name: &str,
    ) -> u32 {
        *index.entry(name.to_string()).or_insert_with(|| {
            self.modules.push(name.into());
            (self.modules.len() - 1) as u32
        })
    }

    /// Adds the module ranges of `/proc/modules` text (`name size refs deps state address`).
    /// Lines that do not parse, hidden (zero) addresses and sizes that overflow are skipped.
    pub fn add_modules(&mut self, text: &[u8]) {
        let mut index: std::collections::HashMap<String, u32> = self
            .modules
            .iter()
            .enumerate()
            .map(|(i, m)| (m.to_string(), i as u32))
            .collect();
        for line in text.split(|&b| b == b'\n') {
            let Ok(line) = std::str::from_utf8(line) else {
                continue;
            };
            let f: Vec<&str> = line.split_ascii_whitespace().collect();
            let (Some(name), Some(size), Some(addr)) = (f.first(), f.get(1), f.get(5)) else {
                continue;
            };
            let addr = u64::from_str_radix(addr.trim_start_matches("0x"), 16).ok();
            let (Some(addr), Ok(size)) = (addr.filter(|&a| a != 0), size.parse::<u64>()) else {
                continue;
            };
            let Some(end) = addr.checked_add(size).filter(|_| size > 0) else {
                continue;
            };
            let m = self.module_index(&mut index, name);
            self.ranges.push((addr, end, m));
        }
        self.ranges.sort_unstable();
    }

    /// The name of the nearest symbol at or below `addr`, if any.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        self.symbolize(addr).function
    }

    /// The function and module of a kernel address. Inside a module's `/proc/modules` range
    /// only that module's symbols count; elsewhere the nearest symbol at or below names it,
    /// and its `[module]` tag (when there are no ranges, as in older recordings) the module.
    pub fn symbolize(&self, addr: u64) -> KernelSymbol<'_> {
        let idx = self.symbols.partition_point(|(a, _, _)| *a <= addr);
        let nearest = idx.checked_sub(1).map(|i| &self.symbols[i]);
        let r = self.ranges.partition_point(|(start, _, _)| *start <= addr);
        let range = r
            .checked_sub(1)
            .map(|i| self.ranges[i])
            .filter(|&(_, end, _)| addr < end);
        let name = |m: u32| self.modules.get(m as usize).map(|n| &**n);
        match range {
            Some((start, _, m)) => KernelSymbol {
                function: nearest
                    .filter(|(a, _, sm)| *a >= start && sm.is_none_or(|sm| sm == m))
                    .map(|(_, n, _)| &**n),
                module: name(m),
                module_start: start,
            },
            None => {
                let sym = nearest.filter(|(_, _, sm)| sm.is_none() || self.ranges.is_empty());
                KernelSymbol {
                    function: sym.map(|(_, n, _)| &**n),
                    module: sym.and_then(|(_, _, m)| m.and_then(name)),
                    module_start: 0,
                }
            }
        }
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

fn parse_line(line: &[u8]) -> Option<(u64, Box<str>, Option<&str>)> {
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
    let module = fields
        .next()
        .and_then(|m| m.strip_prefix('[')?.strip_suffix(']'))
        .filter(|m| !m.is_empty());
    Some((addr, name.into(), module))
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
    fn module_functions_carry_their_module() {
        let mut k = Kallsyms::parse(TEXT);
        fn at(k: &Kallsyms, a: u64) -> (Option<&str>, Option<&str>) {
            let s = k.symbolize(a);
            (s.function, s.module)
        }
        // Without /proc/modules, the symbol's tag says which module.
        assert_eq!(
            at(&k, 0xffffffffc0001010),
            (Some("e1000_xmit_frame"), Some("e1000"))
        );
        assert_eq!(at(&k, 0xffffffff81000150), (Some("do_one_initcall"), None));
        k.add_modules(
            b"e1000 4096 0 - Live 0xffffffffc0001000\n\
              virtio_blk 8192 2 - Live 0xffffffffc0010000 (E)\n\
              hidden 4096 0 - Live 0x0000000000000000\n\
              garbage\nhuge 18446744073709551615 0 - Live 0xffffffffc0100000\n",
        );
        assert_eq!(
            at(&k, 0xffffffffc0001fff),
            (Some("e1000_xmit_frame"), Some("e1000"))
        );
        // Past the module's end: no longer e1000's, and no kernel symbol below it either.
        assert_eq!(at(&k, 0xffffffffc0002000), (None, None));
        // In a module whose symbols the table lacks: the module, no function.
        let s = k.symbolize(0xffffffffc0010040);
        assert_eq!(
            (s.function, s.module, s.module_start),
            (None, Some("virtio_blk"), 0xffffffffc0010000)
        );
        assert_eq!(at(&k, 0xffffffff81000150), (Some("do_one_initcall"), None));
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
