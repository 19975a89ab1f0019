//! Issue 25: `rec --heap` on real programs on the emulated ARMv7 board, whose C code is built
//! with Debian armhf's defaults (Thumb-2, `-O2`, no frame pointers, no unwind tables): SQLite's
//! shell and the Lua interpreter of the real-world corpus (`tests/realworld/`), their board
//! workloads. The interposer records entry registers and stack words, and hostside unwinds
//! them with the sysroot's `.debug_frame` (the unstripped programs and Debian's `libc6-dbg`).
//!
//! Checked: every site in the program's own code has exactly the allocations that the same
//! binary makes from that call, as `tests/programs/site_count_preload.c` counts them by
//! return address (no unwinding) under `qemu-arm-static` with the same input; at least 99% of
//! the allocations have `main` on their stack; every allocation whose stack does not reach
//! `main` is counted among `cut_short_allocations`.
//!
//! heaptrack on x86_64 runs the same source on the same input, and its numbers are shown
//! beside ours, not asserted: where the programs' own choices depend on the size of a
//! pointer, a 64-bit build makes other allocations (Lua's string buffers start at
//! `LUAL_BUFFERSIZE`, 16 * sizeof(void*) * sizeof(lua_Number) bytes, and grow in other
//! steps; SQLite sizes hash tables and caches by bytes), so a few sites differ by a few
//! allocations out of hundreds of thousands. SQLite runs with its lookaside allocator off, so
//! that every allocation reaches malloc, and with `-init /dev/null`, so that it does not look
//! the home directory up (the machines' user databases differ). Every run starts the
//! program as `./NAME` from a directory holding it and its input, so that all see the same
//! `argv[0]` (Lua keeps it, and its length shifts the garbage collector's pacing; see
//! `heap_realworld.rs`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use crossprof_tests::board_files::symlink;
use crossprof_tests::board_heap::{interposer_files, prepare_real, RealCase as Case};
use crossprof_tests::boards::{boot, debian_libc, Board};
use crossprof_tests::heaptrack::{basename, heaptrack_in, loaded_modules, HtSite};
use crossprof_tests::realworld::build;
use crossprof_tests::*;
use serde_json::Value;

/// The least share of allocations, in percent, whose stack holds `main`.
const MIN_ROOTED_PERCENT: f64 = 99.0;

fn job(case: &Case) -> Vec<String> {
    let mut job: Vec<String> = ["/rec", "--heap", "--no-cpu", "--out"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    job.push(format!("/out/{}.zst", case.name));
    job.push("--".into());
    job.push(format!("./{}", case.name));
    job.extend(case.args.iter().cloned());
    job
}

/// heaptrack on the x86_64 build of the same program, run as `./NAME` with the same
/// arguments and input: the program's own sites (and the C library's).
fn heaptrack_truth(case: &Case) -> Vec<HtSite> {
    let p = build(&case.name, "bfd-O2-pie");
    let dir = scratch().join(format!("board_heap_real_{}_hpt", case.name));
    std::fs::create_dir_all(&dir).unwrap();
    symlink(&p.unstripped, &dir.join(&case.name));
    for input in &case.program.board_inputs {
        symlink(&case.program.workdir.join(input), &dir.join(input));
    }
    let args: Vec<&str> = case.args.iter().map(String::as_str).collect();
    let ht = heaptrack_in(
        Some(&dir),
        Path::new(&format!("./{}", case.name)),
        &args,
        &scratch().join(format!("board_heap_real_{}.heaptrack", case.name)),
    );
    ht.split(&loaded_modules(&p.unstripped)).0
}

/// The same board build run on this machine under `qemu-arm-static` with Debian's armhf C
/// library and `tests/programs/site_count_preload.c`, which counts the allocations of each
/// return address (no unwinding at all), each named as the report names a site: the
/// innermost inlined function at the call, its file and line (`addr2line -i` at the return
/// address - 1). The program's own sites only (the C library's depend on the machine).
fn site_truth(case: &Case) -> BTreeMap<(String, String, u32, String), u64> {
    let dir = scratch().join(format!("board_heap_real_{}_sites", case.name));
    std::fs::create_dir_all(&dir).unwrap();
    let preload = dir.join("site_count_preload.so");
    compile_with(
        Board::Armv7.gcc().as_str(),
        "site_count_preload.c",
        &["-O2", "-shared", "-fPIC"],
        &preload,
    );
    symlink(&case.program.board, &dir.join(&case.name));
    for input in &case.program.board_inputs {
        symlink(&case.program.workdir.join(input), &dir.join(input));
    }
    let out = dir.join("sites.txt");
    let o = Command::new("qemu-arm-static")
        .arg("-L")
        .arg(debian_libc(Board::Armv7))
        .arg("-E")
        .arg(format!("LD_PRELOAD={}", preload.display()))
        .arg("-E")
        .arg(format!("SITE_COUNT_OUT={}", out.display()))
        .arg(format!("./{}", case.name))
        .args(&case.args)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .expect("qemu-arm-static must be installed: run scripts/test-setup.sh");
    assert!(o.status.success(), "{}: {o:?}", case.name);
    let text = std::fs::read_to_string(&out).expect("the preload's counts");
    let mut offsets = Vec::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let [module, offset, n] = w[..] else {
            panic!("{line}")
        };
        let stem = module_stem(module);
        if stem == case.name || module.is_empty() {
            let off = u64::from_str_radix(offset, 16).expect("hex offset");
            offsets.push((off, n.parse::<u64>().expect("count")));
        }
    }
    let addresses: Vec<String> = offsets
        .iter()
        .map(|(o, _)| format!("{:x}", o - 1))
        .collect();
    let a2l = Command::new("arm-linux-gnueabihf-addr2line")
        .args(["-f", "-i", "-a", "-e"])
        .arg(&case.program.unstripped)
        .args(&addresses)
        .output()
        .expect("arm-linux-gnueabihf-addr2line (binutils-arm-linux-gnueabihf)");
    let text = String::from_utf8_lossy(&a2l.stdout);
    // Per address: "0x<addr>", then function and file:line pairs, innermost first.
    let mut names: BTreeMap<u64, (String, String, u32)> = BTreeMap::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        let Some(hex) = l.strip_prefix("0x") else {
            continue;
        };
        let addr = u64::from_str_radix(hex, 16).expect("addr2line's address");
        let function = lines.next().unwrap_or("??").to_string();
        let place = lines.next().unwrap_or("??:0");
        let place = place.split(" (").next().unwrap_or(place);
        let (file, line) = place.rsplit_once(':').unwrap_or((place, "0"));
        names.insert(
            addr + 1,
            (
                function,
                basename(file).to_string(),
                line.parse().unwrap_or(0),
            ),
        );
        while lines.peek().is_some_and(|l| !l.starts_with("0x")) {
            lines.next();
        }
    }
    let mut truth = BTreeMap::new();
    for (off, n) in offsets {
        let (f, file, line) = names
            .get(&off)
            .cloned()
            .unwrap_or_else(|| (format!("?+{off:x}"), String::new(), 0));
        *truth
            .entry((f, file, line, "PROGRAM".to_string()))
            .or_default() += n;
    }
    truth
}

/// Allocations and temporary allocations per (function, file, line, module), sites of the
/// same name summed.
type Counts = BTreeMap<(String, String, u32, String), (u64, u64)>;

fn module_stem(m: &str) -> String {
    basename(m).split(".so").next().unwrap_or("").to_string()
}

fn ours(heap: &Value, program: &str) -> Counts {
    let mut c = Counts::new();
    for s in heap["sites"].as_array().expect("sites") {
        let module = module_stem(s["module"].as_str().unwrap_or(""));
        let module = if module == program {
            "PROGRAM".into()
        } else {
            module
        };
        let key = (
            s["function"].as_str().unwrap_or("").to_string(),
            basename(s["file"].as_str().unwrap_or("")).to_string(),
            s["line"].as_u64().unwrap_or(0) as u32,
            module,
        );
        let e = c.entry(key).or_default();
        e.0 += s["allocations"].as_u64().unwrap_or(0);
        e.1 += s["temporary"].as_u64().unwrap_or(0);
    }
    c.retain(|_, v| v.0 > 0);
    c
}

fn theirs(sites: &[HtSite], program: &str) -> Counts {
    let mut c = Counts::new();
    for s in sites {
        let module = module_stem(&s.module);
        let module = if module == program {
            "PROGRAM".into()
        } else {
            module
        };
        let key = (
            s.function.clone(),
            basename(s.file.as_deref().unwrap_or("")).to_string(),
            s.line.unwrap_or(0),
            module,
        );
        let e = c.entry(key).or_default();
        e.0 += s.allocations;
        e.1 += s.temporary;
    }
    c.retain(|_, v| v.0 > 0);
    c
}

/// The checks on one recording; returns a summary line.
fn check(case: &Case, recording: &Path, truth: &[HtSite]) -> String {
    let r = heap_report_json(recording, &case.sysroot);
    assert_eq!(r["recording"]["arch"], "arm");
    assert_eq!(r["recording"]["complete"], true, "{}", case.name);
    let heap = &r["heap"];
    assert_eq!(heap["lost_events"].as_u64(), Some(0), "{}", case.name);
    let total = heap["allocations"].as_u64().expect("allocations");
    let ours = ours(heap, &case.name);
    let program = |c: &Counts| -> Counts {
        c.iter()
            .filter(|(k, _)| k.3 == "PROGRAM")
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };
    let (ours_program, heaptrack) = (program(&ours), program(&theirs(truth, &case.name)));
    // Exact: the same binary's allocations by return address.
    let sites = site_truth(case);
    let mut diffs = Vec::new();
    for key in ours_program.keys().chain(sites.keys()) {
        let (o, t) = (ours_program.get(key).map(|v| v.0), sites.get(key).copied());
        if o != t && !diffs.iter().any(|(k, _, _)| k == key) {
            diffs.push((key.clone(), o, t));
        }
    }
    // heaptrack on x86_64: the same source and input, but a 64-bit build; where the program's
    // own decisions depend on the size of a pointer the counts differ (shown, not asserted).
    let mut vs_heaptrack = Vec::new();
    for key in ours_program.keys().chain(heaptrack.keys()) {
        let (o, t) = (ours_program.get(key), heaptrack.get(key));
        if o != t && !vs_heaptrack.iter().any(|(k, _, _)| k == key) {
            vs_heaptrack.push((key.clone(), o.copied(), t.copied()));
        }
    }
    let stacks = folded_stacks(recording, &case.sysroot);
    let counted: u64 = stacks.iter().map(|(_, n)| n).sum();
    let rooted: u64 = stacks
        .iter()
        .filter(|(s, _)| s.iter().any(|f| f == "main"))
        .map(|(_, n)| n)
        .sum();
    let cut: u64 = heap["anomalies"]["cut_short_allocations"]
        .as_object()
        .expect("cut_short_allocations")
        .values()
        .filter_map(Value::as_u64)
        .sum();
    let rooted_pct = 100.0 * rooted as f64 / total.max(1) as f64;
    let bytes = std::fs::metadata(recording).unwrap().len();
    let sum = |c: &Counts| c.values().map(|v| v.0).sum::<u64>();
    let summary = format!(
        "{} on arm: {total} allocations, {} in the program's own code (by return address {}, \
         heaptrack on x86_64 {}), {:.2} bytes each in the file, {rooted} with main on the stack \
         ({rooted_pct:.2}%), {cut} cut short ({}); sites that differ from heaptrack's on \
         x86_64 (ours, heaptrack's): {vs_heaptrack:?}; recording {}",
        case.name,
        sum(&ours_program),
        sites.values().sum::<u64>(),
        sum(&heaptrack),
        bytes as f64 / total.max(1) as f64,
        heap["anomalies"]["cut_short_allocations"],
        recording.display()
    );
    assert!(
        diffs.is_empty(),
        "{summary}\nsites that differ from the return addresses' counts (ours, truth): \
         {diffs:#?}"
    );
    assert_eq!(counted, total, "{summary}");
    assert!(rooted_pct >= MIN_ROOTED_PERCENT, "{summary}");
    // A stack that does not reach main is one the unwind cut short, and counted as such.
    assert!(total - rooted <= cut, "{summary}");
    summary
}

#[test]
fn armv7_board_heap_of_real_programs_equals_heaptrack() {
    let board = Board::Armv7;
    let tag = "board_heap_realworld_armv7";
    let dir = scratch().join(tag);
    let mut files = interposer_files(board);
    let sqlite = build("sqlite3", "armv7-bfd-O2-pie");
    let mut sqlite_args: Vec<String> = ["-lookaside", "0", "0", "-init", "/dev/null"]
        .map(String::from)
        .to_vec();
    sqlite_args.extend(sqlite.board_args.iter().cloned());
    let lua = build("lua", "armv7-bfd-O2-pie");
    let lua_args = lua.board_args.clone();
    let cases = [
        prepare_real(
            board,
            "sqlite3",
            "armv7-bfd-O2-pie",
            &sqlite_args,
            &dir,
            &mut files,
        ),
        prepare_real(
            board,
            "lua",
            "armv7-bfd-O2-pie",
            &lua_args,
            &dir,
            &mut files,
        ),
    ];
    let jobs: Vec<Vec<String>> = cases.iter().map(job).collect();
    let run = boot(board, tag, files, &jobs);
    run.assert_ok(jobs.len());
    let mut failures = Vec::new();
    for case in &cases {
        let recording = run.save(&format!("{}.zst", case.name), tag);
        let truth = heaptrack_truth(case);
        match std::panic::catch_unwind(|| check(case, &recording, &truth)) {
            Ok(summary) => eprintln!("{summary}"),
            Err(e) => failures.push(
                e.downcast_ref::<String>()
                    .cloned()
                    .unwrap_or_else(|| "check failed".into()),
            ),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
