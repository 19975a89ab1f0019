//! What a reader gives back can be written again: a [`FrameWriter`] fed the records of a
//! recording writes a copy that reads back complete and undamaged.

use crossprof_format::{End, FrameWriter, Reader, Record};
use std::path::Path;

/// The records of `data`, written again and read back.
fn rewrite(data: &[u8]) -> (Vec<Record>, Vec<Record>) {
    let mut r = Reader::new(data).expect("a recording");
    let mut records = Vec::new();
    while let Some(rec) = r.next_record() {
        records.push(rec);
    }
    let mut w = FrameWriter::new(Vec::new(), r.header()).expect("writing to memory");
    for rec in &records {
        w.push(rec).expect("writing to memory");
    }
    let copy = w.finish(End::default()).expect("writing to memory");
    let mut again = Reader::new(&copy).expect("the copy is a recording");
    let mut back = Vec::new();
    while let Some(rec) = again.next_record() {
        back.push(rec);
    }
    let s = again.summary();
    assert!(
        s.complete && s.damage.is_none() && s.bytes_discarded == 0,
        "{s:?}"
    );
    (records, back)
}

/// Found by the `reader` fuzz target: a heap batch whose carry start (a `rec --max-size`
/// segment's live set) reads as `Record::Unknown(HEAP_EVENTS)`. Written again as a heap batch
/// with no payload, it made the copy damaged; the writer now leaves unknown records out.
#[test]
fn reader_crash_757e442f_carry_start_is_not_written_back() {
    let input = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/reader-crash-757e442f"),
    )
    .expect("the checked-in input");
    // The fuzz target's convention: an odd first byte means "the rest is a frame's content".
    assert_eq!(input[0] & 1, 1);
    let mut c = zstd::bulk::Compressor::new(1).expect("a compressor");
    c.include_checksum(true).expect("checksums");
    c.include_contentsize(true).expect("content size");
    let data = c.compress(&input[1..]).expect("compressing to memory");
    let (records, back) = rewrite(&data);
    let unknown = records
        .iter()
        .filter(|r| matches!(r, Record::Unknown(_)))
        .count();
    // Tag 16 is a heap batch's (a carry start reads as it).
    assert!(records.contains(&Record::Unknown(16)), "no carry start");
    // Everything else comes back, followed by the writer's End.
    assert_eq!(back.len(), records.len() - unknown + 1);
    assert_eq!(back.last(), Some(&Record::End(End::default())));
}
