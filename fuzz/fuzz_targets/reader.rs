//! Any bytes: the reader never panics, never loops, and a prefix of the input never yields more
//! records than the whole (frames are all-or-nothing).
#![no_main]
use crossprof_format::Reader;
use libfuzzer_sys::fuzz_target;

fn count(data: &[u8]) -> Option<usize> {
    let mut r = Reader::new(data).ok()?;
    let mut n = 0;
    while r.next_record().is_some() {
        n += 1;
    }
    let s = r.summary();
    assert!(s.bytes_read + s.bytes_discarded <= data.len() as u64);
    Some(n)
}

fuzz_target!(|data: &[u8]| {
    if let Some(n) = count(data) {
        let half = &data[..data.len() / 2];
        assert!(count(half).unwrap_or(0) <= n);
    }
});
