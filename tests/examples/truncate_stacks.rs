//! Writes a copy of a recording whose stack copies are cut to at most SIZE bytes: what the
//! same samples would have held had `rec --call-graph dwarf=SIZE` recorded them (the kernel
//! copies the stack from the stack pointer upward, so a smaller copy is a prefix). Used by
//! `bench/stack_size.py` to measure, on identical samples, how many stacks reach their entry
//! at each size.
//!
//! Usage: truncate_stacks IN.zst OUT.zst SIZE

use std::process::ExitCode;

use crossprof_format::{FrameWriter, Reader, Record};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, input, output, size] = args.as_slice() else {
        eprintln!("usage: truncate_stacks IN.zst OUT.zst SIZE");
        return ExitCode::from(2);
    };
    let Ok(size) = size.parse::<usize>() else {
        eprintln!("truncate_stacks: SIZE must be a number of bytes");
        return ExitCode::from(2);
    };
    match run(input, output, size) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("truncate_stacks: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(input: &str, output: &str, size: usize) -> Result<(), String> {
    let bytes = std::fs::read(input).map_err(|e| format!("{input}: {e}"))?;
    let mut r = Reader::new(&bytes).map_err(|e| format!("{input}: {e}"))?;
    let mut header = r.header().clone();
    header.call_graph = format!("dwarf={size}");
    let mut w = FrameWriter::new(Vec::new(), &header).map_err(|e| e.to_string())?;
    while let Some(mut rec) = r.next_record() {
        if let Record::Sample(s) = &mut rec {
            s.stack.truncate(size);
        }
        w.push(&rec).map_err(|e| e.to_string())?;
    }
    let out = w.finish(Default::default()).map_err(|e| e.to_string())?;
    std::fs::write(output, out).map_err(|e| format!("{output}: {e}"))
}
