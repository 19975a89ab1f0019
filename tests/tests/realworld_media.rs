//! Issue 24: media pipelines as Debian ships them (stripped, no debug packages), recorded with
//! `rec`'s defaults beside `perf record --call-graph dwarf` in the same run and compared as
//! `crossprof_tests::perf_compare` describes: at least 95% of the samples reach the entry, no
//! frame outside a mapping, and perf's top functions within 3 points.
//!
//! - `gst-jpeg`: libjpeg-turbo's SSE2 Huffman encoder has no CFI and keeps no frame pointer
//!   (found by stack scanning), ORC's generated code lies in a deleted file (JIT code).
//! - `gst-vorbis`: the Vorbis encoder's streaming thread keeps block-sized arrays on its stack,
//!   deeper than 24 KiB (rec's default copy is 32 KiB for it).

use crossprof_tests::{perf_compare, realworld};

#[test]
fn gstreamer_jpeg_pipeline() {
    // perf's DWARF unwinding stops in the assembly: half its stacks.
    perf_compare::check_against(&realworld::installed("gst-jpeg"), None);
}

#[test]
fn gstreamer_vorbis_pipeline() {
    perf_compare::check(&realworld::installed("gst-vorbis"));
}
