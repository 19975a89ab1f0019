//! Trace-tree nodes written in runs (format version 5) read back as the same `StackNode`
//! records, in the same order among the other records, and a stack that repeats another's
//! frames beyond one that differs costs the file little.

use crossprof_format::{End, FrameWriter, Header, Reader, Record, StackNode, Task, FORMAT_VERSION};

fn header() -> Header {
    Header {
        format_version: FORMAT_VERSION,
        arch: "armv7".into(),
        pointer_size: 4,
        ..Default::default()
    }
}

fn node(pid: u32, id: u64, parent: u64, ip: u64) -> Record {
    Record::StackNode(StackNode {
        pid,
        id,
        parent,
        ip,
    })
}

fn read_all(bytes: &[u8]) -> Vec<Record> {
    let mut r = Reader::new(bytes).expect("a recording");
    let mut out = Vec::new();
    while let Some(rec) = r.next_record() {
        out.push(rec);
    }
    let s = r.summary();
    assert!(s.complete && s.damage.is_none(), "{s:?}");
    out
}

#[test]
fn nodes_keep_their_order_among_other_records() {
    let fork = Record::Fork(Task {
        time: 3,
        pid: 2,
        tid: 2,
        ppid: 1,
        ptid: 1,
    });
    let records = vec![
        node(1, 1, 0, 0x1_0000),
        node(1, 2, 1, 0x1_0010),
        fork.clone(),
        node(1, 3, 2, 0x1_0020),
        node(2, 4, 0, 0x2_0000),
        node(2, 4, 0, 0x2_0000),
        node(1, 9, 3, u64::MAX),
        node(1, 10, 0, 1 << 63),
    ];
    let mut w = FrameWriter::new(Vec::new(), &header()).expect("memory");
    for r in &records {
        w.push(r).expect("memory");
    }
    w.heap_alloc(1, 1, 5, 0x5000, 24, 10).expect("memory");
    w.push(&node(1, 11, 10, 7)).expect("memory");
    w.flush().expect("memory");
    w.push(&node(1, 12, 11, 8)).expect("memory");
    let bytes = w.finish(End::default()).expect("memory");
    let back = read_all(&bytes);
    let mut want = records.clone();
    want.push(Record::Alloc(crossprof_format::Alloc {
        time: 5,
        pid: 1,
        tid: 1,
        addr: 1,
        size: 24,
        stack: 10,
    }));
    want.extend([node(1, 11, 10, 7), node(1, 12, 11, 8)]);
    want.push(Record::End(End::default()));
    assert_eq!(back, want);
}

/// 200 stacks of 150 frames that differ only in their outermost frame: each is interned as a
/// new root and 149 new nodes, all but the first as in every other stack.
#[test]
fn stacks_that_fork_at_the_root_compress_to_little() {
    let mut w = FrameWriter::new(Vec::new(), &header()).expect("memory");
    let mut id = 0;
    for stack in 0..200u64 {
        for frame in 0..150u64 {
            id += 1;
            let parent = if frame == 0 { 0 } else { id - 1 };
            let ip = if frame == 0 {
                0x4000_0000 + stack * 4
            } else {
                0x7_0000_1000 + frame * 0x1_2345
            };
            w.push(&node(7, id, parent, ip)).expect("memory");
        }
    }
    let bytes = w.finish(End::default()).expect("memory");
    let back = read_all(&bytes);
    assert_eq!(back.len(), 30_001);
    // Written as whole records (format version 4), with each id and parent new: 112,565
    // bytes. In runs: about 2,000.
    assert!(bytes.len() < 6_000, "{} bytes", bytes.len());
}
