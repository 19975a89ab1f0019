//! Builds the build-id index of the directories given on the command line, with the user's
//! cache, and prints what it did and how long it took: the measurement behind
//! `bench/build_id_index.py` (run it twice: the second run is answered by the cache).
//!
//! `cargo run --release -p crossprof-symbols --example index_tree -- DIR...`

use std::path::PathBuf;
use std::time::Instant;

use crossprof_symbols::{BuildIdIndex, IndexOptions};

fn main() {
    let roots: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let t = Instant::now();
    let index = BuildIdIndex::build(&roots, &IndexOptions::for_user());
    let elapsed = t.elapsed().as_secs_f64();
    let s = index.stats();
    println!(
        "{{\"seconds\": {elapsed:.6}, \"files\": {}, \"elf_files\": {}, \"read\": {}, \"from_cache\": {}, \"symlinks\": {}, \"errors\": {}}}",
        s.files, s.elf_files, s.read, s.from_cache, s.symlinks, s.errors
    );
}
