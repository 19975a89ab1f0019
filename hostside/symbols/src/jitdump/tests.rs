use super::*;

/// A little-endian jitdump, written as the specification lays it out.
struct Writer(Vec<u8>);

impl Writer {
    fn new(flags: u64) -> Writer {
        let mut w = Writer(Vec::new());
        w.0.extend_from_slice(b"DTiJ");
        for v in [1u32, 40, 62, 0, 1234] {
            w.0.extend_from_slice(&v.to_le_bytes());
        }
        w.0.extend_from_slice(&7u64.to_le_bytes());
        w.0.extend_from_slice(&flags.to_le_bytes());
        w
    }

    fn record(&mut self, kind: u32, time: u64, body: &[u8]) {
        self.0.extend_from_slice(&kind.to_le_bytes());
        self.0
            .extend_from_slice(&((16 + body.len()) as u32).to_le_bytes());
        self.0.extend_from_slice(&time.to_le_bytes());
        self.0.extend_from_slice(body);
    }

    fn load(&mut self, time: u64, addr: u64, size: u64, index: u64, name: &str) {
        let mut b = Vec::new();
        b.extend_from_slice(&1234u32.to_le_bytes());
        b.extend_from_slice(&1235u32.to_le_bytes());
        for v in [addr, addr, size, index] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(name.as_bytes());
        b.push(0);
        b.extend(std::iter::repeat_n(0x90u8, size as usize));
        self.record(LOAD, time, &b);
    }

    fn moved(&mut self, time: u64, old: u64, new: u64, size: u64, index: u64) {
        let mut b = Vec::new();
        b.extend_from_slice(&1234u32.to_le_bytes());
        b.extend_from_slice(&1235u32.to_le_bytes());
        for v in [new, old, new, size, index] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        self.record(MOVE, time, &b);
    }

    fn lines(&mut self, time: u64, addr: u64, entries: &[(u64, u32, &[u8])], claimed: Option<u64>) {
        let mut b = Vec::new();
        b.extend_from_slice(&addr.to_le_bytes());
        let n = claimed.unwrap_or(entries.len() as u64);
        b.extend_from_slice(&n.to_le_bytes());
        for (a, line, file) in entries {
            b.extend_from_slice(&a.to_le_bytes());
            b.extend_from_slice(&line.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
            b.extend_from_slice(file);
            b.push(0);
        }
        self.record(DEBUG_INFO, time, &b);
    }
}

fn summary(d: &Dump) -> Vec<(u64, u64, u64, &str)> {
    d.code
        .iter()
        .map(|c| (c.time, c.start, c.end, &*c.name))
        .collect()
}

#[test]
fn loads_moves_and_lines() {
    let mut w = Writer::new(0);
    w.lines(
        5,
        0x1000,
        &[
            (0x1008, 12, b"/s/a.js"),
            (0x1000, 11, b"/s/a.js"),
            (0x1010, 13, b"\xff"),
            (0x1018, 14, b"\x01/s/a.js"),
        ],
        None,
    );
    w.load(10, 0x1000, 0x20, 1, "JS:*hot /s/a.js:11");
    w.load(20, 0x2000, 0x10, 2, "cold");
    w.record(3, 25, &[]); // JIT_CODE_CLOSE
    w.record(99, 26, &[1, 2, 3]); // a type from a later version
    w.moved(30, 0x1000, 0x3000, 0x20, 1);
    w.moved(31, 0x1000, 0x3000, 0x20, 77); // no such code
    let d = parse(&w.0);
    assert_eq!(
        summary(&d),
        vec![
            (10, 0x1000, 0x1020, "JS:*hot /s/a.js:11"),
            (20, 0x2000, 0x2010, "cold"),
            (30, 0x3000, 0x3020, "JS:*hot /s/a.js:11"),
        ]
    );
    assert_eq!(
        (d.damaged, d.unwinding_info, d.not_a_jitdump),
        (1, 0, false)
    );
    fn line(c: &Code, a: u64) -> Option<(&str, u32)> {
        c.line(a).map(|l| (&*l.file, l.line))
    }
    assert_eq!(line(&d.code[0], 0x1000), Some(("/s/a.js", 11)));
    assert_eq!(line(&d.code[0], 0x1007), Some(("/s/a.js", 11)));
    assert_eq!(line(&d.code[0], 0x1008), Some(("/s/a.js", 12)));
    // `0xff`: the file of the entry before; a damaged name drops its entry.
    assert_eq!(line(&d.code[0], 0x1010), Some(("/s/a.js", 13)));
    assert_eq!(line(&d.code[0], 0x101f), Some(("/s/a.js", 13)));
    assert_eq!(d.bad_file_names, 1);
    assert_eq!(line(&d.code[1], 0x2000), None);
    // A moved function keeps its lines, at the new addresses.
    assert_eq!(line(&d.code[2], 0x3009), Some(("/s/a.js", 12)));
    assert_eq!(line(&d.code[2], 0x1009), None);
}

#[test]
fn a_cycle_counter_clock_is_not_used_for_ordering() {
    let mut w = Writer::new(FLAG_ARCH_TIMESTAMP);
    w.load(10, 0x1000, 4, 1, "f");
    let d = parse(&w.0);
    assert!(d.arch_timestamps);
    assert_eq!(summary(&d), vec![(0, 0x1000, 0x1004, "f")]);
}

#[test]
fn damaged_files_stop_cleanly() {
    assert!(parse(b"").not_a_jitdump);
    assert!(parse(b"ELF\x7f and more bytes than a header, surely, yes").not_a_jitdump);
    assert!(parse(b"DTiJ\x01\0\0\0").not_a_jitdump);
    let mut w = Writer::new(0);
    w.load(10, 0x1000, 0x20, 1, "a");
    w.load(11, 0x2000, 0x20, 2, "b");
    let whole = w.0.clone();
    // Every prefix: the complete records before the cut, nothing invented.
    for cut in 0..whole.len() {
        let d = parse(&whole[..cut]);
        assert!(d.code.len() <= 2);
        for c in &d.code {
            assert!(c.name.as_ref() == "a" || c.name.as_ref() == "b");
        }
    }
    assert_eq!(parse(&whole).code.len(), 2);
    // A record claiming less than its own header, or more than the file.
    for bad in [0u32, 15, u32::MAX] {
        let mut w = Writer::new(0);
        w.load(10, 0x1000, 4, 1, "a");
        let at = w.0.len();
        w.load(11, 0x2000, 4, 2, "b");
        w.0[at + 4..at + 8].copy_from_slice(&bad.to_le_bytes());
        let d = parse(&w.0);
        assert_eq!((summary(&d).len(), d.damaged), (1, 1), "size {bad}");
    }
    // A line count no record could hold is refused, not allocated.
    let mut w = Writer::new(0);
    w.lines(1, 0x1000, &[(0x1000, 1, b"f")], Some(u64::MAX / 2));
    w.load(2, 0x1000, 4, 1, "a");
    let d = parse(&w.0);
    assert_eq!((d.damaged, d.code[0].lines.len()), (1, 0));
    // A header size that points past the end.
    let mut w = Writer::new(0);
    w.load(2, 0x1000, 4, 1, "a");
    w.0[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(parse(&w.0).code.is_empty());
}

#[test]
fn big_endian_files_parse_too() {
    let mut b = Vec::new();
    b.extend_from_slice(b"JiTD");
    for v in [1u32, 40, 20, 0, 9] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    b.extend_from_slice(&3u64.to_be_bytes());
    b.extend_from_slice(&0u64.to_be_bytes());
    let mut body = Vec::new();
    body.extend_from_slice(&9u32.to_be_bytes());
    body.extend_from_slice(&9u32.to_be_bytes());
    for v in [0x40u64, 0x40, 2, 1] {
        body.extend_from_slice(&v.to_be_bytes());
    }
    body.extend_from_slice(b"ppc\0\0\0");
    b.extend_from_slice(&LOAD.to_be_bytes());
    b.extend_from_slice(&((16 + body.len()) as u32).to_be_bytes());
    b.extend_from_slice(&5u64.to_be_bytes());
    b.extend_from_slice(&body);
    assert_eq!(summary(&parse(&b)), vec![(5, 0x40, 0x42, "ppc")]);
}

/// Property test: random bytes after a valid header, and random byte flips of a valid dump,
/// never panic, and never yield more code than the bytes could spell (each load or move is at
/// least a record header long) or lines outside the input.
#[test]
fn random_and_mutated_dumps_are_bounded_and_never_panic() {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut w = Writer::new(0);
    w.lines(1, 0x1000, &[(0x1000, 1, b"/a"), (0x1004, 2, b"\xff")], None);
    w.load(2, 0x1000, 8, 1, "a");
    w.moved(3, 0x1000, 0x2000, 8, 1);
    w.load(4, 0x3000, 8, 2, "b");
    let valid = w.0;
    for i in 0..20_000 {
        let data: Vec<u8> = if i % 2 == 0 {
            let mut d = valid.clone();
            for _ in 0..1 + next() % 8 {
                let at = (next() as usize) % d.len();
                d[at] = next() as u8;
            }
            d.truncate((next() as usize) % (d.len() + 1));
            d
        } else {
            let mut d = valid[..40].to_vec();
            let n = (next() % 512) as usize;
            d.extend((0..n).map(|_| next() as u8));
            d
        };
        let dump = parse(&data);
        assert!(dump.code.len() <= data.len() / 16);
        let lines: usize = dump.code.iter().map(|c| c.lines.len()).sum();
        assert!(lines <= data.len() * dump.code.len().max(1));
    }
}
