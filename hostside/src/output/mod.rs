//! Everything hostside prints or writes: the report (text and JSON), `info`, flame graphs and
//! exports.

pub mod annotate;
pub mod context;
pub mod diff;
pub mod event;
pub mod export;
pub mod flame;
pub mod folded;
pub mod heap_beyond;
pub mod heap_json;
pub mod heap_text;
pub mod html;
pub mod info;
pub mod json;
pub mod latency;
pub mod leak_check;
pub mod off_cpu;
pub mod off_cpu_diff;
pub mod process_table;
pub mod snapshot;
pub mod stack_usage;
pub mod syscalls;
pub mod text;
pub mod timeline;
pub mod wakers;

use std::io::{self, Write};

/// Writes `value` as the pretty-printed JSON documents of `--json` end, with a newline.
pub fn write_json(out: &mut dyn Write, value: &impl serde::Serialize) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)
}
