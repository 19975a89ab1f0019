//! A table built here byte by byte in Go 1.18's layout (two functions, one file), read back;
//! and the same bytes truncated and corrupted, which must never panic.

use crate::{GoTable, Version};

const TEXT: u64 = 0x40_1000;

/// Appends a little-endian u32.
fn u32le(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}

/// `main.a` at TEXT..TEXT+0x20 (frame 0 for 4 bytes, then 24; line 10 then 11) and
/// `runtime.goexit` at TEXT+0x20..TEXT+0x40 (a top frame).
fn table() -> Vec<u8> {
    let names = b"main.a\0runtime.goexit\0";
    let files = b"/src/a.go\0";
    // pc-value tables, starting at pctab offset 1 (0 means "no table").
    let pctab: Vec<u8> = vec![
        0, // padding: offset 0 is "none"
        0x02, 4, 48, 28, 0, // pcsp of main.a: 0 for 4 bytes, 24 for 28
        0x02, 32, 0, // pcfile: file 0 for the whole function (zig-zag +1 from -1)
        22, 4, 2, 28, 0, // pcln: 10 for 4 bytes, 11 for 28
    ];
    let (pcsp, pcfile, pcln) = (1u32, 6u32, 9u32);
    let header_len = 8 + 8 * 8;
    let funcnames = header_len;
    let cutab = funcnames + names.len();
    let filetab = cutab + 4;
    let pctab_at = filetab + files.len();
    let functab = pctab_at + pctab.len();
    let mut t = Vec::new();
    u32le(&mut t, 0xffff_fff0);
    t.extend_from_slice(&[0, 0, 1, 8]);
    for w in [
        2u64,
        1,
        TEXT,
        funcnames as u64,
        cutab as u64,
        filetab as u64,
        pctab_at as u64,
        functab as u64,
    ] {
        t.extend_from_slice(&w.to_le_bytes());
    }
    t.extend_from_slice(names);
    u32le(&mut t, 0); // cutab[0]: file offset 0
    t.extend_from_slice(files);
    t.extend_from_slice(&pctab);
    assert_eq!(t.len(), functab);
    // Index: 3 (entryoff, funcoff) pairs; records follow it.
    let records = 3 * 8;
    for (entry, rec) in [(0u32, records), (0x20, records + 40), (0x40, 0)] {
        u32le(&mut t, entry);
        u32le(&mut t, rec);
    }
    let record = |t: &mut Vec<u8>, entry: u32, name: u32, tables: [u32; 3], flag: u8| {
        u32le(t, entry);
        u32le(t, name);
        for x in [0, 0, tables[0], tables[1], tables[2], 0, 0] {
            u32le(t, x);
        }
        t.extend_from_slice(&[0, flag, 0, 0]);
    };
    record(&mut t, 0, 0, [pcsp, pcfile, pcln], 0);
    record(&mut t, 0x20, 7, [0, 0, 0], 1);
    t
}

#[test]
fn functions_names_frames_and_lines_read_back() {
    let bytes = table();
    let t = GoTable::new(&bytes[..], None).expect("a table");
    assert_eq!(t.version(), Version::Go118);
    assert_eq!(t.len(), 2);
    assert_eq!(t.range(), Some(TEXT..TEXT + 0x40));
    let a = t.func_at(TEXT + 3).expect("main.a");
    assert_eq!(
        (a.name(), a.entry, a.end),
        (Some("main.a"), TEXT, TEXT + 0x20)
    );
    assert_eq!(a.sp_delta(TEXT + 3), Some(0));
    assert_eq!(a.sp_delta(TEXT + 4), Some(24));
    assert_eq!(a.file_line(TEXT + 3), Some(("/src/a.go", 10)));
    assert_eq!(a.file_line(TEXT + 0x1f), Some(("/src/a.go", 11)));
    assert!(!a.is_top_frame() && !a.switches_stacks());
    let g = t.func_at(TEXT + 0x20).expect("goexit");
    assert_eq!(g.name(), Some("runtime.goexit"));
    assert!(g.is_top_frame());
    assert_eq!(g.sp_delta(TEXT + 0x20), None, "no table");
    assert!(t.func_at(TEXT - 1).is_none());
    assert!(t.func_at(TEXT + 0x40).is_none());
}

#[test]
fn a_relocated_text_start_comes_from_the_caller() {
    let mut bytes = table();
    bytes[24..32].copy_from_slice(&0u64.to_le_bytes());
    let t = GoTable::new(&bytes[..], Some(0x1000)).expect("a table");
    assert_eq!(t.func_at(0x1005).and_then(|f| f.name()), Some("main.a"));
}

#[test]
fn other_bytes_are_no_table() {
    assert!(GoTable::new(&[0u8; 100][..], None).is_err());
    let mut old = table();
    old[..4].copy_from_slice(&0xffff_fffbu32.to_le_bytes());
    assert!(matches!(
        GoTable::new(&old[..], None),
        Err(crate::Error::Unsupported(_))
    ));
}

/// Every truncation and thousands of corruptions of a valid table: each either is refused or
/// answers lookups (whatever they say) without panicking.
#[test]
fn truncated_and_corrupted_tables_never_panic() {
    let good = table();
    let probe = |bytes: &[u8]| {
        if let Ok(t) = GoTable::new(bytes, Some(TEXT)) {
            for pc in [0, TEXT, TEXT + 4, TEXT + 0x21, u64::MAX] {
                if let Some(f) = t.func_at(pc) {
                    let _ = (f.name(), f.sp_delta(pc), f.file_line(pc), f.func_id());
                }
            }
            let _ = t.range();
        }
    };
    for len in 0..good.len() {
        probe(&good[..len]);
    }
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for _ in 0..20_000 {
        let mut b = good.clone();
        for _ in 0..1 + next() % 4 {
            let i = (next() % b.len() as u64) as usize;
            b[i] = next() as u8;
        }
        probe(&b);
    }
}
