//! Heap consumption and RSS over time, in a fixed number of buckets whatever the recording's
//! length: when an event falls past the last bucket, neighbouring buckets are merged and the
//! bucket width doubles. Memory is constant; one pass suffices (the end time need not be known).

/// Buckets kept (a power of two, so merging halves cleanly).
pub const BUCKETS: usize = 256;

/// One time slice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bucket {
    /// Highest live heap bytes reached in the slice (if any heap event fell in it).
    pub heap_max: Option<u64>,
    /// Live heap bytes after the slice's last event.
    pub heap_last: Option<u64>,
    /// Highest RSS sampled in the slice (summed over processes).
    pub rss_max: Option<u64>,
}

impl Bucket {
    fn merge(a: Bucket, b: Bucket) -> Bucket {
        Bucket {
            heap_max: a.heap_max.max(b.heap_max),
            heap_last: b.heap_last.or(a.heap_last),
            rss_max: a.rss_max.max(b.rss_max),
        }
    }
}

/// The series.
#[derive(Debug, Clone)]
pub struct Timeline {
    /// Time of the first bucket's start (the recording's start, on the board's clock).
    pub start: u64,
    /// Bucket width in nanoseconds.
    pub width: u64,
    buckets: Vec<Bucket>,
}

impl Timeline {
    /// An empty series starting at `start`, with 1 ms buckets until events force wider ones.
    pub fn new(start: u64) -> Timeline {
        Timeline {
            start,
            width: 1_000_000,
            buckets: vec![Bucket::default(); BUCKETS],
        }
    }

    fn bucket(&mut self, time: u64) -> &mut Bucket {
        let offset = time.saturating_sub(self.start);
        while offset / self.width >= BUCKETS as u64 {
            let merged: Vec<Bucket> = self
                .buckets
                .chunks(2)
                .map(|c| Bucket::merge(c[0], c[1]))
                .chain(std::iter::repeat(Bucket::default()))
                .take(BUCKETS)
                .collect();
            self.buckets = merged;
            self.width = self.width.saturating_mul(2);
        }
        let i = (offset / self.width) as usize;
        &mut self.buckets[i]
    }

    /// Live heap bytes after an event at `time`.
    pub fn heap(&mut self, time: u64, live: u64) {
        let b = self.bucket(time);
        b.heap_max = b.heap_max.max(Some(live));
        b.heap_last = Some(live);
    }

    /// Total RSS of the recorded processes at `time`.
    pub fn rss(&mut self, time: u64, bytes: u64) {
        let b = self.bucket(time);
        b.rss_max = b.rss_max.max(Some(bytes));
    }

    /// The buckets up to `end` (at least one), with gaps filled: a slice without heap events
    /// holds the level the previous one ended at.
    pub fn filled(&self, end: u64) -> Vec<Bucket> {
        self.filled_within(0, end).1
    }

    /// [`Timeline::filled`] from the bucket holding `from` on (a time window's chart starts
    /// and ends with it), with the board time that first bucket starts at.
    pub fn filled_within(&self, from: u64, end: u64) -> (u64, Vec<Bucket>) {
        let mut all = self.filled_to(end);
        let first = ((from.saturating_sub(self.start) / self.width) as usize).min(all.len() - 1);
        all.drain(..first);
        let first_start = self
            .start
            .saturating_add((first as u64).saturating_mul(self.width));
        (first_start, all)
    }

    fn filled_to(&self, end: u64) -> Vec<Bucket> {
        let n = (end.saturating_sub(self.start) / self.width + 1).min(BUCKETS as u64) as usize;
        let last_used = self
            .buckets
            .iter()
            .rposition(|b| b.heap_last.is_some() || b.rss_max.is_some())
            .map_or(1, |i| i + 1);
        let n = n.max(last_used);
        let mut out = Vec::with_capacity(n);
        let (mut level, mut rss) = (None, None);
        for b in &self.buckets[..n] {
            let heap_max = b.heap_max.max(level);
            level = b.heap_last.or(level);
            rss = b.rss_max.or(rss);
            out.push(Bucket {
                heap_max,
                heap_last: level,
                rss_max: rss,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widens_instead_of_growing() {
        let mut t = Timeline::new(1000);
        t.heap(1000, 5);
        t.heap(1000 + 3_000_000_000, 7); // 3 s at 1 ms buckets: must widen
        assert!(t.width >= 3_000_000_000 / BUCKETS as u64);
        let f = t.filled(1000 + 3_000_000_000);
        assert!(f.len() <= BUCKETS);
        assert_eq!(f[0].heap_max, Some(5));
        assert_eq!(f.last().unwrap().heap_max, Some(7));
        // Gaps carry the level forward.
        assert!(f.iter().all(|b| b.heap_max.is_some()));
    }

    #[test]
    fn keeps_maxima_when_merging() {
        let mut t = Timeline::new(0);
        t.heap(0, 1);
        t.heap(1, 100);
        t.heap(2, 3);
        t.rss(5, 4096);
        for i in 0..10u64 {
            t.heap(i * 1_000_000_000, 2);
        }
        let f = t.filled(9_000_000_000);
        assert_eq!(f[0].heap_max, Some(100));
        assert_eq!(f[0].rss_max, Some(4096));
    }

    #[test]
    fn a_window_cuts_the_series_at_both_ends() {
        let mut t = Timeline::new(0);
        t.heap(3_500_000, 10);
        t.heap(5_200_000, 30);
        // 1 ms buckets: the window [3 ms, 6 ms) holds buckets 3, 4 and 5.
        let (first, f) = t.filled_within(3_000_000, 6_000_000 - 1);
        assert_eq!(first, 3_000_000);
        let last: Vec<_> = f.iter().map(|b| b.heap_last).collect();
        assert_eq!(last, vec![Some(10), Some(10), Some(30)]);
        // A window past the last bucket keeps one.
        assert_eq!(t.filled_within(u64::MAX, u64::MAX).1.len(), 1);
    }

    #[test]
    fn events_before_the_start_land_in_the_first_bucket() {
        let mut t = Timeline::new(1_000_000_000);
        t.heap(5, 9);
        assert_eq!(t.filled(0)[0].heap_max, Some(9));
        t.heap(u64::MAX, 1); // must not loop or overflow
    }
}
