//! Any bytes as the text tables `rec` carries from the board: `/proc/kallsyms`,
//! `/proc/modules` and a JIT runtime's perf map. Parsing never panics or loops; no table has
//! more entries than the input has lines; a perf-map entry has a name and never ends before it
//! starts; and looking up addresses (taken from the input itself) never panics and names only
//! functions and modules the text contains.
#![no_main]
use crossprof_symbols::{perf_map, Kallsyms};
use libfuzzer_sys::fuzz_target;

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len().max(1))
        .any(|w| w == needle.as_bytes())
}

fuzz_target!(|data: &[u8]| {
    let lines = data.split(|&b| b == b'\n').count();
    let mut k = Kallsyms::parse(data);
    assert!(k.len() <= lines);
    k.add_modules(data);
    for chunk in data.chunks_exact(8).take(32) {
        let addr = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        let s = k.symbolize(addr);
        assert!(s.function.is_none_or(|f| contains(data, f)));
        assert!(s.module.is_none_or(|m| contains(data, m)));
    }
    let entries = perf_map::parse(data);
    assert!(entries.len() <= lines);
    for e in &entries {
        assert!(e.start <= e.end && !e.name.is_empty());
    }
});
