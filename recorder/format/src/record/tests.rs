//! Every record round-trips, old layouts still decode, unknown tags are skipped.

use super::*;

pub(crate) fn one_of_each() -> Vec<Record> {
    vec![
        Record::Header(Header {
            format_version: 1,
            arch: "arm".into(),
            pointer_size: 4,
            command: vec!["./app".into(), "x".into()],
            segment: 3,
            segment_start_ns: 77,
            heap_sample_bytes: 524_288,
            ..Default::default()
        }),
        Record::Comm(Comm {
            time: 1,
            pid: 2,
            tid: 3,
            comm: "app".into(),
            exec: true,
        }),
        Record::Fork(Task {
            time: 1,
            pid: 2,
            tid: 3,
            ppid: 4,
            ptid: 5,
        }),
        Record::Exit(Task {
            time: 1,
            pid: 2,
            tid: 3,
            ppid: 4,
            ptid: 5,
        }),
        Record::Mmap(Mmap {
            start: 0x1000,
            len: 0x2000,
            path: "/bin/app".into(),
            build_id: vec![1, 2, 3],
            ..Default::default()
        }),
        Record::Sample(Sample {
            time: 9,
            user_chain: vec![u64::MAX, 0, 0x4000],
            kernel_chain: vec![0xffff_ffff_8000_0000],
            ..Default::default()
        }),
        Record::Sample(Sample {
            time: 10,
            regs_mask: 0b1_1000_0001,
            regs: vec![0x7fff_0000, 0x4010, 1],
            stack: vec![1, 2, 3, 0xff],
            ..Default::default()
        }),
        Record::Switch(Switch {
            time: 1,
            pid: 2,
            tid: 3,
            cpu: 0,
            out: true,
            preempt: false,
        }),
        Record::Alloc(Alloc {
            time: 1,
            pid: 2,
            tid: 3,
            addr: 0x55,
            size: 16,
            stack: 7,
        }),
        Record::Free(Free {
            time: 1,
            pid: 2,
            tid: 3,
            addr: 0x55,
        }),
        Record::StackNode(StackNode {
            pid: 2,
            id: 7,
            parent: 0,
            ip: 0x400,
        }),
        Record::Lost(Lost {
            time: 1,
            count: 5,
            kind: "samples".into(),
        }),
        Record::Rss(Rss {
            time: 1,
            pid: 2,
            bytes: 4096,
        }),
        Record::AnonMap(AnonMap {
            time: 3,
            pid: 2,
            tid: 4,
            op: MapOp::Remap,
            addr: 0x7f00_0000_0000,
            len: 64 << 20,
            old_addr: 0x7e00_0000_0000,
            old_len: 32 << 20,
            stack: 7,
        }),
        Record::RssSplit(RssSplit {
            time: 4,
            pid: 2,
            rss: 10 << 20,
            heap: 1 << 20,
            stacks: 2 << 20,
            anonymous: 3 << 20,
            file: 4 << 20,
        }),
        Record::Blob(Blob {
            name: "[vdso]".into(),
            addr: 0x7fff,
            data: vec![0x7f, b'E'],
        }),
        Record::JitMap(JitMap {
            time: 9,
            pid: 77,
            kind: "perf-map".into(),
            truncated: true,
            data: b"7f0000001000 40 jit_hot\n".to_vec(),
            path: String::new(),
            offset: 0,
            file_size: 0,
        }),
        Record::JitMap(JitMap {
            time: 10,
            pid: 77,
            kind: "jitdump".into(),
            truncated: false,
            data: b"DTiJ".to_vec(),
            path: "/srv/app/jit-77.dump".into(),
            offset: 1 << 20,
            file_size: (1 << 20) + 4,
        }),
        Record::ThreadState(ThreadState {
            time: 11,
            pid: 77,
            tid: 78,
            index: 2,
            state: "S".into(),
            wchan: "futex_wait_queue".into(),
            kernel_stack: vec!["futex_wait_queue".into(), "do_futex".into()],
            stopped_ns: 250_000,
            captured: true,
        }),
        Record::End(End {
            time: 5,
            exit_status: -1,
            samples: 1,
            lost_samples: 0,
        }),
    ]
}

#[test]
fn every_record_round_trips() {
    for r in one_of_each() {
        let mut buf = Vec::new();
        r.encode(&mut buf);
        let mut d = Dec::new(&buf[1..]);
        let payload = d.bytes().unwrap();
        assert_eq!(Record::decode(buf[0], payload).unwrap(), r);
    }
}

#[test]
fn samples_written_before_stack_copies_existed_still_decode() {
    // A version-1 sample as the first writers laid it out: no regs/stack fields.
    let mut payload = Vec::new();
    let mut e = Enc::new(&mut payload);
    for v in [5u64, 1, 2, 0, 1000] {
        e.u64(v);
    }
    e.u64s(&[]);
    e.u64s(&[0x4000, 0x5000]);
    let Record::Sample(s) = Record::decode(tag::SAMPLE, &payload).unwrap() else {
        panic!("not a sample")
    };
    assert_eq!(s.user_chain, vec![0x4000, 0x5000]);
    assert!(s.regs.is_empty() && s.stack.is_empty() && s.regs_mask == 0);
}

/// `encode` writes the payload in place after a two-byte length slot; the bytes must be
/// `tag, varint length, payload` whatever the payload's length, after what `out` held.
#[test]
fn in_place_encoding_is_tag_length_payload_at_every_length() {
    let mut records = one_of_each();
    // Blobs whose payloads (3 bytes, the data's length, the data) take lengths on both sides
    // of each varint size: 127/128, 16383/16384, 2^21-1/2^21.
    for data_len in (118..130)
        .chain(16370..16384)
        .chain((1 << 21) - 8..(1 << 21))
    {
        records.push(Record::Blob(Blob {
            name: "x".into(),
            addr: 0,
            data: (0..data_len).map(|i| i as u8).collect(),
        }));
    }
    let mut lengths = Vec::new();
    let mut out = vec![0xee; 5];
    for r in records {
        let mut payload = Vec::new();
        let tag = r.encode_payload(&mut Enc::new(&mut payload));
        let mut expected = vec![tag];
        Enc::new(&mut expected).bytes(&payload);
        let before = out.len();
        r.encode(&mut out);
        assert_eq!(
            out[before..],
            expected[..],
            "payload of {} bytes",
            payload.len()
        );
        assert_eq!(out[..5], [0xee; 5]);
        lengths.push(payload.len());
    }
    for edge in [127, 128, 16383, 16384, (1 << 21) - 1, 1 << 21] {
        assert!(lengths.contains(&edge), "no payload of {edge} bytes");
    }
}

#[test]
fn unknown_tags_are_skippable() {
    assert_eq!(
        Record::decode(200, &[1, 2, 3]).unwrap(),
        Record::Unknown(200)
    );
}
