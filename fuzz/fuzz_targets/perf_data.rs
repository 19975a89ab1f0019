//! Any bytes as a `perf.data` file (what `perf record` wrote on a board). The conversion never
//! panics or loops: it is an error about the file, or a crossprof recording that reads back
//! whole, its header first and no damage in it; the recording of a prefix of the input never
//! holds more samples than that of the whole.
#![no_main]
use std::io::Cursor;
use std::path::Path;

use crossprof_format::{Reader, Record};
use libfuzzer_sys::fuzz_target;

/// The samples of `data` converted, or `None` when it is not a readable perf.data file.
fn samples(data: &[u8]) -> Option<usize> {
    let converted =
        crossprof_perf_data::from_reader(Path::new("fuzz"), Cursor::new(data), data.len() as u64)
            .ok()?;
    let mut r = Reader::new(&converted.recording).expect("a recording with its header");
    let mut n = 0;
    while let Some(rec) = r.next_record() {
        if let Record::Sample(_) | Record::EventSample(_) = rec {
            n += 1;
        }
    }
    assert!(r.summary().damage.is_none(), "{:?}", r.summary());
    Some(n)
}

fuzz_target!(|data: &[u8]| {
    let whole = samples(data);
    if let (Some(half), Some(whole)) = (samples(&data[..data.len() / 2]), whole) {
        assert!(half <= whole);
    }
});
