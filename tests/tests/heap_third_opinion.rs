//! Issue 25, acceptance 1 (in part): where rec and heaptrack disagree on a C++ program nobody
//! here wrote, a third opinion says which one counted what the program did.
//!
//! The program: Debian's `protoc` (libprotobuf, libstdc++) generating C++ for libprotobuf-dev's
//! `descriptor.proto`, 465,000 allocations. The third opinion: `count_preload.c`, the plainest
//! LD_PRELOAD that counts every malloc-family call and the blocks live when the process
//! leaves, with the count rewritten at every free once exit has begun.
//!
//! All three count the same allocations. Leaks differ: heaptrack stops watching before the
//! process is done exiting. Exit handlers registered before the dynamic loader's own (the
//! static destructors of libraries initialized before `main`) run after it, and free memory;
//! glibc then frees its blocks of exit handlers (1,040 bytes each, allocated by
//! `__new_exitfn`), which heaptrack still holds live and hides with a built-in suppression.
//! rec records to the end, so its leaked blocks and bytes are the third opinion's exactly,
//! and heaptrack's leaked bytes are more (452 B on this input).

use std::path::Path;
use std::process::Command;

use crossprof_tests::heaptrack::heaptrack_in;
use crossprof_tests::*;
use serde_json::Value;

const PROTO: &str = "/usr/include/google/protobuf/descriptor.proto";

/// The third opinion's counts: name → value.
fn counts(line: &str) -> std::collections::HashMap<String, u64> {
    let w: Vec<&str> = line.split_whitespace().collect();
    w.chunks(2)
        .filter_map(|c| Some((c[0].to_string(), c.get(1)?.parse().ok()?)))
        .collect()
}

#[test]
fn rec_counts_what_a_plain_counting_preload_counts_on_protoc() {
    assert!(
        Path::new(PROTO).exists(),
        "{PROTO} is missing: run scripts/test-setup.sh (libprotobuf-dev)"
    );
    let dir = scratch().join("heap_third_opinion");
    std::fs::create_dir_all(dir.join("out")).unwrap();
    let preload = dir.join("count_preload.so");
    let cc = Command::new("gcc")
        .args(["-O2", "-shared", "-fPIC", "-o"])
        .arg(&preload)
        .arg(root().join("tests/programs/count_preload.c"))
        .arg("-ldl")
        .output()
        .expect("gcc");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let protoc = Path::new("/usr/bin/protoc");
    let args = [
        "-I/usr/include",
        "--cpp_out=out",
        "google/protobuf/descriptor.proto",
    ];

    let third = dir.join("counts.txt");
    let o = Command::new(protoc)
        .args(args)
        .current_dir(&dir)
        .env("LD_PRELOAD", &preload)
        .env("COUNT_PRELOAD_OUT", &third)
        .output()
        .expect("run protoc");
    assert!(o.status.success(), "{o:?}");
    let third = counts(&std::fs::read_to_string(&third).unwrap());

    let out = dir.join("protoc.zst");
    let o = Command::new(rec())
        .args(["--heap", "--no-cpu", "--out"])
        .arg(&out)
        .arg("--")
        .arg(protoc)
        .args(args)
        .current_dir(&dir)
        .env("CROSSPROF_HEAP_LIB", heap_lib())
        .output()
        .expect("run rec");
    assert!(o.status.success(), "{o:?}");
    let r: Value = serde_json::from_str(&hostside_ok(&[
        "report",
        "--heap",
        "--json",
        out.to_str().unwrap(),
    ]))
    .unwrap();
    let h = &r["heap"];

    let ht = heaptrack_in(Some(&dir), protoc, &args, &dir.join("heaptrack"));
    eprintln!(
        "allocations: third opinion {}, rec {}, heaptrack {}; live at the end: third opinion \
         {} blocks {} B, rec {} blocks {} B; heaptrack leaked {} B",
        third["calls"],
        number(h, "allocations"),
        ht.allocations,
        third["live_blocks"],
        third["live_bytes"],
        number(h, "leaked_allocations"),
        number(h, "leaked_bytes"),
        ht.leaked_bytes,
    );
    assert!(third["calls"] > 400_000, "{third:?}");
    assert_eq!(number(h, "allocations"), third["calls"]);
    assert_eq!(ht.allocations, third["calls"]);
    assert_eq!(number(h, "leaked_allocations"), third["live_blocks"]);
    assert_eq!(number(h, "leaked_bytes"), third["live_bytes"]);
    assert_eq!(number(h, "suppressed_leaked_bytes"), 0);
    // heaptrack reports as leaked what the libraries' late exit handlers free.
    assert!(
        ht.leaked_bytes > third["live_bytes"],
        "heaptrack {} B, third opinion {} B",
        ht.leaked_bytes,
        third["live_bytes"]
    );
}
