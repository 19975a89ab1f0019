//! Joining a call chain the stack copy cut short to a complete chain of the same thread, as
//! Android's simpleperf does (its `CallChainJoiner`).
//!
//! A thread that runs deeper than the copy a sample takes (`rec --call-graph dwarf=SIZE`)
//! loses its outer frames; GStreamer's streaming threads do. But the same thread's earlier
//! samples, taken while it was shallower, unwound completely through the frames that stay
//! put underneath: the thread's entry, the element's loop, the pad pushes.
//!
//! The rule that makes a join safe: the two outermost frames the cut chain reached, each a
//! return address *and* the stack pointer of that frame, must appear as two consecutive frames
//! of a complete chain of the same thread in the same address space. The same return address
//! stored at the same stack address in the same thread is the same activation of that
//! function, unless the thread returned below it and made the same call again at the same
//! depth in between, in which case the frames above are those of the same call site at the
//! same depth: in practice the same callers. The frames above that pair are taken from the
//! complete chain. Joined stacks are counted, so a report shows how many it took.

use std::collections::{HashMap, VecDeque};

use crate::processes::SpaceKey;

/// Complete chains kept per thread, newest first: the outer frames of a thread change
/// slowly, so a handful of recent chains finds the match.
const KEPT_PER_THREAD: usize = 8;

/// Threads followed at once; past this many the oldest knowledge is dropped (a bound on
/// memory whatever the recording holds).
const MAX_THREADS: usize = 4096;

/// Most frames a joined chain may have (as the unwinder's own limit).
const MAX_FRAMES: usize = crossprof_unwind::MAX_FRAMES + 1;

/// One complete chain: return addresses, innermost first, and each frame's stack pointer.
#[derive(Default)]
struct Chain {
    frames: Vec<u64>,
    sps: Vec<u64>,
}

/// Recent complete chains by thread, and the joins made.
#[derive(Default)]
pub struct Joiner {
    threads: HashMap<(SpaceKey, u32), VecDeque<Chain>>,
}

impl Joiner {
    /// Keeps a complete chain of thread `tid` (frames and their stack pointers, innermost
    /// first) for later joins.
    pub fn remember(&mut self, space: SpaceKey, tid: u32, frames: &[u64], sps: &[u64]) {
        if frames.len() != sps.len() || frames.len() < 2 {
            return;
        }
        if self.threads.len() >= MAX_THREADS && !self.threads.contains_key(&(space, tid)) {
            self.threads.clear();
        }
        let kept = self.threads.entry((space, tid)).or_default();
        // Once a thread has its fill, the oldest chain's buffers take the new one: a steady
        // recording allocates nothing here per sample.
        let mut chain = if kept.len() >= KEPT_PER_THREAD {
            kept.pop_back().unwrap_or_default()
        } else {
            Chain::default()
        };
        chain.frames.clear();
        chain.frames.extend_from_slice(frames);
        chain.sps.clear();
        chain.sps.extend_from_slice(sps);
        kept.push_front(chain);
    }

    /// Completes `frames` (a chain of thread `tid` the stack copy cut short, with its
    /// frames' stack pointers `sps`) from a remembered complete chain, by the rule in the
    /// module doc, extending both. Returns whether it did. A joined chain is complete and may
    /// be remembered in turn: a thread descending deeper than the copy is joined level by
    /// level, as long as its samples are less than a copy apart.
    pub fn join(
        &self,
        space: SpaceKey,
        tid: u32,
        frames: &mut Vec<u64>,
        sps: &mut Vec<u64>,
    ) -> bool {
        let n = frames.len();
        if n < 2 || sps.len() != n {
            return false;
        }
        let (outer, next) = ((frames[n - 1], sps[n - 1]), (frames[n - 2], sps[n - 2]));
        let Some(kept) = self.threads.get(&(space, tid)) else {
            return false;
        };
        for c in kept {
            let found = (1..c.frames.len()).find(|&j| {
                (c.frames[j], c.sps[j]) == outer && (c.frames[j - 1], c.sps[j - 1]) == next
            });
            if let Some(j) = found {
                let room = MAX_FRAMES.saturating_sub(n);
                frames.extend(c.frames[j + 1..].iter().take(room));
                sps.extend(c.sps[j + 1..].iter().take(room));
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPACE: SpaceKey = (1, 0);

    #[test]
    fn a_cut_chain_takes_the_outer_frames_of_a_matching_complete_one() {
        let mut j = Joiner::default();
        // leaf, b, a, main, _start at growing stack pointers.
        j.remember(
            SPACE,
            7,
            &[0x10, 0x20, 0x30, 0x40, 0x50],
            &[100, 200, 300, 400, 500],
        );
        // A deeper sample cut at "a" (0x30 at sp 300) after "b" (0x20 at 200).
        let mut cut = vec![0x11, 0x99, 0x20, 0x30];
        let mut sps = vec![50, 90, 200, 300];
        assert!(j.join(SPACE, 7, &mut cut, &mut sps));
        assert_eq!(cut, [0x11, 0x99, 0x20, 0x30, 0x40, 0x50]);
        assert_eq!(sps, [50, 90, 200, 300, 400, 500]);
    }

    #[test]
    fn no_join_without_the_same_two_frames_at_the_same_stack_addresses() {
        let mut j = Joiner::default();
        j.remember(SPACE, 7, &[0x10, 0x20, 0x30, 0x40], &[100, 200, 300, 400]);
        let cases: [(&[u64], &[u64], u32); 4] = [
            (&[0x11, 0x20, 0x30], &[50, 200, 310], 7), // a's stack pointer differs
            (&[0x11, 0x21, 0x30], &[50, 200, 300], 7), // the frame below a differs
            (&[0x11, 0x20, 0x30], &[50, 200, 300], 8), // another thread
            (&[0x30], &[300], 7),                      // one frame says too little
        ];
        for (frames, sps, tid) in cases {
            let mut f = frames.to_vec();
            let mut s = sps.to_vec();
            assert!(
                !j.join(SPACE, tid, &mut f, &mut s),
                "{frames:x?} {sps:?} {tid}"
            );
            assert_eq!(f, frames);
        }
    }
}
