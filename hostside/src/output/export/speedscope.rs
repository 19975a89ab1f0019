//! speedscope's JSON file format (<https://www.speedscope.app/file-format-schema.json>): one
//! file that speedscope.app, or its offline build, opens as it is.
//!
//! CPU recordings become one "sampled" profile per thread, samples in time order, each weighed
//! by its period (nanoseconds for the clock events), so speedscope's time-order view is the
//! thread's timeline. Heap recordings become one "sampled" profile per cost type (allocations,
//! temporary allocations, bytes allocated, bytes at the peak, leaked bytes), one sample per
//! distinct allocating stack.

use std::collections::HashMap;
use std::io::Write;

use anyhow::Result;
use serde::Serialize;

use crate::analysis::heap::HeapProfile;
use crate::frames::{FrameId, FrameTable};
use crate::output::context::ReportContext;
use crate::output::export::Sampled;

/// The URL speedscope recognises its own files by.
pub const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

/// A speedscope file.
#[derive(Serialize)]
pub struct File {
    /// Always [`SCHEMA`].
    #[serde(rename = "$schema")]
    pub schema: &'static str,
    /// Frames shared by all profiles.
    pub shared: Shared,
    /// The profiles (threads, or heap cost types).
    pub profiles: Vec<Profile>,
    /// Title.
    pub name: String,
    /// Which profile opens first.
    #[serde(rename = "activeProfileIndex")]
    pub active_profile_index: usize,
    /// Who wrote the file.
    pub exporter: String,
}

/// The frame list.
#[derive(Serialize)]
pub struct Shared {
    /// Frames, referred to by index.
    pub frames: Vec<Frame>,
}

/// One frame.
#[derive(Serialize)]
pub struct Frame {
    /// Function name.
    pub name: String,
    /// Source file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Source line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

/// A "sampled" profile.
#[derive(Serialize)]
pub struct Profile {
    /// Always `sampled`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Thread or cost type.
    pub name: String,
    /// `nanoseconds`, `bytes` or `none`.
    pub unit: &'static str,
    /// Start of the value range.
    #[serde(rename = "startValue")]
    pub start_value: u64,
    /// End of the value range (the sum of the weights).
    #[serde(rename = "endValue")]
    pub end_value: u64,
    /// Stacks as frame indices, outermost first.
    pub samples: Vec<Vec<usize>>,
    /// One weight per sample.
    pub weights: Vec<u64>,
}

/// Frame indices in the file. speedscope merges frames by name, file and line, so a frame
/// here is a function (name and file, no line): a function sampled at several lines is one
/// row in its sandwich view, as in `hostside report`.
struct Frames<'a> {
    table: &'a FrameTable,
    index: HashMap<FrameId, usize>,
    by_function: HashMap<(String, Option<String>), usize>,
    frames: Vec<Frame>,
}

impl Frames<'_> {
    fn stack(&mut self, innermost_first: &[FrameId]) -> Vec<usize> {
        innermost_first
            .iter()
            .rev()
            .map(|&id| {
                if let Some(&i) = self.index.get(&id) {
                    return i;
                }
                let f = self.table.get(id);
                let next = self.frames.len();
                let i = *self
                    .by_function
                    .entry((f.function.clone(), f.file.clone()))
                    .or_insert(next);
                if i == next {
                    self.frames.push(Frame {
                        name: f.function.clone(),
                        file: f.file.clone(),
                        line: None,
                    });
                }
                self.index.insert(id, i);
                i
            })
            .collect()
    }
}

fn file(ctx: &ReportContext, what: &str, frames: Frames<'_>, profiles: Vec<Profile>) -> File {
    File {
        schema: SCHEMA,
        shared: Shared {
            frames: frames.frames,
        },
        profiles,
        name: format!("{what}: {}", ctx.header.command.join(" ")),
        active_profile_index: 0,
        exporter: format!("crossprof hostside {}", env!("CARGO_PKG_VERSION")),
    }
}

/// CPU samples (or off-CPU waits), one profile per thread (most sampled first).
pub fn cpu(ctx: &ReportContext, sampled: Sampled<'_>) -> File {
    let cpu = sampled.profile;
    let mut frames = Frames {
        table: &cpu.table,
        index: HashMap::new(),
        by_function: HashMap::new(),
        frames: Vec::new(),
    };
    let time_event = sampled.off_cpu || sampled.time_event(ctx);
    let mut stacks: Vec<Option<Vec<usize>>> = (0..cpu.stacks.len()).map(|_| None).collect();
    let mut per_thread: HashMap<(u32, u32), Profile> = HashMap::new();
    for s in &cpu.timeline {
        let st = &cpu.stacks[s.stack as usize];
        let stack = stacks[s.stack as usize]
            .get_or_insert_with(|| frames.stack(&st.frames))
            .clone();
        let p = per_thread
            .entry((st.pid, st.tid))
            .or_insert_with(|| Profile {
                kind: "sampled",
                name: format!("{} (pid {}, tid {})", ctx.names.get(st.tid), st.pid, st.tid),
                unit: if time_event { "nanoseconds" } else { "none" },
                start_value: 0,
                end_value: 0,
                samples: Vec::new(),
                weights: Vec::new(),
            });
        let w = if time_event { s.period.max(1) } else { 1 };
        p.samples.push(stack);
        p.weights.push(w);
        p.end_value = p.end_value.saturating_add(w);
    }
    let mut profiles: Vec<Profile> = Vec::new();
    for t in &cpu.threads {
        if let Some(p) = per_thread.remove(&(t.pid, t.tid)) {
            profiles.push(p);
        }
    }
    let what = if sampled.off_cpu { "off-CPU" } else { "CPU" };
    file(ctx, what, frames, profiles)
}

/// The heap analysis, one profile per cost type.
pub fn heap(ctx: &ReportContext, p: &HeapProfile) -> File {
    let mut frames = Frames {
        table: &p.table,
        index: HashMap::new(),
        by_function: HashMap::new(),
        frames: Vec::new(),
    };
    let stacks: Vec<Vec<usize>> = p.traces.iter().map(|t| frames.stack(&t.frames)).collect();
    type Pick = fn(&crate::analysis::heap::HeapCounts) -> u64;
    let kinds: [(&str, &'static str, Pick); 5] = [
        ("allocations", "none", |c| c.allocations),
        ("temporary allocations", "none", |c| c.temporary),
        ("bytes allocated", "bytes", |c| c.allocated_bytes),
        ("bytes at the heap's peak", "bytes", |c| c.at_peak_bytes),
        ("leaked bytes", "bytes", |c| c.leaked_bytes),
    ];
    let profiles = kinds
        .iter()
        .map(|&(name, unit, pick)| {
            let mut prof = Profile {
                kind: "sampled",
                name: name.to_string(),
                unit,
                start_value: 0,
                end_value: 0,
                samples: Vec::new(),
                weights: Vec::new(),
            };
            for (t, stack) in p.traces.iter().zip(&stacks) {
                let w = pick(&t.counts);
                if w > 0 {
                    prof.samples.push(stack.clone());
                    prof.weights.push(w);
                    prof.end_value = prof.end_value.saturating_add(w);
                }
            }
            prof
        })
        .collect();
    file(ctx, "heap", frames, profiles)
}

/// Writes the file as JSON.
pub fn write(f: &File, out: &mut dyn Write) -> Result<()> {
    serde_json::to_writer(out, f)?;
    Ok(())
}
