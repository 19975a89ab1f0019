//! Rewrites a recording in this crate's format version, record for record: to check that an
//! analysis of one recording gives the same answer in an older layout and in the current one
//! (`hostside report` of both, compared byte for byte but for the frame count).
//!
//! `cargo run -p crossprof-format --example rewrite IN OUT [RECORDS_PER_FRAME]`
//!
//! Heap events come back from the reader with block handles in place of addresses; written
//! again, they name the same blocks. Frames are closed every `RECORDS_PER_FRAME` records
//! (default 20,000), not where the original's were.

use std::process::ExitCode;

use crossprof_format::{FrameWriter, Reader, Record};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(input), Some(output)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: rewrite IN OUT [RECORDS_PER_FRAME]");
        return ExitCode::from(2);
    };
    let per_frame: u64 = args.get(3).and_then(|n| n.parse().ok()).unwrap_or(20_000);
    match rewrite(input, output, per_frame.max(1)) {
        Ok(records) => {
            eprintln!("{records} records written to {output}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rewrite: {e}");
            ExitCode::FAILURE
        }
    }
}

fn rewrite(input: &str, output: &str, per_frame: u64) -> Result<u64, Box<dyn std::error::Error>> {
    let data = std::fs::read(input)?;
    let mut reader = Reader::new(&data)?;
    let mut w = FrameWriter::new(std::fs::File::create(output)?, reader.header())?;
    let (mut records, mut in_frame) = (0u64, 0u64);
    let mut end = None;
    while let Some(r) = reader.next_record() {
        match r {
            Record::End(e) => end = Some(e),
            r => w.push(&r)?,
        }
        records += 1;
        in_frame += 1;
        if in_frame == per_frame {
            w.flush()?;
            in_frame = 0;
        }
    }
    match end {
        Some(e) => {
            w.finish(e)?;
        }
        None => w.flush()?,
    }
    if let Some(d) = &reader.summary().damage {
        eprintln!("rewrite: {input}: {d}; what came before it is written");
    }
    Ok(records)
}
