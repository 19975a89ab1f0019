//! Any bytes as a jitdump file (a JIT runtime's file `rec` carried from the board). The
//! parser never panics or loops, never yields more code than the bytes could hold (each load or
//! move takes at least a 16-byte record header), and a prefix of the input never yields more
//! code than the whole (records are read in order and the walk stops at the first that does
//! not fit).
#![no_main]
use crossprof_symbols::jitdump;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let whole = jitdump::parse(data);
    assert!(whole.code.len() <= data.len() / 16);
    for c in &whole.code {
        assert!(c.start <= c.end);
        assert!(c.lines.windows(2).all(|w| w[0].addr <= w[1].addr));
    }
    let half = jitdump::parse(&data[..data.len() / 2]);
    assert!(half.code.len() <= whole.code.len());
});
