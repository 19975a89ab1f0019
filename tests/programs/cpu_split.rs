//! Ground truth for Rust: hot_a does 3x the work of hot_b, both called from main.
//! Usage: cpu_split_rs [ROUNDS]   (0 = run until killed)
//!
//! The loops use only built-in operators (no iterator, `wrapping_*` or `black_box` calls), so
//! that no inlined library function becomes the innermost frame: `self` samples land in
//! hot_a/hot_b. An empty `asm!` (a macro, not a function) keeps the optimizer from folding
//! the loop.
//! A unit's size varies from round to round, pseudo-randomly from half to one and a half
//! times UNIT as burn.h's next_unit does for the C programs, so that sampling cannot lock onto
//! rounds of one fixed length (which length that would be depends on the processor's speed).
//! Build with `-C opt-level=2` (no overflow checks) and `-C force-frame-pointers=yes`.

const UNIT: u64 = 200_000;
const MUL: u64 = 6364136223846793005;
const ADD: u64 = 1442695040888963407;

/// Hides `x` from the optimizer. A macro, so it leaves no frame of its own.
macro_rules! opaque {
    ($x:expr) => {
        // SAFETY: an empty assembly block that only claims to read and write the register.
        unsafe { core::arch::asm!("/* {0} */", inout(reg) *$x) }
    };
}

#[inline(never)]
fn hot_a(mut x: u64, unit: u64) -> u64 {
    let mut i = 0;
    while i < 3 * unit {
        x = x * MUL + ADD; // LINE:hot_a
        opaque!(&mut x);
        i += 1;
    }
    x
}

#[inline(never)]
fn hot_b(mut x: u64, unit: u64) -> u64 {
    let mut i = 0;
    while i < unit {
        x = x * MUL + ADD; // LINE:hot_b
        opaque!(&mut x);
        i += 1;
    }
    x
}

fn main() {
    let rounds: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let mut x = std::env::args().count() as u64;
    let (mut r, mut state) = (0, 1u64);
    while rounds == 0 || r < rounds {
        state = state * MUL + ADD;
        let unit = UNIT / 2 + (state >> 33) % UNIT;
        x = hot_a(x, unit); // LINE:call_a
        x = hot_b(x, unit); // LINE:call_b
        r += 1;
    }
    std::process::exit((x & 1) as i32 * 0);
}
