//! Ground truth for Rust: hot_a does 3x the work of hot_b, both called from main.
//! Usage: cpu_split_rs [ROUNDS]
use std::hint::black_box;

const UNIT: u64 = 200_000;

#[inline(never)]
fn hot_a(x: u64) -> u64 {
    let mut x = x;
    for _ in 0..3 * UNIT { x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407)); } // LINE:hot_a
    x
}

#[inline(never)]
fn hot_b(x: u64) -> u64 {
    let mut x = x;
    for _ in 0..UNIT { x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407)); } // LINE:hot_b
    x
}

fn main() {
    let rounds: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let mut x = 1u64;
    let mut r = 0;
    while rounds == 0 || r < rounds {
        x = hot_a(x);
        x = hot_b(x);
        r += 1;
    }
    black_box(x);
}
