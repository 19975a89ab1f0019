//! RSS by kind of mapping over time (`RssSplit` records of `rec --heap`), kept as recorded up
//! to [`MAX_POINTS`] per run; beyond that every other point is dropped and the interval kept
//! doubles, so a run of any length costs the same bounded memory and stays evenly covered.

use crossprof_format::RssSplit;

/// Points kept at most.
pub const MAX_POINTS: usize = 4096;

/// The points, in the order recorded.
#[derive(Debug, Default)]
pub struct SplitLog {
    points: Vec<RssSplit>,
    /// Keep one point in this many (a power of two).
    stride: u64,
    seen: u64,
}

impl SplitLog {
    /// Takes one record.
    pub fn push(&mut self, s: RssSplit) {
        let stride = self.stride.max(1);
        self.seen += 1;
        if !(self.seen - 1).is_multiple_of(stride) {
            return;
        }
        if self.points.len() >= MAX_POINTS {
            let mut i = 0;
            self.points.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.stride = stride * 2;
            if !(self.seen - 1).is_multiple_of(self.stride) {
                return;
            }
        }
        self.points.push(s);
    }

    /// The points kept.
    pub fn finish(self) -> Vec<RssSplit> {
        self.points
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_run_is_thinned_evenly() {
        let mut log = SplitLog::default();
        let n = 3 * MAX_POINTS as u64;
        for time in 0..n {
            log.push(RssSplit {
                time,
                ..RssSplit::default()
            });
        }
        let p = log.finish();
        assert!(p.len() <= MAX_POINTS && p.len() >= MAX_POINTS / 2);
        assert!(p.windows(2).all(|w| w[1].time - w[0].time == 4));
        assert_eq!(p[0].time, 0);
    }
}
