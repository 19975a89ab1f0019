//! What each zstd level makes of a real recording's frames: the evidence behind
//! `ZSTD_LEVEL`. Inflates every frame of a recording (a pair's bulk frame out of its skippable
//! wrapper too) and compresses each again on its own, as the writer does, at levels 1 to 7,
//! printing the total size and the time spent.
//!
//! `cargo run --release -p crossprof-format --example frame_levels FILE.zst`

use std::time::Instant;

use crossprof_format::BULK_MAGIC;

/// The inflated frames of `data`, in file order; stops at the first one that does not
/// inflate (a torn end).
fn frames(data: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + 8 <= data.len() {
        let word =
            |at: usize| u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
        let (frame, next) = if word(pos) == BULK_MAGIC {
            let end = pos + 8 + word(pos + 4) as usize;
            (data.get(pos + 8..end), end)
        } else {
            match zstd::zstd_safe::find_frame_compressed_size(&data[pos..]) {
                Ok(n) => (Some(&data[pos..pos + n]), pos + n),
                Err(_) => break,
            }
        };
        match frame.map(zstd::stream::decode_all) {
            Some(Ok(f)) => out.push(f),
            _ => break,
        }
        pos = next;
    }
    out
}

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: frame_levels FILE.zst");
        std::process::exit(2);
    };
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    let frames = frames(&data);
    let raw: usize = frames.iter().map(Vec::len).sum();
    println!(
        "{path}: {} bytes, {} frames, {raw} bytes inflated",
        data.len(),
        frames.len()
    );
    for level in 1..=7 {
        let Ok(mut c) = zstd::bulk::Compressor::new(level) else {
            continue;
        };
        let start = Instant::now();
        let size: usize = frames
            .iter()
            .map(|f| c.compress(f).map_or(0, |z| z.len()))
            .sum();
        println!(
            "level {level}: {size} bytes, {:.1} ms",
            start.elapsed().as_secs_f64() * 1e3
        );
    }
}
