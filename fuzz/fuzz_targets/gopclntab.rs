//! Any bytes as a Go function table (`.gopclntab`, read from a sysroot's Go binary): the header
//! check never panics, and every lookup on a table it accepts (function, name, frame size,
//! file and line at addresses taken from the input) never panics or loops, and finds only
//! functions that contain the address.
#![no_main]
use crossprof_gopclntab::GoTable;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(table) = GoTable::new(data, Some(0x40_1000)) else {
        return;
    };
    let _ = table.range();
    let mut pcs = vec![0x40_1000u64, 0x40_1004, 0x40_1020, u64::MAX];
    pcs.extend(
        data.chunks_exact(8)
            .take(16)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())),
    );
    for pc in pcs {
        if let Some(f) = table.func_at(pc) {
            assert!(
                f.entry <= pc && pc < f.end,
                "{pc:#x} outside {:#x}..{:#x}",
                f.entry,
                f.end
            );
            let _ = (f.name(), f.sp_delta(pc), f.file_line(pc), f.func_id());
            let _ = (f.is_top_frame(), f.switches_stacks());
        }
    }
});
