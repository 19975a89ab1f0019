//! The summing up of the heap analysis after its pass ([`crate::analysis::heap::stream`]):
//! traces and sites with their counts, leaks (with heaptrack's suppressions), the largest
//! allocations and the timeline, in a deterministic order.

use std::cmp::Reverse;
use std::collections::HashMap;

use crate::analysis::cpu::StackAddress;
use crate::analysis::heap::mapped::MappingCounts;
use crate::analysis::heap::sampled::{Estimate, Sampled};
use crate::analysis::heap::stream::{unknown_stack_frame, State};
use crate::analysis::heap::trace_tree::{TraceId, EMPTY_TRACE};
use crate::analysis::heap::{
    HeapCounts, HeapProfile, LargeAllocation, MappingRow, SiteRow, TraceRow, BUILTIN_SUPPRESSIONS,
    OPERATOR_NEW, STOP_FUNCTIONS,
};
use crate::frames::{Frame, FrameId};

impl State<'_> {
    /// Sums up: the profile.
    pub(super) fn finish(mut self) -> HeapProfile {
        // The mappings' stacks become traces before the frames of every trace are resolved.
        let (mapped, mapping_totals) = std::mem::take(&mut self.mappings).finish();
        let mapped: Vec<_> = mapped
            .into_iter()
            .map(|((space, id), c)| (space.0, self.trace(space, id), c))
            .collect();
        self.resolve_all();
        let unknown = self.table.intern(unknown_stack_frame());
        let mappings = self.mapping_rows(mapped, unknown);
        let epoch = self.epoch;
        let mut suppressed_patterns: Vec<&str> = Vec::new();
        if self.opts.suppressions {
            suppressed_patterns.extend(BUILTIN_SUPPRESSIONS);
        }

        let suppressed_nodes = self.suppressed_nodes(&suppressed_patterns);

        // Traces that allocated, in a deterministic order (by trace id: first use).
        let mut traces = Vec::new();
        let mut ests = Vec::new();
        let mut trace_row: HashMap<TraceId, usize> = HashMap::new();
        for (i, acc) in self.traces.iter().enumerate() {
            if !acc.used {
                continue;
            }
            let t = i as TraceId;
            // Recordings older than the interposer's reasons: a stack of its most frames was
            // cut.
            let cut = match self.tree.cut_short(t) {
                (Some(why), _) => Some(why),
                (None, depth) if depth >= crossprof_heap_wire::MAX_FRAMES => {
                    Some(crossprof_heap_wire::cut_short::TOO_DEEP)
                }
                (None, _) => None,
            };
            if let Some(why) = cut {
                self.anomalies
                    .cut_short_allocations
                    .add(why, acc.allocations);
            }
            let (frames, addresses) = self.display_frames(t, unknown);
            let suppressed = suppressed_nodes.get(t as usize).copied().unwrap_or(false);
            let space = self.tree.node(t).map_or((acc.pid, 0), |n| n.space);
            let at_peak = if acc.epoch == epoch {
                acc.snap
            } else {
                acc.live_bytes
            };
            let mut acc = *acc;
            if self.weights.is_some() {
                // The samples' counts give way to the estimates (bytes are weighed already).
                acc.allocations = acc.est.allocations.round() as u64;
                acc.temporary = acc.est.temporary.round() as u64;
                acc.live_count = acc.est.live.round() as u64;
                if suppressed {
                    acc.est.live = 0.0;
                    acc.est.live_var = 0.0;
                    acc.est.live_bytes_var = 0.0;
                }
            }
            ests.push(acc.est);
            let (leaked_bytes, leaked_allocations) = if suppressed {
                let t = &mut self.totals;
                t.suppressed_leaked_bytes =
                    t.suppressed_leaked_bytes.saturating_add(acc.live_bytes);
                t.suppressed_leaked_allocations += acc.live_count;
                (0, 0)
            } else {
                (acc.live_bytes, acc.live_count)
            };
            self.totals.leaked_bytes = self.totals.leaked_bytes.saturating_add(leaked_bytes);
            self.totals.leaked_allocations += leaked_allocations;
            trace_row.insert(t, traces.len());
            traces.push(TraceRow {
                pid: acc.pid,
                site: acc.site as usize,
                frames,
                addresses,
                space,
                counts: HeapCounts {
                    allocations: acc.allocations,
                    temporary: acc.temporary,
                    allocated_bytes: acc.allocated,
                    peak_bytes: 0,
                    at_peak_bytes: at_peak,
                    leaked_bytes,
                    leaked_allocations,
                },
                suppressed,
            });
        }

        // Sites: sums over their traces, own maximum from the stream.
        let mut sites: Vec<SiteRow> = self
            .sites
            .iter()
            .map(|s| SiteRow {
                frame: s.frame,
                counts: HeapCounts {
                    peak_bytes: s.max,
                    ..HeapCounts::default()
                },
                traces: Vec::new(),
                call_offsets: {
                    let mut o = s.call_offsets.clone();
                    o.sort_unstable();
                    o
                },
                stderr: None,
            })
            .collect();
        let mut site_est = vec![Estimate::default(); sites.len()];
        let mut total_est = Estimate::default();
        for (tr, e) in traces.iter().zip(&ests) {
            site_est[tr.site].add(e);
            total_est.add(e);
        }
        let sampled = self.weights.map(|w| {
            for (s, e) in sites.iter_mut().zip(&site_est) {
                s.stderr = Some(e.stderr());
            }
            let samples = self.totals.allocations;
            let t = &mut self.totals;
            t.allocations = total_est.allocations.round() as u64;
            t.temporary = total_est.temporary.round() as u64;
            Sampled {
                mean_bytes: w.mean as u64,
                samples,
                totals: total_est.stderr(),
            }
        });
        for (i, tr) in traces.iter().enumerate() {
            let s = &mut sites[tr.site];
            s.counts.allocations += tr.counts.allocations;
            s.counts.temporary += tr.counts.temporary;
            s.counts.allocated_bytes = s
                .counts
                .allocated_bytes
                .saturating_add(tr.counts.allocated_bytes);
            s.counts.at_peak_bytes = s
                .counts
                .at_peak_bytes
                .saturating_add(tr.counts.at_peak_bytes);
            s.counts.leaked_bytes = s.counts.leaked_bytes.saturating_add(tr.counts.leaked_bytes);
            s.counts.leaked_allocations += tr.counts.leaked_allocations;
            s.traces.push(i);
        }
        for s in &mut sites {
            s.traces.sort_by(|&a, &b| {
                traces[b]
                    .counts
                    .allocations
                    .cmp(&traces[a].counts.allocations)
                    .then(a.cmp(&b))
            });
        }
        // Sort sites, then renumber the traces' site indices.
        let mut order: Vec<usize> = (0..sites.len()).collect();
        let table = &self.table;
        order.sort_by(|&a, &b| {
            let (x, y) = (&sites[a].counts, &sites[b].counts);
            y.allocations
                .cmp(&x.allocations)
                .then(y.leaked_bytes.cmp(&x.leaked_bytes))
                .then(y.peak_bytes.cmp(&x.peak_bytes))
                .then_with(|| {
                    frame_key(table.get(sites[a].frame)).cmp(&frame_key(table.get(sites[b].frame)))
                })
        });
        let mut new_index = vec![0; sites.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new;
        }
        let mut slots: Vec<Option<SiteRow>> = sites.into_iter().map(Some).collect();
        let sites: Vec<SiteRow> = order.iter().filter_map(|&o| slots[o].take()).collect();
        for tr in &mut traces {
            tr.site = new_index[tr.site];
        }

        let mut largest: Vec<LargeAllocation> = self
            .largest
            .into_sorted_vec()
            .into_iter()
            .filter_map(|Reverse((size, _, time, pid, t))| {
                Some(LargeAllocation {
                    size,
                    time,
                    pid,
                    trace: *trace_row.get(&t)?,
                })
            })
            .collect();
        largest.truncate(self.opts.largest);

        let end_time = self.end_time.unwrap_or(self.last_time);
        let address_spaces = self.spaces.len() as u64;
        let mut anomalies = self.anomalies;
        anomalies.tree = self.tree.anomalies;
        // A window's series starts and ends with it: past its end its blocks are neither
        // freed nor counted, and would stay flat to the recording's end.
        let w = &self.opts.window;
        let (timeline_start, timeline) = self
            .timeline
            .filled_within(w.lo, end_time.min(w.hi.saturating_sub(1)));
        let events = self
            .log
            .take()
            .map(|log| log.finish(|t| trace_row.get(&t).copied()));
        let slices = self
            .slices
            .take()
            .map(|log| log.cells(|t| trace_row.get(&t).copied()))
            .unwrap_or_default();
        HeapProfile {
            mappings,
            mapping_totals,
            rss_split: std::mem::take(&mut self.rss_split).finish(),
            slices,
            timeline,
            timeline_start,
            timeline_width: self.timeline.width,
            table: self.table,
            totals: self.totals,
            sites,
            traces,
            largest,
            end_time,
            lost_events: self.lost,
            address_spaces,
            anomalies,
            frees_outside: self.frees_outside,
            events,
            sampled,
        }
    }

    /// The mappings' rows: each stack's frames.
    fn mapping_rows(
        &self,
        mapped: Vec<(u32, TraceId, MappingCounts)>,
        unknown: FrameId,
    ) -> Vec<MappingRow> {
        mapped
            .into_iter()
            .map(|(pid, t, counts)| MappingRow {
                pid,
                frames: if t == EMPTY_TRACE {
                    vec![unknown]
                } else {
                    self.display_frames(t, unknown).0
                },
                counts,
            })
            .collect()
    }

    /// The frames of trace node `id` (its inlined frames), none when unresolved.
    fn resolved_frames(&self, id: TraceId) -> &[FrameId] {
        self.node_frames
            .get(id as usize)
            .and_then(|f| f.as_deref())
            .unwrap_or(&[])
    }

    /// For every trace id, whether a suppression pattern matches a frame anywhere on its
    /// full stack. One pass over the tree's nodes (parents have smaller ids than their
    /// children, so a node inherits its parent's answer), each distinct frame matched once:
    /// C++ stacks are deep and share their outer frames, and matching every trace's whole
    /// chain took a tenth of the report of protoc's 7.4 M allocations.
    fn suppressed_nodes(&self, patterns: &[&str]) -> Vec<bool> {
        let nodes = self.tree.nodes();
        let mut flags = vec![false; nodes.len() + 1];
        if patterns.is_empty() {
            return flags;
        }
        let mut by_frame: HashMap<FrameId, bool> = HashMap::new();
        for (i, node) in nodes.iter().enumerate() {
            let id = i as TraceId + 1;
            let inherited = flags.get(node.parent as usize).copied().unwrap_or(false);
            flags[id as usize] = inherited
                || self.resolved_frames(id).iter().any(|&f| {
                    *by_frame.entry(f).or_insert_with(|| {
                        let fr = self.table.get(f);
                        patterns.iter().any(|p| {
                            fr.function.contains(p)
                                || fr.module.contains(p)
                                || fr.file.as_deref().is_some_and(|file| file.contains(p))
                        })
                    })
                });
        }
        flags
    }

    /// The frames shown for a trace (from its site outward, up to a stop function) and the
    /// return addresses they came from.
    fn display_frames(&self, t: TraceId, unknown: FrameId) -> (Vec<FrameId>, Vec<StackAddress>) {
        let frames_of = |id: TraceId| self.resolved_frames(id);
        let chain: Vec<TraceId> = self.tree.chain(t).map(|(id, _)| id).collect();
        let skip = chain
            .iter()
            .position(|&id| {
                !frames_of(id)
                    .first()
                    .is_some_and(|&f| OPERATOR_NEW.contains(&self.table.get(f).function.as_str()))
            })
            .unwrap_or(chain.len());
        let mut out = Vec::new();
        let mut addresses = Vec::new();
        for &id in &chain[skip..] {
            let fs = frames_of(id);
            out.extend_from_slice(fs);
            if let (Some(n), false) = (self.tree.node(id), fs.is_empty()) {
                addresses.push(StackAddress {
                    addr: n.ip,
                    lookup: n.ip.saturating_sub(1),
                    frames: fs.len() as u32,
                    kernel: false,
                });
            }
            if fs
                .iter()
                .any(|&f| STOP_FUNCTIONS.contains(&self.table.get(f).function.as_str()))
            {
                break;
            }
        }
        if out.is_empty() {
            out.push(unknown);
            addresses.clear();
        }
        (out, addresses)
    }
}

fn frame_key(f: &Frame) -> (&str, Option<&str>, Option<u32>, &str) {
    (&f.function, f.file.as_deref(), f.line, &f.module)
}
