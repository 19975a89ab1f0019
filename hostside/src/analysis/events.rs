//! The profile of one recorded event (`report --event NAME`): the main event's samples or a
//! secondary event's, symbolized like CPU samples, and for fault events the mapping each
//! faulting address fell in: the heap, a thread's stack, anonymous memory, or a file.
//!
//! Data mappings come from the recording's MMAP records (rec asks for them when it records a
//! fault event); an address in none of them (memory mapped before the recording started and
//! never reported) is counted as `unmapped`.

use std::collections::HashMap;

use std::path::Path;

use anyhow::{bail, Result};
use crossprof_format::{Record, Sample};

use crate::analysis::cpu::{Accumulator, CpuProfile};
use crate::processes::Processes;
use crate::resolve::Resolver;
use crate::unwinding::StackUnwinder;

/// Where a group of event addresses fell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappingHits {
    /// Process id.
    pub pid: u32,
    /// What the mapping is: `heap`, `stack`, `anonymous`, `file`, `special` (the vDSO and
    /// other kernel-named regions) or `unmapped`.
    pub kind: &'static str,
    /// The mapping's path as the board named it (`[heap]`, `//anon`, a file), empty when
    /// unmapped.
    pub name: String,
    /// First address of the mapping (0 when unmapped).
    pub start: u64,
    /// One past its last address (0 when unmapped).
    pub end: u64,
    /// Events whose address fell in it.
    pub count: u64,
}

/// One event's profile.
pub struct EventProfile {
    /// The event's name.
    pub name: String,
    /// Its samples, symbolized; counts are samples (events, for period-1 events).
    pub cpu: CpuProfile,
    /// For events with addresses: where they fell, most first. Empty otherwise.
    pub mappings: Vec<MappingHits>,
}

impl EventProfile {
    /// The profile with the name its stack diagnostics carry (see
    /// `Loaded::context`, which lists each profile's stack diagnostics).
    pub fn named(&self) -> (&'static str, &CpuProfile) {
        ("event", &self.cpu)
    }
}

/// A data mapping seen in the recording.
struct DataMap {
    time: u64,
    start: u64,
    end: u64,
    path: String,
}

/// Every mapping of the recording, data ones included, per process, in time order: where
/// fault addresses fell. Gathered as the metadata pass goes by ([`DataMaps::observe`]), so
/// that an event's analysis does not read the file for them again.
#[derive(Default)]
pub struct DataMaps {
    by_pid: HashMap<u32, Vec<DataMap>>,
}

impl DataMaps {
    /// Keeps `r` when it is a mapping.
    pub fn observe(&mut self, r: &Record) {
        if let Record::Mmap(m) = r {
            self.by_pid.entry(m.pid).or_default().push(DataMap {
                time: m.time,
                start: m.start,
                end: m.start.saturating_add(m.len),
                path: m.path.clone(),
            });
        }
    }

    /// Puts each process's mappings in time order; call once the pass is over.
    pub fn finish(&mut self) {
        for v in self.by_pid.values_mut() {
            v.sort_by_key(|m| m.time);
        }
    }
}

fn kind_of(path: &str) -> &'static str {
    match path {
        "[heap]" => "heap",
        p if p.starts_with("[stack") => "stack",
        "" => "anonymous",
        p if p.starts_with("//anon") || p.starts_with("/dev/zero") || p.starts_with("[anon") => {
            "anonymous"
        }
        p if p.starts_with('[') => "special",
        _ => "file",
    }
}

/// The events a recording with `header` sampled, main first.
pub fn recorded_events(header: &crossprof_format::Header) -> Vec<String> {
    if header.events.is_empty() {
        vec![header.event.clone()]
    } else {
        header.events.clone()
    }
}

/// One event's profile while the pass over the stacks runs: which samples are the event's
/// ([`EventBuilder::take`], which also places their addresses), and their stacks
/// ([`EventBuilder::stacks`]).
pub struct EventBuilder {
    name: String,
    index: u32,
    maps: DataMaps,
    hits: HashMap<(u32, usize), u64>,
    unmapped: HashMap<u32, u64>,
    /// The event's samples' stacks.
    pub stacks: Accumulator,
}

impl EventBuilder {
    /// For the event called `name` of a recording with `header` (`path` names it in the
    /// error), placing addresses in `maps`; an event the recording did not sample is an error
    /// that lists those it did.
    pub fn new(
        header: &crossprof_format::Header,
        path: &Path,
        name: &str,
        maps: DataMaps,
    ) -> Result<EventBuilder> {
        let events = recorded_events(header);
        let Some(index) = events.iter().position(|e| e == name) else {
            bail!(
                "{} holds no {name} samples; it recorded: {} (record with `rec -e {name}`)",
                path.display(),
                events.join(", ")
            );
        };
        Ok(EventBuilder {
            name: name.to_string(),
            index: index as u32,
            maps,
            hits: HashMap::new(),
            unmapped: HashMap::new(),
            stacks: Accumulator::new(false),
        })
    }

    /// Whether `s`, a sample of the main event (`event` `None`) or of the secondary event
    /// `event`, already inside the analysed window, is this event's; if so its address is placed in
    /// its mapping.
    pub fn take(&mut self, s: &Sample, event: Option<u32>) -> bool {
        if event.unwrap_or(0) != self.index {
            return false;
        }
        if s.addr != 0 {
            // The latest mapping made before the event that holds the address.
            let found = self.maps.by_pid.get(&s.pid).and_then(|v| {
                v.iter()
                    .enumerate()
                    .rev()
                    .find(|(_, m)| m.time <= s.time && m.start <= s.addr && s.addr < m.end)
                    .map(|(i, _)| i)
            });
            match found {
                Some(i) => *self.hits.entry((s.pid, i)).or_default() += 1,
                None => *self.unmapped.entry(s.pid).or_default() += 1,
            }
        }
        true
    }

    /// The profile, once the pass is over.
    pub fn finish(
        self,
        processes: &Processes,
        resolver: &Resolver,
        unwinder: &StackUnwinder<'_>,
    ) -> EventProfile {
        let maps = &self.maps.by_pid;
        let mut mappings: Vec<MappingHits> = self
            .hits
            .into_iter()
            .filter_map(|((pid, i), count)| {
                let m = maps.get(&pid)?.get(i)?;
                Some(MappingHits {
                    pid,
                    kind: kind_of(&m.path),
                    name: m.path.clone(),
                    start: m.start,
                    end: m.end,
                    count,
                })
            })
            .collect();
        mappings.extend(self.unmapped.into_iter().map(|(pid, count)| MappingHits {
            pid,
            kind: "unmapped",
            name: String::new(),
            start: 0,
            end: 0,
            count,
        }));
        // Every field decides a tie: rows of equal count came out of a hash map in any order.
        mappings.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then(a.pid.cmp(&b.pid))
                .then(a.start.cmp(&b.start))
                .then(a.end.cmp(&b.end))
                .then(a.kind.cmp(b.kind))
                .then(a.name.cmp(&b.name))
        });
        EventProfile {
            name: self.name,
            cpu: self.stacks.finish(processes, resolver, unwinder),
            mappings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::kind_of;

    #[test]
    fn mappings_are_named_by_what_they_hold() {
        assert_eq!(kind_of("[heap]"), "heap");
        assert_eq!(kind_of("[stack]"), "stack");
        assert_eq!(kind_of("[stack:1234]"), "stack");
        assert_eq!(kind_of("//anon"), "anonymous");
        assert_eq!(kind_of(""), "anonymous");
        assert_eq!(kind_of("[vdso]"), "special");
        assert_eq!(kind_of("/usr/lib/libc.so.6"), "file");
    }
}
