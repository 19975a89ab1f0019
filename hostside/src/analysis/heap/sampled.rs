//! Estimates from a sampled recording (`rec --heap --heap-sample BYTES`).
//!
//! The interposer records an allocation of `s` bytes with probability
//! `p(s) = 1 - exp(-s / BYTES)` (a Poisson process over allocated bytes, as heapprofd and
//! tcmalloc sample), independently of everything else. Each recorded allocation so stands for
//! `1/p` allocations and `s/p` bytes: the Horvitz-Thompson estimator, unbiased for any sum over
//! allocations (a site's calls, bytes, leaked blocks and bytes). Its variance is estimated by
//! `Σ (1-p)/p²` for counts and `Σ s²(1-p)/p²` for bytes; the reports show the square root,
//! the standard error.
//!
//! The analysis applies this by counting every byte quantity in weighted bytes
//! ([`Weights::bytes`]: live bytes, so the peaks are peaks of estimated live bytes, and the
//! timeline) and by keeping the estimated counts and the variances beside the sample counts
//! ([`Estimate`]). What the samples cannot tell exactly:
//! - `temporary` (freed with no other allocation in between): judged among the recorded
//!   allocations only, so it overstates; an upper estimate;
//! - peaks: the maximum of an estimated curve, biased upward a little; no standard error.

/// How a sampled recording's allocations are weighed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    /// Mean bytes between samples.
    pub mean: f64,
}

impl Weights {
    /// For a recording's header field (`heap_sample_bytes`): `None` when exact.
    pub fn of(mean_bytes: u64) -> Option<Weights> {
        (mean_bytes != 0).then_some(Weights {
            mean: mean_bytes as f64,
        })
    }

    /// The probability that an allocation of `size` bytes was recorded (1 for size 0, which
    /// the interposer never samples: any that arrives counts once).
    pub fn p(&self, size: u64) -> f64 {
        if size == 0 {
            return 1.0;
        }
        (-(-(size as f64) / self.mean).exp_m1()).clamp(f64::MIN_POSITIVE, 1.0)
    }

    /// The bytes a recorded allocation of `size` bytes stands for, rounded.
    pub fn bytes(&self, size: u64) -> u64 {
        (size as f64 / self.p(size)).round() as u64
    }
}

/// Estimated counts and variances of one trace (or site, or the whole heap): sums over its
/// recorded allocations.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Estimate {
    /// Σ 1/p: allocations.
    pub allocations: f64,
    /// Σ (1-p)/p².
    pub allocations_var: f64,
    /// Σ s²(1-p)/p²: variance of the allocated bytes (whose estimate is the weighted bytes).
    pub allocated_bytes_var: f64,
    /// Σ 1/p over the temporary ones.
    pub temporary: f64,
    /// Their variance.
    pub temporary_var: f64,
    /// Σ 1/p over the live ones.
    pub live: f64,
    /// Their variance.
    pub live_var: f64,
    /// Σ s²(1-p)/p² over the live ones: variance of the live (leaked) bytes.
    pub live_bytes_var: f64,
}

/// (1/p, (1-p)/p², s²(1-p)/p²) of one recorded allocation of `size` bytes.
fn terms(w: &Weights, size: u64) -> (f64, f64, f64) {
    let p = w.p(size);
    let v = (1.0 - p) / (p * p);
    let s = size as f64;
    (1.0 / p, v, s * s * v)
}

impl Estimate {
    /// A recorded allocation of `size` bytes.
    pub fn alloc(&mut self, w: &Weights, size: u64) {
        let (n, v, bv) = terms(w, size);
        self.allocations += n;
        self.allocations_var += v;
        self.allocated_bytes_var += bv;
        self.live += n;
        self.live_var += v;
        self.live_bytes_var += bv;
    }

    /// The free of a recorded allocation of `size` bytes.
    pub fn free(&mut self, w: &Weights, size: u64, temporary: bool) {
        let (n, v, bv) = terms(w, size);
        self.live = (self.live - n).max(0.0);
        self.live_var = (self.live_var - v).max(0.0);
        self.live_bytes_var = (self.live_bytes_var - bv).max(0.0);
        if temporary {
            self.temporary += n;
            self.temporary_var += v;
        }
    }

    /// Adds another's sums (a trace's into its site's).
    pub fn add(&mut self, o: &Estimate) {
        self.allocations += o.allocations;
        self.allocations_var += o.allocations_var;
        self.allocated_bytes_var += o.allocated_bytes_var;
        self.temporary += o.temporary;
        self.temporary_var += o.temporary_var;
        self.live += o.live;
        self.live_var += o.live_var;
        self.live_bytes_var += o.live_bytes_var;
    }

    /// The standard errors.
    pub fn stderr(&self) -> StdErrors {
        StdErrors {
            allocations: self.allocations_var.sqrt(),
            temporary: self.temporary_var.sqrt(),
            allocated_bytes: self.allocated_bytes_var.sqrt(),
            leaked_allocations: self.live_var.sqrt(),
            leaked_bytes: self.live_bytes_var.sqrt(),
        }
    }
}

/// Standard errors of a sampled recording's estimates (the square roots of [`Estimate`]'s
/// variances); all 0 for what was suppressed.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StdErrors {
    /// Of `allocations`.
    pub allocations: f64,
    /// Of `temporary`.
    pub temporary: f64,
    /// Of `allocated_bytes`.
    pub allocated_bytes: f64,
    /// Of `leaked_allocations`.
    pub leaked_allocations: f64,
    /// Of `leaked_bytes`.
    pub leaked_bytes: f64,
}

/// What a profile of a sampled recording says about the sampling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampled {
    /// Mean bytes between samples (the header's `heap_sample_bytes`).
    pub mean_bytes: u64,
    /// Allocations recorded (the samples).
    pub samples: u64,
    /// Standard errors of the totals.
    pub totals: StdErrors,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_follow_the_sampling_probability() {
        let w = Weights { mean: 1024.0 };
        assert!((w.p(1024) - (1.0 - (-1.0f64).exp())).abs() < 1e-12);
        // Large blocks are nearly always recorded and stand for themselves.
        assert_eq!(w.bytes(1 << 30), 1 << 30);
        // Small ones stand for about `mean` bytes each.
        assert!((w.bytes(8) as f64 - 1028.0).abs() < 2.0);
        let mut e = Estimate::default();
        e.alloc(&w, 8);
        e.alloc(&w, 8);
        e.free(&w, 8, true);
        assert!((e.allocations - 2.0 / w.p(8)).abs() < 1e-9);
        assert!((e.live - 1.0 / w.p(8)).abs() < 1e-9);
        assert!((e.temporary - e.live).abs() < 1e-9);
        assert!(e.stderr().allocations > 0.0);
        assert_eq!(Weights::of(0), None);
    }

    /// Allocations sampled with exactly the interposer's probability (a Bernoulli draw per
    /// allocation, which the Poisson process amounts to): over 400 replicates, the estimated
    /// calls and bytes of a mix of small and medium blocks average the truth, and their
    /// spread matches the estimated variances.
    #[test]
    fn estimates_are_unbiased_and_their_variances_right() {
        let w = Weights { mean: 4096.0 };
        let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut uniform = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng >> 11) as f64 / (1u64 << 53) as f64
        };
        let sizes = [(32u64, 20_000u32), (500, 400), (4096, 50)];
        let calls: f64 = sizes.iter().map(|&(_, n)| f64::from(n)).sum();
        let bytes: f64 = sizes.iter().map(|&(s, n)| (s * u64::from(n)) as f64).sum();
        let reps = 400;
        // Per replicate: (calls, bytes) estimated and their estimated variances.
        let mut runs = Vec::new();
        for _ in 0..reps {
            let (mut e, mut b) = (Estimate::default(), 0.0);
            for &(s, n) in &sizes {
                for _ in 0..n {
                    if uniform() < w.p(s) {
                        e.alloc(&w, s);
                        b += w.bytes(s) as f64;
                    }
                }
            }
            runs.push([
                (e.allocations, e.allocations_var),
                (b, e.allocated_bytes_var),
            ]);
        }
        for (i, (what, truth)) in [("calls", calls), ("bytes", bytes)].into_iter().enumerate() {
            let n = reps as f64;
            let mean = runs.iter().map(|r| r[i].0).sum::<f64>() / n;
            let spread = runs.iter().map(|r| (r[i].0 - mean).powi(2)).sum::<f64>() / (n - 1.0);
            let stated = runs.iter().map(|r| r[i].1).sum::<f64>() / n;
            let z = (mean - truth) / (spread / n).sqrt();
            assert!(z.abs() < 3.5, "{what}: mean {mean} vs {truth} (z = {z:.2})");
            let ratio = spread / stated;
            assert!(
                (0.8..1.25).contains(&ratio),
                "{what}: variance {spread} vs {stated}"
            );
        }
    }
}
