//! The crossprof recording file, owned by one crate so that `rec` (the writer, on the board) and
//! `hostside` (the reader, on the developer's machine) can never drift apart.
//!
//! A recording is a sequence of independent zstd frames with content checksums. The first frame
//! starts with a [`Header`]; every frame holds a batch of [`Record`]s, the bulky ones (samples'
//! stacks, heap events) in a frame of their own beside the rest (`pairs`). The writer
//! ([`FrameWriter`]) closes and `fdatasync`s a frame at a fixed interval and never rewrites
//! anything, so any prefix of the file is readable; the reader ([`Reader`]) decodes whole frames
//! and stops at the first torn or corrupt one, reporting how many bytes it discarded.
//!
//! Numbers are LEB128 varints, so the encoding does not depend on the board's word size or
//! endianness; raw memory (stack copies, images) is interpreted with the header's
//! `big_endian` and `pointer_size`.
//!
//! ```
//! use crossprof_format::{FrameWriter, Header, Reader, Record, Sample, End};
//! let header = Header { format_version: crossprof_format::FORMAT_VERSION, arch: "x86_64".into(), ..Default::default() };
//! let mut w = FrameWriter::new(Vec::new(), &header).unwrap();
//! w.push(&Record::Sample(Sample { pid: 1, tid: 1, user_chain: vec![0x401000], ..Default::default() })).unwrap();
//! let bytes = w.finish(End::default()).unwrap();
//! let mut r = Reader::new(&bytes).unwrap();
//! assert!(matches!(r.next_record(), Some(Record::Sample(_))));
//! ```
#![deny(missing_docs)]

mod arch;
pub mod callchain;
pub mod codec;
mod heap_batch;
mod heap_decode;
mod heap_infos;
mod heap_stream;
mod int_map;
mod pairs;
pub mod perf_regs;
mod probe_map;
mod reader;
mod record;
mod segment_names;
mod stack_filter;
mod stack_nodes;
mod writer;

pub use arch::Arch;
pub use heap_stream::{HeapEvent, LiveSet, DEFAULT_LIVE_LIMIT, UNKNOWN_BLOCK};
pub use pairs::{Stubs, BULK_MAGIC, PAIRS_VERSION};
pub use perf_regs::PerfRegs;
pub use reader::{Damage, OpenError, Reader, ResumePoint, Summary};
pub use record::*;
pub use segment_names::{numbered_segments, segment_path};
pub use writer::{
    FrameCompressor, FrameWriter, Sink, HEAP_LEVEL, MAX_FRAME_CONTENT, REPEATS, SOFT_FRAME_LIMIT,
    ZSTD_LEVEL,
};

/// The format version this crate writes and the newest it reads. Version 2 added batched heap
/// events (a reader of version 1 would skip them silently, so it must refuse such files);
/// version 3 writes heap events as per-process codes without addresses (`heap_stream`);
/// version 4 writes each frame as a pair, metadata and bulk apart (`pairs`); version 5 writes
/// trace-tree nodes in runs (`stack_nodes`), which a reader of version 4 would skip silently.
pub const FORMAT_VERSION: u32 = 5;
