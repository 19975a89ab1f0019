//! Any bytes as an ELF image (a vDSO copy or a sysroot file): loading never panics, and
//! looking up addresses (taken from the input itself) never panics or loops.
#![no_main]
use crossprof_symbols::{Kallsyms, Module};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let k = Kallsyms::parse(data);
    let _ = k.lookup(u64::from_le_bytes(
        data.get(..8)
            .and_then(|b| b.try_into().ok())
            .unwrap_or([0; 8]),
    ));
    if let Ok(m) = Module::from_bytes(data.to_vec()) {
        for chunk in data.chunks_exact(8).take(32) {
            let a = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
            let _ = m.frames(a);
            let _ = m.offset_to_svma(a);
        }
    }
});
