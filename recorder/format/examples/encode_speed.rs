//! How fast records are encoded into a frame buffer, the step of `rec`'s write path between
//! decoding a perf sample and compressing the frame. A micro-check for changes to the
//! encoding: compare two builds' numbers run alternately on the same machine.
//!
//! `cargo run --release -p crossprof-format --example encode_speed [ROUNDS]` prints, for a
//! frame-pointer sample (24 return addresses) and stack-copy samples of 512 B and 8 KiB (the
//! default and the largest `--call-graph dwarf`), the nanoseconds per record of
//! `Record::encode` into a buffer emptied every 1 MiB as the frame writer's is, and of
//! `FrameWriter::push` (encode, stack filter, zstd) into memory. The best of five runs.

use std::hint::black_box;
use std::time::Instant;

use crossprof_format::{End, FrameWriter, Header, Record, Sample, FORMAT_VERSION};

fn sample(chain: usize, stack: usize) -> Record {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    Record::Sample(Sample {
        time: 1_000_000_000,
        pid: 4242,
        tid: 4243,
        cpu: 1,
        period: 1_001_001,
        kernel_chain: Vec::new(),
        user_chain: (0..chain)
            .map(|_| 0x5555_5555_0000 + next() % 0x10_0000)
            .collect(),
        regs_mask: if stack > 0 { 0x1ff } else { 0 },
        regs: if stack > 0 {
            (0..9).map(|_| next()).collect()
        } else {
            Vec::new()
        },
        // Words as a stack holds them: return addresses, stack pointers, small numbers.
        stack: (0..stack / 8)
            .flat_map(|i| {
                let w = match i % 4 {
                    0 => 0x5555_5555_0000 + next() % 0x10_0000,
                    1 => 0x7ffd_0000_0000 + next() % 0x1_0000,
                    2 => next() % 64,
                    _ => 0,
                };
                w.to_le_bytes()
            })
            .collect(),
        addr: 0,
    })
}

/// Nanoseconds per call of `f`, the best of five runs of `rounds` calls.
fn best_ns(rounds: u32, mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..rounds {
                f();
            }
            t.elapsed().as_nanos() as f64 / f64::from(rounds)
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let rounds: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let header = Header {
        format_version: FORMAT_VERSION,
        arch: "x86_64".into(),
        pointer_size: 8,
        page_size: 4096,
        ..Default::default()
    };
    println!("record           encode ns  push ns  (best of 5 x {rounds})");
    for (name, r) in [
        ("fp, 24 frames", sample(24, 0)),
        ("stack 512 B", sample(1, 512)),
        ("stack 8 KiB", sample(1, 8192)),
    ] {
        let mut buf = Vec::with_capacity(2 << 20);
        let encode = best_ns(rounds, || {
            if buf.len() > 1 << 20 {
                buf.clear();
            }
            black_box(&r).encode(&mut buf);
        });
        let mut w = FrameWriter::new(Vec::new(), &header).expect("writer");
        let push = best_ns(rounds / 10, || {
            w.push(black_box(&r)).expect("push");
        });
        black_box(w.finish(End::default()).expect("finish").len());
        println!("{name:<16} {encode:>9.1} {push:>8.1}");
    }
}
