//! Any bytes as a recording. The reader never panics or loops, a prefix never yields more
//! records than the whole (frames are all-or-nothing), and what it reads survives a round trip:
//! written again by the frame writer and read back, the records are the same ones (heap block
//! handles aside, which the writer hands out anew, and records of unknown kind, which it does
//! not write), followed by the writer's End, and the copy
//! is complete and undamaged. [`Reader::next_item`] reads the same records as
//! [`Reader::next_record`]. The metadata and the bulk parts ([`Part`]) never panic either;
//! of an undamaged file, the bulk part reads the bulk records of the whole stream (with or
//! without the metadata pass's stubs), and the metadata part as many samples.
//!
//! An input whose first byte is odd is the content of a frame rather than a file: the rest is
//! compressed into one valid zstd frame with its checksum, so that mutations reach the record
//! decoders instead of stopping at a checksum. (A file starts with zstd's magic, whose first
//! byte, 0x28, is even.)
#![no_main]
use crossprof_format::{DecodeOptions, End, FrameWriter, Header, Part, Reader, Record, Stubs};
use libfuzzer_sys::fuzz_target;

/// The records after the header, or `None` when `data` is not a recording.
fn read(data: &[u8]) -> Option<(crossprof_format::Header, Vec<Record>)> {
    let mut r = Reader::new(data).ok()?;
    let mut records = Vec::new();
    while let Some(rec) = r.next_record() {
        records.push(rec);
    }
    let s = r.summary().clone();
    assert!(s.bytes_read + s.bytes_discarded <= data.len() as u64);
    // The heap pass's way through the same bytes hands over the same records.
    let mut items = Reader::new(data).expect("it opened once");
    let mut n = 0;
    while let Some(item) = items.next_item() {
        assert_eq!(records.get(n), Some(&item.into_record()));
        n += 1;
    }
    assert_eq!(n, records.len());
    assert_eq!(items.summary(), &s);
    let (metadata, stubs) = read_part(data, Part::Metadata, None);
    let with_stubs = read_part(data, Part::Bulk, Some(stubs)).0;
    let alone = read_part(data, Part::Bulk, None).0;
    if s.damage.is_none() {
        let bulk: Vec<Record> = records.iter().filter(|r| is_bulk(r)).cloned().collect();
        assert_eq!(with_stubs, bulk);
        assert_eq!(alone, bulk);
        let samples = |v: &[Record]| v.iter().filter(|r| is_sample(r)).count();
        assert_eq!(samples(&metadata), samples(&records));
    }
    Some((r.header().clone(), records))
}

/// The records `part` of `data` reads, and the stubs kept (a metadata pass).
fn read_part(data: &[u8], part: Part, stubs: Option<Stubs>) -> (Vec<Record>, Stubs) {
    let mut r = Reader::new(data).expect("it opened once");
    r.set_decode_options(DecodeOptions {
        part,
        ..DecodeOptions::default()
    });
    match stubs {
        Some(s) => r.use_stubs(s),
        None => r.keep_stubs(),
    }
    let mut records = Vec::new();
    while let Some(rec) = r.next_record() {
        records.push(rec);
    }
    let s = r.summary();
    assert!(s.bytes_read + s.bytes_discarded <= data.len() as u64);
    (records, r.take_stubs())
}

fn is_sample(r: &Record) -> bool {
    matches!(r, Record::Sample(_) | Record::EventSample(_))
}

fn is_bulk(r: &Record) -> bool {
    is_sample(r) || matches!(r, Record::StackNode(_) | Record::Alloc(_) | Record::Free(_))
}

/// Heap events compared without their block handles.
fn comparable(r: &Record) -> Record {
    match r {
        Record::Alloc(a) => Record::Alloc(crossprof_format::Alloc {
            addr: 0,
            ..a.clone()
        }),
        Record::Free(f) => Record::Free(crossprof_format::Free {
            addr: 0,
            ..f.clone()
        }),
        // The writer's stack filter (recorder/format/src/stack_filter.rs) replaces the
        // stack-copy words no unwinder follows: a copy keeps its length, not its bytes.
        Record::Sample(x) => Record::Sample(crossprof_format::Sample {
            stack: vec![0; x.stack.len()],
            ..x.clone()
        }),
        Record::EventSample(e) => {
            let mut e = e.clone();
            e.sample.stack = vec![0; e.sample.stack.len()];
            Record::EventSample(e)
        }
        other => other.clone(),
    }
}

fuzz_target!(|input: &[u8]| {
    let framed;
    let data = match input.first() {
        Some(b) if b & 1 == 1 => {
            let mut c = zstd::bulk::Compressor::new(1).expect("a compressor");
            c.include_checksum(true).expect("checksums");
            c.include_contentsize(true).expect("content size");
            framed = c.compress(&input[1..]).expect("compressing to memory");
            &framed[..]
        }
        _ => input,
    };
    let Some((header, records)) = read(data) else {
        return;
    };
    let half = &data[..data.len() / 2];
    assert!(read(half).map_or(0, |(_, r)| r.len()) <= records.len());

    let mut w = FrameWriter::new(Vec::new(), &header).expect("writing to memory");
    for r in &records {
        w.push(r).expect("writing to memory");
    }
    let copy = w.finish(End::default()).expect("writing to memory");
    let mut reader = Reader::new(&copy).expect("the copy is a recording");
    // Written in the writer's format version.
    assert_eq!(
        reader.header(),
        &Header {
            format_version: crossprof_format::FORMAT_VERSION,
            ..header
        }
    );
    let mut again = Vec::new();
    while let Some(r) = reader.next_record() {
        again.push(r);
    }
    let s = reader.summary();
    assert!(
        s.complete && s.bytes_discarded == 0 && s.damage.is_none(),
        "{s:?}"
    );
    assert_eq!(again.last(), Some(&Record::End(End::default())));
    again.pop();
    // The writer drops records of unknown kind: their payloads were not kept.
    let a: Vec<Record> = records
        .iter()
        .filter(|r| !matches!(r, Record::Unknown(_)))
        .map(comparable)
        .collect();
    let b: Vec<Record> = again.iter().map(comparable).collect();
    assert_eq!(a, b);
});
