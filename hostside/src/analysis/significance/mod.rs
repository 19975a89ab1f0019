//! Which differences between two recordings exceed their noise: the tests `hostside diff`
//! marks rows with, and the multiple-comparison correction across its rows.
//!
//! - Sample counts ([`rate_test`]): a sampled profile counts each function's samples; under
//!   "no change" the counts `k1`, `k2` of two recordings are Poisson with means proportional
//!   to each side's exposure (`e1`, `e2`), so given `k1 + k2`, `k2` is
//!   Binomial(`k1 + k2`, `e2 / (e1 + e2)`) whatever the function's unknown rate. The exact
//!   two-sided tail of that binomial is the p-value: exact at any count, so a function with 3
//!   samples is never marked on a normal approximation's say-so (a two-proportion z-test
//!   overstates small counts). The same test compares absolute cost (exposure: samples per
//!   unit of cost, one over the mean sample period) and shares (exposure: each side's total
//!   samples).
//! - Wait durations ([`mann_whitney`]): off-CPU recordings hold every wait as its own
//!   switch-out/in interval, so the waits of a function in two recordings are two samples of
//!   durations, compared by the Mann-Whitney U test (normal approximation with tie and
//!   continuity corrections): rank-based, it is not fooled by a few very long waits (a
//!   loaded machine oversleeps), which would dominate a t-test's means and variances.
//! - [`benjamini_hochberg`] then marks rows at a false-discovery rate across every row
//!   tested. When nothing changed, every marked row is a false discovery, so the chance that
//!   a diff of two recordings of the same program marks any row at all is at most the rate.
//!
//! All of them treat samples (and waits) as independent. They are not quite: CPU samples of a
//! thread taken 1 ms apart while one call runs for 100 ms are 100 samples of one event, and
//! the run-to-run variation of a real machine (caches, other load) adds to the sampling's
//! own. That is why the rate is strict ([`ALPHA`]) and why `diff` marks a function only when
//! both its absolute cost and its share changed (see [`crate::analysis::diff`]).

/// The false-discovery rate at which rows are marked: 1%.
pub const ALPHA: f64 = 0.01;

/// The smallest change of a function's absolute cost that is marked, as a fraction of the
/// longer recording's whole cost: 3%. Below it live the kernel's interrupts, softirqs and
/// scheduler, whose samples a loaded machine gives in bursts: far from the independent
/// samples the tests assume, so their counts would be marked on the strength of a model that
/// does not hold for them. Measured between two runs of one program on a loaded 2-core
/// machine: `finish_task_switch` 0 -> 22 samples, `_raw_spin_unlock_irqrestore` 15 -> 76
/// and `handle_softirqs` 20 -> 56 of 3,251 (1.9% and 1.1%).
pub const MIN_COST_CHANGE: f64 = 0.03;

/// Fewer waits than this on either side are not compared: the Mann-Whitney normal
/// approximation needs a few values per side, and two waits say little.
pub const MIN_WAITS: usize = 5;

/// A row's verdict: its p-value and whether it is marked.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Mark {
    /// The row's p-value (1 for a row not tested).
    pub p_value: f64,
    /// Whether the change exceeds the noise at [`ALPHA`] after the correction across rows.
    pub significant: bool,
}

/// Marks rows of sample counts `(k1, k2)` (one function's samples in each recording): a row
/// is significant when both its absolute cost and its share changed, i.e. its p-value, the
/// larger of [`rate_test`] with exposures `per_cost` (each side's samples per unit of cost:
/// samples over the sum of their periods) and with exposures `totals` (each side's samples),
/// passes [`benjamini_hochberg`] at [`ALPHA`] among the rows that could pass at all, and its
/// absolute cost changed by at least [`MIN_COST_CHANGE`] of the longer recording's. Taking
/// the larger p-value is an intersection-union test: each of the two is a valid test, so
/// their conjunction is one too, without a further correction.
pub fn mark_counts(counts: &[(u64, u64)], per_cost: (f64, f64), totals: (u64, u64)) -> Vec<Mark> {
    let p: Vec<f64> = counts
        .iter()
        .map(|&(k1, k2)| {
            let absolute = rate_test(k1, k2, per_cost.0, per_cost.1);
            let share = rate_test(k1, k2, totals.0 as f64, totals.1 as f64);
            absolute.max(share)
        })
        .collect();
    let tested: Vec<Option<f64>> = counts
        .iter()
        .zip(&p)
        .map(|(&(k1, k2), &p)| (smallest_rate_p(k1 + k2) <= ALPHA).then_some(p))
        .collect();
    let marked = benjamini_hochberg(&tested, ALPHA);
    let cost = |k: u64, per_cost: f64| k as f64 / per_cost;
    let floor = MIN_COST_CHANGE * cost(totals.0, per_cost.0).max(cost(totals.1, per_cost.1));
    p.into_iter()
        .zip(marked)
        .zip(counts)
        .map(|((p_value, marked), &(k1, k2))| Mark {
            p_value,
            significant: marked && (cost(k2, per_cost.1) - cost(k1, per_cost.0)).abs() >= floor,
        })
        .collect()
}

/// Two-sided p-value that counts `k1` and `k2`, observed with exposures `e1` and `e2`, come
/// from the same rate (the conditional binomial test described in the module docs). 1 when
/// there is nothing to compare (both counts zero, or an exposure not positive).
pub fn rate_test(k1: u64, k2: u64, e1: f64, e2: f64) -> f64 {
    let n = k1 + k2;
    if n == 0 || e1.is_nan() || e2.is_nan() || e1 <= 0.0 || e2 <= 0.0 {
        return 1.0;
    }
    let p = e2 / (e1 + e2);
    let lower = binomial_cdf(k2, n, p);
    let upper = binomial_sf(k2, n, p);
    (2.0 * lower.min(upper)).min(1.0)
}

/// The smallest p-value [`rate_test`] can give for counts adding up to `n` at equal
/// exposures: all `n` on one side. Rows that could never be marked are not counted as tests
/// (independent filtering: `n` is independent of the conditional p-value under "no change").
pub fn smallest_rate_p(n: u64) -> f64 {
    (2.0 * 0.5f64.powf(n as f64)).min(1.0)
}

/// P(X ≤ k) for X ~ Binomial(n, p).
fn binomial_cdf(k: u64, n: u64, p: f64) -> f64 {
    if k >= n {
        return 1.0;
    }
    // P(X ≤ k) = I_{1-p}(n - k, k + 1).
    beta_regularized(1.0 - p, (n - k) as f64, (k + 1) as f64)
}

/// P(X ≥ k) for X ~ Binomial(n, p).
fn binomial_sf(k: u64, n: u64, p: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    // P(X ≥ k) = I_p(k, n - k + 1).
    beta_regularized(p, k as f64, (n - k + 1) as f64)
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms: about 15 significant digits).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1-x) = π / sin(πx).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularized incomplete beta function I_x(a, b), by its continued fraction (Lentz's
/// method), on the side where it converges fast.
fn beta_regularized(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    if x < (a + 1.0) / (a + b + 2.0) {
        (ln_front.exp() * beta_fraction(x, a, b) / a).clamp(0.0, 1.0)
    } else {
        (1.0 - ln_front.exp() * beta_fraction(1.0 - x, b, a) / b).clamp(0.0, 1.0)
    }
}

/// The continued fraction of the incomplete beta function.
fn beta_fraction(x: f64, a: f64, b: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..10_000 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// Two-sided p-value that the values `a` and `b` come from the same distribution, by the
/// Mann-Whitney U test (normal approximation, with the tie and continuity corrections); 1
/// when either side has fewer than [`MIN_WAITS`] values or all values are equal.
pub fn mann_whitney(a: &[u64], b: &[u64]) -> f64 {
    let (n1, n2) = (a.len(), b.len());
    if n1 < MIN_WAITS || n2 < MIN_WAITS {
        return 1.0;
    }
    let mut all: Vec<(u64, bool)> = a
        .iter()
        .map(|&v| (v, false))
        .chain(b.iter().map(|&v| (v, true)))
        .collect();
    all.sort_unstable();
    // Ranks from 1, ties sharing their mean rank.
    let (mut rank_sum_a, mut ties) = (0.0, 0.0);
    let mut i = 0;
    while i < all.len() {
        let j = i + all[i..].iter().take_while(|x| x.0 == all[i].0).count();
        let mean_rank = (i + 1 + j) as f64 / 2.0;
        let t = (j - i) as f64;
        ties += t * t * t - t;
        rank_sum_a += mean_rank * all[i..j].iter().filter(|x| !x.1).count() as f64;
        i = j;
    }
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let n = n1f + n2f;
    let u = rank_sum_a - n1f * (n1f + 1.0) / 2.0;
    let mean = n1f * n2f / 2.0;
    let var = n1f * n2f / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
    (2.0 * normal_sf(z)).min(1.0)
}

/// P(Z > z) for a standard normal Z, from erfc (W. J. Cody's rational approximation as in
/// Numerical Recipes' `erfcc`: relative error below 1.2e-7 everywhere).
pub fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Which of `p` (`None`: a row not tested) are discoveries at false-discovery rate `alpha`
/// by the Benjamini-Hochberg procedure over the tested rows: sorted ascending, every p-value
/// up to the largest `p(i) ≤ alpha · i / m`.
pub fn benjamini_hochberg(p: &[Option<f64>], alpha: f64) -> Vec<bool> {
    let mut tested: Vec<(f64, usize)> = p
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.map(|v| (v, i)))
        .collect();
    tested.sort_by(|a, b| a.0.total_cmp(&b.0));
    let m = tested.len() as f64;
    let cut = tested
        .iter()
        .enumerate()
        .filter(|(rank, (v, _))| *v <= alpha * (*rank as f64 + 1.0) / m)
        .map(|(rank, _)| rank + 1)
        .max()
        .unwrap_or(0);
    let mut marked = vec![false; p.len()];
    for &(_, i) in &tested[..cut] {
        marked[i] = true;
    }
    marked
}

#[cfg(test)]
mod tests;
