//! Frame pairs (format version 4): the metadata pass inflates only the records frames, the
//! pass over the bulk only the bulk frames (with the stubs the metadata pass kept), and
//! together they read every record of the stream as written, once. An older file reads the
//! same way with every frame inflated; a file cut anywhere reads as whole pairs in every part.

use crossprof_format::{
    Damage, DecodeOptions, End, EventSample, FrameCompressor, FrameWriter, Header, Mmap, Part,
    Reader, Record, Rss, Sample, StackNode, Summary, Switch, FORMAT_VERSION,
};

fn header() -> Header {
    Header {
        format_version: FORMAT_VERSION,
        arch: "x86_64".into(),
        pointer_size: 8,
        ..Default::default()
    }
}

/// A sample with chains, registers, a stack copy the writer's filter keeps as it is (zero
/// words) and a data address.
fn sample(n: u64) -> Sample {
    Sample {
        time: 1_000 + n,
        pid: 7,
        tid: 7 + (n % 2) as u32,
        cpu: (n % 4) as u32,
        period: 1_000_000,
        kernel_chain: vec![0xffff_ffff_8100_0000 + n],
        user_chain: vec![0x40_1000 + n, 0x40_2000],
        regs_mask: 1 << 7,
        regs: vec![0x7ffd_0000],
        stack: vec![0; 64 + n as usize % 3 * 8],
        addr: [0, 0x5000 + n, 0x6000 + n][n as usize % 3],
    }
}

/// What the writer is given, in order; heap events as the reader gives them back (the first
/// block of a process gets handle 1, and so on).
fn stream() -> Vec<Record> {
    let mut out = vec![Record::Mmap(Mmap {
        time: 1,
        pid: 7,
        start: 0x40_0000,
        len: 0x1_0000,
        prot: 5,
        path: "/bin/app".into(),
        ..Default::default()
    })];
    for n in 0..30u64 {
        match n % 6 {
            0 | 1 => out.push(Record::Sample(sample(n))),
            2 => out.push(Record::EventSample(EventSample {
                event: 1,
                sample: sample(n),
            })),
            3 => out.push(Record::Switch(Switch {
                time: 1_000 + n,
                pid: 7,
                tid: 7,
                cpu: 0,
                out: true,
                preempt: false,
            })),
            4 => out.push(Record::StackNode(StackNode {
                pid: 7,
                id: n,
                parent: 0,
                ip: 0x40_1000 + n,
            })),
            _ => out.push(Record::Rss(Rss {
                time: 1_000 + n,
                pid: 7,
                bytes: n << 12,
            })),
        }
    }
    out
}

/// The recording of [`stream`], a frame pair closed every 7 records, and heap events here and
/// there.
fn recording() -> Vec<u8> {
    let mut w = FrameWriter::new(Vec::new(), &header()).unwrap();
    for (i, r) in stream().iter().enumerate() {
        w.push(r).unwrap();
        if i % 11 == 3 {
            w.heap_alloc(7, 7, 2_000 + i as u64, 0x9000 + i as u64, 32, 4)
                .unwrap();
            w.heap_free(7, 7, 2_001 + i as u64, 0x9000 + i as u64)
                .unwrap();
        }
        if i % 7 == 6 {
            w.flush().unwrap();
        }
    }
    w.finish(End::default()).unwrap()
}

fn options(part: Part) -> DecodeOptions {
    DecodeOptions {
        sample_stacks: part != Part::Metadata,
        heap_events: part != Part::Metadata,
        part,
    }
}

/// Every record `part` reads of `data`, and the summary; `stubs` from a metadata pass over
/// the same data for a bulk pass.
fn read(
    data: &[u8],
    part: Part,
    stubs: Option<crossprof_format::Stubs>,
) -> (Vec<Record>, Summary, crossprof_format::Stubs) {
    let mut r = Reader::new(data).unwrap();
    r.set_decode_options(options(part));
    if part == Part::Metadata {
        r.keep_stubs();
    }
    if let Some(s) = stubs {
        r.use_stubs(s);
    }
    let mut records = Vec::new();
    while let Some(rec) = r.next_record() {
        records.push(rec);
    }
    (records, r.summary().clone(), r.take_stubs())
}

fn is_bulk(r: &Record) -> bool {
    matches!(
        r,
        Record::Sample(_)
            | Record::EventSample(_)
            | Record::StackNode(_)
            | Record::Alloc(_)
            | Record::Free(_)
    )
}

fn stub(r: &Record) -> Record {
    let bare = |s: &Sample| Sample {
        kernel_chain: Vec::new(),
        user_chain: Vec::new(),
        regs_mask: 0,
        regs: Vec::new(),
        stack: Vec::new(),
        ..s.clone()
    };
    match r {
        Record::Sample(s) => Record::Sample(bare(s)),
        Record::EventSample(e) => Record::EventSample(EventSample {
            event: e.event,
            sample: bare(&e.sample),
        }),
        other => other.clone(),
    }
}

fn samples(records: &[Record]) -> usize {
    records
        .iter()
        .filter(|r| matches!(r, Record::Sample(_) | Record::EventSample(_)))
        .count()
}

#[test]
fn each_part_inflates_only_its_own_frames_and_together_they_read_the_stream_once() {
    let data = recording();
    let (all, all_summary, _) = read(&data, Part::All, None);
    // The header's and 5 pairs (the last with the end).
    let frames = all_summary.frames;
    assert_eq!(frames, 11);
    assert_eq!(all_summary.frames_skipped, 0);
    assert!(all_summary.complete && all_summary.damage.is_none());
    // The stream as written: heap events where they were pushed, samples whole.
    let written: Vec<Record> = stream();
    let without_heap: Vec<Record> = all
        .iter()
        .filter(|r| !matches!(r, Record::Alloc(_) | Record::Free(_) | Record::End(_)))
        .cloned()
        .collect();
    assert_eq!(without_heap, written);
    let heap_events = all
        .iter()
        .filter(|r| matches!(r, Record::Alloc(_) | Record::Free(_)))
        .count();
    assert_eq!(heap_events, 6, "three allocations and their frees");

    let (metadata, m, stubs) = read(&data, Part::Metadata, None);
    let want: Vec<Record> = all
        .iter()
        .filter(|r| !is_bulk(r) || matches!(r, Record::Sample(_) | Record::EventSample(_)))
        .map(stub)
        .collect();
    assert_eq!(metadata, want, "the metadata, samples as stubs");
    assert_eq!(m.heap_records, all_summary.heap_records);
    assert!(m.heap_records > 0);
    assert!(stubs.bytes() > 0);

    let (bulk, b, _) = read(&data, Part::Bulk, Some(stubs));
    let want: Vec<Record> = all.iter().filter(|r| is_bulk(r)).cloned().collect();
    assert_eq!(bulk, want, "the bulk, samples whole");
    // The header frame is inflated by each reader's `new`; every other frame by one pass.
    assert_eq!(m.frames + b.frames - 1, frames);
    assert_eq!(m.frames_read(), frames);
    assert_eq!(b.frames_read(), frames);
    assert_eq!(m.bytes_read, data.len() as u64);

    // Without the stubs, the bulk pass inflates the records frames it needs itself.
    let (again, b2, _) = read(&data, Part::Bulk, None);
    assert_eq!(again, want);
    assert!(b2.frames > b.frames);
}

#[test]
fn a_file_cut_anywhere_reads_as_whole_pairs_in_every_part() {
    let data = recording();
    let header_end = {
        let r = Reader::new(&data).unwrap();
        r.resume_point().unwrap().at
    };
    for cut in header_end..=data.len() {
        let prefix = &data[..cut];
        let (all, s, _) = read(prefix, Part::All, None);
        let (metadata, m, stubs) = read(prefix, Part::Metadata, None);
        let (bulk, _, _) = read(prefix, Part::Bulk, Some(stubs));
        let (alone, _, _) = read(prefix, Part::Bulk, None);
        let n = samples(&all);
        assert_eq!(samples(&metadata), n, "cut at {cut}");
        assert_eq!(samples(&bulk), n, "cut at {cut}");
        assert_eq!(samples(&alone), n, "cut at {cut}");
        assert_eq!(m.bytes_read, s.bytes_read, "cut at {cut}");
        if cut < data.len() {
            assert!(!s.complete, "cut at {cut}");
        }
        if s.bytes_discarded > 0 {
            assert_eq!(s.damage, Some(Damage::Torn), "cut at {cut}");
        }
    }
}

/// A version-3 file: every record in one frame after the header's.
fn older_file(records: &[Record]) -> Vec<u8> {
    let mut c = FrameCompressor::new().unwrap();
    let mut file = Vec::new();
    let mut out = Vec::new();
    for batch in [
        vec![Record::Header(Header {
            format_version: 3,
            ..header()
        })],
        records.to_vec(),
    ] {
        let mut buf = Vec::new();
        for r in &batch {
            r.encode(&mut buf);
        }
        c.compress(&buf, 3, &mut out).unwrap();
        file.extend_from_slice(&out);
    }
    file
}

#[test]
fn an_older_file_reads_the_same_in_every_part_with_every_frame_inflated() {
    let records: Vec<Record> = stream();
    let data = older_file(&records);
    let (all, s, _) = read(&data, Part::All, None);
    assert_eq!(all, records);
    assert_eq!(s.frames, 2);
    let (metadata, m, stubs) = read(&data, Part::Metadata, None);
    assert_eq!(m.frames, 2);
    assert_eq!(stubs.bytes(), 0, "nothing to keep");
    // Samples without their registers and stack copies, as before pairs; the rest whole.
    let want: Vec<Record> = records
        .iter()
        .map(|r| match r {
            Record::Sample(s) => Record::Sample(Sample {
                regs_mask: 0,
                regs: Vec::new(),
                stack: Vec::new(),
                ..s.clone()
            }),
            Record::EventSample(e) => Record::EventSample(EventSample {
                event: e.event,
                sample: Sample {
                    regs_mask: 0,
                    regs: Vec::new(),
                    stack: Vec::new(),
                    ..e.sample.clone()
                },
            }),
            r => r.clone(),
        })
        .collect();
    assert_eq!(metadata, want);
    let (bulk, b, _) = read(&data, Part::Bulk, Some(stubs));
    assert_eq!(b.frames, 2);
    let want: Vec<Record> = records.iter().filter(|r| is_bulk(r)).cloned().collect();
    assert_eq!(bulk, want);
}

#[test]
fn a_pair_whose_frames_disagree_is_damage_not_a_panic() {
    let mut c = FrameCompressor::new().unwrap();
    let (mut file, mut out, mut scratch) = (Vec::new(), Vec::new(), Vec::new());
    let mut head = Vec::new();
    Record::Header(header()).encode(&mut head);
    c.compress(&head, 3, &mut out).unwrap();
    file.extend_from_slice(&out);
    // A sample's stub whose bulk record is a trace-tree node.
    let mut records = Vec::new();
    Record::Sample(Sample {
        time: 5,
        ..Default::default()
    })
    .encode(&mut records);
    let mut bulk = Vec::new();
    Record::StackNode(StackNode {
        pid: 1,
        id: 1,
        parent: 0,
        ip: 2,
    })
    .encode(&mut bulk);
    c.compress_pair(&records, &bulk, 3, 0, &mut out, &mut scratch)
        .unwrap();
    file.extend_from_slice(&out);
    for part in [Part::All, Part::Bulk] {
        let (got, s, _) = read(&file, part, None);
        assert_eq!(samples(&got), 0, "{part:?}: {got:?}");
        assert!(
            matches!(s.damage, Some(Damage::BadRecord(_))),
            "{part:?}: {s:?}"
        );
    }
    // The metadata pass does not see the bulk frame's contents.
    let (got, s, _) = read(&file, Part::Metadata, None);
    assert_eq!(got.len(), 1);
    assert!(s.damage.is_none());
}
