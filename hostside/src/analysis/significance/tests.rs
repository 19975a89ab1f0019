//! The tests' arithmetic against known values, and their calibration on seeded simulations:
//! recordings drawn from one program mark rows no more often than [`ALPHA`] says, and a
//! function whose work doubled is marked while the others are not.

use super::*;

/// splitmix64: a small seeded generator, so that every run simulates the same recordings.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Poisson(mean) by counting unit-rate arrivals (means here are a few thousand at most).
    fn poisson(&mut self, mean: f64) -> u64 {
        let (mut t, mut k) = (0.0, 0);
        loop {
            t -= (1.0 - self.uniform()).ln();
            if t > mean {
                return k;
            }
            k += 1;
        }
    }
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * b.abs().max(1e-300)
}

#[test]
fn log_gamma_and_binomial_tails_match_known_values() {
    assert!(close(ln_gamma(10.0), 362_880f64.ln(), 1e-13));
    assert!(close(
        ln_gamma(0.5),
        std::f64::consts::PI.sqrt().ln(),
        1e-13
    ));
    assert!(close(ln_gamma(1000.5), 5_908.674_175_848_678, 1e-13));
    // Binomial(30, 1/2): P(X ≥ 20) = 0.0493685...
    assert!(close(
        binomial_sf(20, 30, 0.5),
        0.049_368_573_352_694_51,
        1e-9
    ));
    assert!(close(
        binomial_cdf(10, 30, 0.5),
        0.049_368_573_352_694_51,
        1e-9
    ));
    // Binomial(10, 0.3): P(X ≤ 2) = 0.3827827864.
    assert!(close(binomial_cdf(2, 10, 0.3), 0.382_782_786_4, 1e-9));
    assert_eq!(binomial_cdf(10, 10, 0.3), 1.0);
    assert_eq!(binomial_sf(0, 10, 0.3), 1.0);
    // All of 10 samples on one side: 2 / 2^10.
    assert!(close(rate_test(0, 10, 1.0, 1.0), 2.0 / 1024.0, 1e-12));
    assert!(close(rate_test(10, 0, 1.0, 1.0), 2.0 / 1024.0, 1e-12));
    assert!(close(smallest_rate_p(10), 2.0 / 1024.0, 1e-12));
    assert_eq!(rate_test(5, 5, 1.0, 1.0), 1.0);
    assert_eq!(rate_test(0, 0, 1.0, 1.0), 1.0);
    assert_eq!(rate_test(3, 9, 0.0, 1.0), 1.0);
    // Exposure: twice the samples per unit of cost in the new recording make 10 vs 20 even.
    assert_eq!(rate_test(10, 20, 1.0, 2.0), 1.0);
    // Large counts stay finite and tiny: 2224 vs 4448 samples at equal exposure.
    let p = rate_test(2224, 4448, 1.0, 1.0);
    assert!(p > 0.0 && p < 1e-100, "{p}");
    // 2224 vs 2206 (two runs of split_ab 3 1 2800 here): not a change.
    assert!(rate_test(2224, 2206, 1.0, 1.0) > 0.5);
}

#[test]
fn normal_tail_and_mann_whitney_match_known_values() {
    assert!(close(normal_sf(1.959_963_984_540_054), 0.025, 1e-6));
    assert!(close(normal_sf(-1.0), 0.841_344_746_068_543, 1e-6));
    // Fully separated samples of 5: U = 0, z = (12.5 - 0.5) / sqrt(22.9166...).
    let a = [1, 2, 3, 4, 5];
    let b = [6, 7, 8, 9, 10];
    let want = 2.0 * normal_sf(12.0 / (25.0f64 * 11.0 / 12.0).sqrt());
    assert!(close(mann_whitney(&a, &b), want, 1e-12));
    assert!(close(mann_whitney(&b, &a), want, 1e-12));
    assert_eq!(mann_whitney(&a, &a), 1.0);
    assert_eq!(mann_whitney(&[1, 2], &b), 1.0);
    assert_eq!(mann_whitney(&[7; 6], &[7; 8]), 1.0);
}

#[test]
fn benjamini_hochberg_marks_up_to_the_largest_passing_rank() {
    let p = [Some(0.001), Some(0.03), None, Some(0.02), Some(0.9)];
    // m = 4: thresholds 0.0125, 0.025, 0.0375, 0.05 for ranks 1..4; 0.03 passes at rank 3.
    assert_eq!(
        benjamini_hochberg(&p, 0.05),
        vec![true, true, false, true, false]
    );
    assert_eq!(
        benjamini_hochberg(&p, 0.01),
        vec![true, false, false, false, false]
    );
    assert!(benjamini_hochberg(&[None, None], 0.05).iter().all(|m| !m));
}

/// A profile's functions: their share of the CPU time, a long tail as real profiles have.
const SHARES: [f64; 10] = [0.40, 0.20, 0.15, 0.10, 0.06, 0.04, 0.02, 0.015, 0.01, 0.005];

/// One simulated recording: each function's samples, Poisson with mean its cost over the
/// period, for `cost` (work, in samples of the default period) scaled per function.
fn recording(rng: &mut Rng, scale: &[f64], samples: f64) -> Vec<u64> {
    SHARES
        .iter()
        .zip(scale)
        .map(|(s, k)| rng.poisson(s * k * samples))
        .collect()
}

fn marks(old: &[u64], new: &[u64]) -> Vec<Mark> {
    let counts: Vec<(u64, u64)> = old.iter().copied().zip(new.iter().copied()).collect();
    let totals = (old.iter().sum(), new.iter().sum());
    // Equal sampling periods: equal samples per unit of cost.
    mark_counts(&counts, (1.0, 1.0), totals)
}

/// Pairs of recordings of one program (same work, same period): rows are marked in at most
/// about ALPHA of the pairs (the family-wise rate BH gives when nothing changed), and each
/// row's p-value is below 5% at most about 5% of the time (conservative, not liberal).
#[test]
fn pairs_of_one_program_mark_rows_at_most_at_the_nominal_rate() {
    let mut rng = Rng(28);
    let same = [1.0; SHARES.len()];
    let pairs = 2000;
    let (mut any_marked, mut below_5pct, mut rows) = (0, 0, 0);
    for i in 0..pairs {
        // Lengths from 300 to 6000 samples: small counts included.
        let n = 300.0 + (i % 20) as f64 * 300.0;
        let (a, b) = (recording(&mut rng, &same, n), recording(&mut rng, &same, n));
        let m = marks(&a, &b);
        any_marked += m.iter().any(|m| m.significant) as u32;
        for (j, r) in m.iter().enumerate() {
            if a[j] + b[j] > 0 {
                rows += 1;
                below_5pct += (r.p_value < 0.05) as u32;
            }
        }
    }
    let family = any_marked as f64 / pairs as f64;
    let per_row = below_5pct as f64 / rows as f64;
    eprintln!("marked in {family:.4} of pairs, rows with p < 0.05: {per_row:.4}");
    assert!(family <= 1.5 * ALPHA, "{family}");
    assert!(per_row <= 0.05, "{per_row}");
}

/// One function's work doubled (the second largest, 20% of the time): it is marked in
/// nearly every pair at 2000 samples, while the others, whose absolute cost did not change
/// but whose shares all fell, are marked about as rarely as when nothing changed.
#[test]
fn a_function_whose_work_doubled_is_marked_and_the_others_are_not() {
    let mut rng = Rng(2028);
    let mut doubled = [1.0; SHARES.len()];
    doubled[1] = 2.0;
    let same = [1.0; SHARES.len()];
    let pairs = 1000;
    let (mut hit, mut false_rows) = (0, 0);
    for _ in 0..pairs {
        let a = recording(&mut rng, &same, 2000.0);
        // The new run lasts longer by the doubled work: 1.2 times the samples in all.
        let b = recording(&mut rng, &doubled, 2000.0);
        let m = marks(&a, &b);
        hit += m[1].significant as u32;
        false_rows += m
            .iter()
            .enumerate()
            .filter(|(j, r)| *j != 1 && r.significant)
            .count();
    }
    eprintln!("doubled row marked in {hit} of {pairs}, other rows marked {false_rows} times");
    assert!(hit as f64 >= 0.99 * pairs as f64, "{hit}");
    assert!(
        false_rows as f64 <= 1.5 * ALPHA * pairs as f64,
        "{false_rows}"
    );
}

/// Exponential waits of one mean in both recordings: the Mann-Whitney p-value falls below 5%
/// about 5% of the time; a wait three times longer (10 to 30 ms) is always told apart.
#[test]
fn mann_whitney_is_calibrated_on_equal_waits_and_sees_a_longer_wait() {
    let mut rng = Rng(7);
    let mut waits = |n: usize, mean_ms: f64| -> Vec<u64> {
        (0..n)
            .map(|_| (-(1.0 - rng.uniform()).ln() * mean_ms * 1e6) as u64)
            .collect()
    };
    let trials = 2000;
    let mut below = 0;
    for i in 0..trials {
        let n = 8 + i % 50;
        let (a, b) = (waits(n, 10.0), waits(n + i % 7, 10.0));
        below += (mann_whitney(&a, &b) < 0.05) as u32;
    }
    let rate = below as f64 / trials as f64;
    eprintln!("equal waits: p < 0.05 in {rate:.4}");
    assert!(rate <= 0.065, "{rate}");
    // 50 naps of 10 ms against 50 of 30 ms, each a little late as sleeps are.
    let late = |base: u64, rng: &mut Rng| base + (rng.uniform() * 2e6) as u64;
    let mut rng = Rng(9);
    let a: Vec<u64> = (0..50).map(|_| late(10_000_000, &mut rng)).collect();
    let b: Vec<u64> = (0..50).map(|_| late(30_000_000, &mut rng)).collect();
    let p = mann_whitney(&a, &b);
    assert!(p < 1e-15, "{p}");
}
