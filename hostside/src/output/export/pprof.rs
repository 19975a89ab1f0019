//! pprof's gzip'd `profile.proto`: what `go tool pprof`, Pyroscope and Parca read.
//!
//! The message types are generated at build time from the vendored `hostside/proto/profile.proto`
//! (see `build.rs`). CPU profiles carry two values per sample, the sample count and the summed
//! period (CPU nanoseconds for `cpu-clock`/`task-clock`); heap profiles carry Go's four
//! (`alloc_objects`, `alloc_space`, `inuse_objects`, `inuse_space`, "in use" meaning still live
//! when the recording ended, suppressed leaks excluded, as `report --heap` counts them) plus
//! `temp_objects` and `peak_space` (bytes live at the heap's peak).
//!
//! Every location is symbolized (functions, file:line, inlined frames as extra lines), and
//! keeps its address (a sampled instruction, or a return address minus one) inside a mapping
//! with the module's path and build-id, CPU and heap stacks alike, so that Pyroscope or Parca
//! can re-symbolize them against their own debug info.

use std::collections::HashMap;
use std::io::Write;

use anyhow::Result;
use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;

use crate::analysis::cpu::StackAddress;
use crate::analysis::heap::HeapProfile;
use crate::frames::{FrameId, FrameTable};
use crate::output::context::ReportContext;
use crate::output::export::Sampled;
use crate::output::info::hex;
use crate::processes::{MappingView, Mappings};
use crate::resolve::KERNEL_MODULE;

/// The generated message types of `profile.proto` (package `perftools.profiles`).
#[allow(missing_docs, clippy::all)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/perftools.profiles.rs"));
}

/// Builds a profile: interns strings, functions, locations and mappings.
struct Builder<'a> {
    profile: proto::Profile,
    table: &'a FrameTable,
    strings: HashMap<String, i64>,
    functions: HashMap<(String, Option<String>), u64>,
    /// (mapping id, address, the location's frames) → location id.
    locations: HashMap<(u64, u64, Vec<FrameId>), u64>,
    /// (start, end, file offset, module) → mapping id.
    mappings: HashMap<(u64, u64, u64, usize), u64>,
    /// Module path → mapping id, for locations without an address (heap stacks, kernel).
    module_mappings: HashMap<String, u64>,
}

impl<'a> Builder<'a> {
    fn new(table: &'a FrameTable) -> Builder<'a> {
        let mut b = Builder {
            profile: proto::Profile::default(),
            table,
            strings: HashMap::new(),
            functions: HashMap::new(),
            locations: HashMap::new(),
            mappings: HashMap::new(),
            module_mappings: HashMap::new(),
        };
        b.string("");
        b
    }

    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.profile.string_table.len() as i64;
        self.profile.string_table.push(s.to_string());
        self.strings.insert(s.to_string(), i);
        i
    }

    fn value_type(&mut self, ty: &str, unit: &str) -> proto::ValueType {
        proto::ValueType {
            r#type: self.string(ty),
            unit: self.string(unit),
        }
    }

    fn function(&mut self, id: FrameId) -> u64 {
        let f = self.table.get(id);
        let key = (f.function.clone(), f.file.clone());
        if let Some(&i) = self.functions.get(&key) {
            return i;
        }
        let fid = self.profile.function.len() as u64 + 1;
        let name = self.string(&f.function);
        let filename = self.string(f.file.as_deref().unwrap_or(""));
        self.profile.function.push(proto::Function {
            id: fid,
            name,
            system_name: name,
            filename,
            start_line: 0,
        });
        self.functions.insert(key, fid);
        fid
    }

    /// A location holding `frames` (innermost first: pprof's order of inlined lines).
    fn location(&mut self, mapping_id: u64, address: u64, frames: &[FrameId]) -> u64 {
        let key = (mapping_id, address, frames.to_vec());
        if let Some(&i) = self.locations.get(&key) {
            return i;
        }
        let lid = self.profile.location.len() as u64 + 1;
        let line = frames
            .iter()
            .map(|&f| proto::Line {
                function_id: self.function(f),
                line: self.table.get(f).line.map_or(0, i64::from),
                column: 0,
            })
            .collect();
        self.profile.location.push(proto::Location {
            id: lid,
            mapping_id,
            address,
            line,
            is_folded: false,
        });
        self.locations.insert(key, lid);
        lid
    }

    fn mapping(&mut self, maps: &Mappings, m: &MappingView) -> u64 {
        let key = (m.start, m.end, m.pgoff, m.module);
        if let Some(&i) = self.mappings.get(&key) {
            return i;
        }
        let Some(module) = maps.module(m) else {
            return 0;
        };
        let id = self.push_mapping(&module.path, &module.build_id, m.start, m.end, m.pgoff);
        self.mappings.insert(key, id);
        id
    }

    /// A mapping without an address range, for frames whose addresses are not kept.
    fn module_mapping(&mut self, maps: &Mappings, path: &str) -> u64 {
        if let Some(&i) = self.module_mappings.get(path) {
            return i;
        }
        let build_id = maps
            .modules
            .iter()
            .find(|m| m.path == path)
            .map(|m| m.build_id.clone())
            .unwrap_or_default();
        let id = self.push_mapping(path, &build_id, 0, 0, 0);
        self.module_mappings.insert(path.to_string(), id);
        id
    }

    fn push_mapping(
        &mut self,
        path: &str,
        build_id: &[u8],
        start: u64,
        end: u64,
        pgoff: u64,
    ) -> u64 {
        let id = self.profile.mapping.len() as u64 + 1;
        let filename = self.string(path);
        let build_id = self.string(&hex(build_id));
        self.profile.mapping.push(proto::Mapping {
            id,
            memory_start: start,
            memory_limit: end,
            file_offset: pgoff,
            filename,
            build_id,
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
            has_inline_frames: true,
        });
        id
    }

    /// The locations of one stack: each address in the mapping that holds it (with the
    /// module's path and build-id, so a consumer can re-symbolize it), kernel addresses in
    /// the kernel's. `weight` counts the `count` per user mapping, to find the main binary.
    fn locations(
        &mut self,
        all: &Mappings,
        maps: &[MappingView],
        addresses: &[StackAddress],
        frames: &[FrameId],
        count: u64,
        weight: &mut HashMap<u64, u64>,
    ) -> Vec<u64> {
        let mut location_id = Vec::with_capacity(addresses.len());
        let mut at = 0usize;
        for a in addresses {
            let end = (at + a.frames as usize).min(frames.len());
            let frames = &frames[at..end];
            at = end;
            if frames.is_empty() {
                continue;
            }
            let mapping_id = if a.kernel {
                self.module_mapping(all, KERNEL_MODULE)
            } else {
                // The latest mapping wins where a region was mapped again, as in placing.
                match maps
                    .iter()
                    .rev()
                    .find(|m| m.start <= a.lookup && a.lookup < m.end)
                {
                    Some(m) => self.mapping(all, m),
                    None => 0,
                }
            };
            if mapping_id != 0 && !a.kernel {
                *weight.entry(mapping_id).or_default() += count;
            }
            location_id.push(self.location(mapping_id, a.lookup, frames));
        }
        location_id
    }

    fn label_num(&mut self, key: &str, num: i64) -> proto::Label {
        proto::Label {
            key: self.string(key),
            num,
            ..Default::default()
        }
    }

    fn label_str(&mut self, key: &str, value: &str) -> proto::Label {
        proto::Label {
            key: self.string(key),
            str: self.string(value),
            ..Default::default()
        }
    }

    /// Header fields shared by CPU and heap profiles.
    fn describe(&mut self, ctx: &ReportContext) {
        let h = &ctx.header;
        self.profile.time_nanos = i64::try_from(h.start_unix_ns).unwrap_or(i64::MAX);
        self.profile.duration_nanos = i64::try_from(ctx.duration_ns).unwrap_or(i64::MAX);
        let comment = format!(
            "crossprof recording of `{}` on {}",
            h.command.join(" "),
            h.arch
        );
        let c = self.string(&comment);
        self.profile.comment.push(c);
    }

    /// Puts the main binary's mapping first, as pprof expects of `mapping[0]`: the recorded
    /// command's executable when one of the mappings is it, else the module that holds the
    /// most sampled locations.
    fn finish(mut self, ctx: &ReportContext, weight: HashMap<u64, u64>) -> proto::Profile {
        let exe = ctx.header.command.first().map(|c| basename(c).to_string());
        let by_name = self.profile.mapping.iter().find(|m| {
            let name = usize::try_from(m.filename)
                .ok()
                .and_then(|i| self.profile.string_table.get(i));
            name.map(|n| basename(n)) == exe.as_deref()
        });
        let main = by_name.map(|m| m.id).or_else(|| {
            weight
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                .map(|(&id, _)| id)
        });
        if let Some(main) = main {
            let n = self.profile.mapping.len() as u64;
            // Swap ids `main` and 1 everywhere.
            let swap = |id: u64| match id {
                x if x == main => 1,
                1 => main,
                x => x,
            };
            if main != 1 && main <= n {
                for m in &mut self.profile.mapping {
                    m.id = swap(m.id);
                }
                for loc in &mut self.profile.location {
                    if loc.mapping_id != 0 {
                        loc.mapping_id = swap(loc.mapping_id);
                    }
                }
                self.profile.mapping.sort_by_key(|m| m.id);
            }
        }
        self.profile
    }
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// CPU samples (or off-CPU waits) as a pprof profile: per stack the number of samples (waits)
/// and their summed period (CPU or blocked nanoseconds, or the event's count).
pub fn cpu(ctx: &ReportContext, sampled: Sampled<'_>) -> proto::Profile {
    let cpu = sampled.profile;
    let mut b = Builder::new(&cpu.table);
    let h = &ctx.header;
    let (samples_type, period_type) = if sampled.off_cpu {
        (
            b.value_type("waits", "count"),
            b.value_type("off_cpu", "nanoseconds"),
        )
    } else if sampled.time_event(ctx) {
        (
            b.value_type("samples", "count"),
            b.value_type("cpu", "nanoseconds"),
        )
    } else {
        (
            b.value_type("samples", "count"),
            b.value_type(&h.event, "count"),
        )
    };
    b.profile.sample_type = vec![samples_type, period_type];
    b.profile.period_type = Some(period_type);
    if !sampled.off_cpu && sampled.time_event(ctx) && h.sample_freq > 0 {
        b.profile.period = 1_000_000_000 / i64::from(h.sample_freq);
    }
    let per_stack = sampled.per_stack();
    b.profile.default_sample_type = period_type.r#type;
    b.describe(ctx);

    let mut weight: HashMap<u64, u64> = HashMap::new();
    let all = &ctx.mappings;
    for (s, &n) in cpu.stacks.iter().zip(&per_stack) {
        let maps = all.of(s.space);
        let location_id = b.locations(all, maps, &s.addresses, &s.frames, s.count, &mut weight);
        let labels = vec![
            b.label_num("pid", i64::from(s.pid)),
            b.label_num("tid", i64::from(s.tid)),
            b.label_str("thread", ctx.names.get(s.tid)),
        ];
        b.profile.sample.push(proto::Sample {
            location_id,
            value: vec![
                i64::try_from(n).unwrap_or(i64::MAX),
                i64::try_from(s.period).unwrap_or(i64::MAX),
            ],
            label: labels,
        });
    }
    b.finish(ctx, weight)
}

/// The heap analysis of a recording as a pprof heap profile in Go's layout.
pub fn heap(ctx: &ReportContext, p: &HeapProfile) -> proto::Profile {
    let mut b = Builder::new(&p.table);
    let types = [
        ("alloc_objects", "count"),
        ("alloc_space", "bytes"),
        ("inuse_objects", "count"),
        ("inuse_space", "bytes"),
        ("temp_objects", "count"),
        ("peak_space", "bytes"),
    ];
    b.profile.sample_type = types.iter().map(|(t, u)| b.value_type(t, u)).collect();
    b.profile.period_type = Some(b.value_type("space", "bytes"));
    b.profile.default_sample_type = b.string("inuse_space");
    b.describe(ctx);
    let mut weight: HashMap<u64, u64> = HashMap::new();
    let all = &ctx.mappings;
    for t in &p.traces {
        let c = &t.counts;
        // A stack's return addresses, each in its mapping, like CPU samples' (an unknown
        // stack has none: its one frame gets a location without an address).
        let covered = t.addresses.iter().map(|a| a.frames as usize).sum::<usize>();
        let location_id = if !t.addresses.is_empty() && covered == t.frames.len() {
            let maps = all.of(t.space);
            b.locations(
                all,
                maps,
                &t.addresses,
                &t.frames,
                c.allocations,
                &mut weight,
            )
        } else {
            t.frames
                .iter()
                .map(|&f| {
                    let module = p.table.get(f).module.clone();
                    let mapping_id = b.module_mapping(all, &module);
                    *weight.entry(mapping_id).or_default() += c.allocations;
                    b.location(mapping_id, 0, &[f])
                })
                .collect()
        };
        let value = [
            c.allocations,
            c.allocated_bytes,
            c.leaked_allocations,
            c.leaked_bytes,
            c.temporary,
            c.at_peak_bytes,
        ]
        .iter()
        .map(|&v| i64::try_from(v).unwrap_or(i64::MAX))
        .collect();
        let label = vec![b.label_num("pid", i64::from(t.pid))];
        b.profile.sample.push(proto::Sample {
            location_id,
            value,
            label,
        });
    }
    b.finish(ctx, weight)
}

/// Writes a profile gzip'd, as pprof files are stored.
pub fn write(profile: &proto::Profile, out: &mut dyn Write) -> Result<()> {
    let mut gz = GzEncoder::new(out, Compression::default());
    gz.write_all(&profile.encode_to_vec())?;
    gz.finish()?;
    Ok(())
}
