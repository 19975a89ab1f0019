//! Issue 16: kernel frames in loadable modules are named with their module. This machine's
//! kernel has no modules, so the test runs on the emulated AArch64 board (Debian's arm64
//! kernel under qemu-system, see `crossprof_tests::boards`), whose disk driver is the module
//! `virtio_blk` (on `virtio_mmio`): a program reads the board's disk with O_DIRECT under the
//! cross-built `rec`, which carries the kallsyms lines of the sampled kernel addresses and
//! `/proc/modules`. Ground truth from the raw recording: the samples whose kernel leaf lies in
//! each module's range from `/proc/modules`; hostside must give each module exactly that many
//! self samples, in module `[name]`, under names the module's own kallsyms lines carry.

use std::collections::{HashMap, HashSet};

use crossprof_format::{Reader, Record};
use crossprof_tests::boards::{boot, Board, Sysroot};
use crossprof_tests::*;
use serde_json::Value;

#[test]
fn aarch64_board_kernel_module_frames_carry_their_module() {
    let board = Board::Aarch64;
    let tag = "board-kmod-aarch64";
    let sysroot = Sysroot::new(board, tag);
    let reader = sysroot.build_c(board, "disk_reads.c", "disk_reads", &["-O2"]);
    let files = vec![(
        reader.guest.clone(),
        std::fs::read(&reader.stripped).unwrap(),
        0o755,
    )];
    let job: Vec<String> = [
        "/rec",
        "--call-graph",
        "fp",
        "--out",
        "/out/k.zst",
        "--",
        &reader.guest,
        "/dev/vda",
        "6000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let run = boot(board, tag, files, &[job]);
    let log = String::from_utf8_lossy(run.file("job0.log")).into_owned();
    assert_eq!(run.statuses, vec![0], "{log}\n{}", run.console);
    let recording = scratch().join(tag).join("k.zst");
    std::fs::write(&recording, run.file("k.zst")).unwrap();

    // The raw recording: module ranges, the kallsyms lines of each module, kernel leaves.
    let bytes = std::fs::read(&recording).unwrap();
    let mut r = Reader::new(&bytes).unwrap();
    let (mut modules, mut kallsyms, mut leaves) = (None, None, Vec::new());
    while let Some(rec) = r.next_record() {
        match rec {
            Record::Blob(b) if b.name == "modules" => modules = Some(b.data),
            Record::Blob(b) if b.name == "kallsyms" => kallsyms = Some(b.data),
            Record::Sample(s) => leaves.extend(s.kernel_chain.first().copied()),
            _ => {}
        }
    }
    let modules = String::from_utf8(modules.expect("rec carried /proc/modules")).unwrap();
    let kallsyms = String::from_utf8(kallsyms.expect("rec carried kallsyms")).unwrap();
    let ranges: Vec<(String, u64, u64)> = modules
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let start = u64::from_str_radix(f[5].trim_start_matches("0x"), 16).unwrap();
            (
                f[0].to_string(),
                start,
                start + f[1].parse::<u64>().unwrap(),
            )
        })
        .collect();
    assert!(
        ranges.iter().any(|(m, _, _)| m == "virtio_blk"),
        "virtio_blk is not a loaded module:\n{modules}"
    );
    let mut truth: HashMap<String, u64> = HashMap::new();
    for &a in &leaves {
        if let Some((m, _, _)) = ranges.iter().find(|(_, lo, hi)| *lo <= a && a < *hi) {
            *truth.entry(m.clone()).or_default() += 1;
        }
    }
    let in_modules: u64 = truth.values().sum();
    assert!(
        in_modules >= 10,
        "only {in_modules} samples in modules ({truth:?}) of {} kernel leaves: {log}",
        leaves.len()
    );

    let report = report_json(&recording, Some(&sysroot.dir));
    let rows = report["cpu"]["functions"].as_array().unwrap();
    let mut ours: HashMap<String, u64> = HashMap::new();
    for f in rows {
        let module = f["module"].as_str().unwrap();
        let Some(name) = module.strip_prefix('[').and_then(|m| m.strip_suffix(']')) else {
            continue;
        };
        if !ranges.iter().any(|(m, _, _)| m == name) {
            continue;
        }
        *ours.entry(name.to_string()).or_default() += f["self"].as_u64().unwrap();
        // A module's function is one of the symbols the module's kallsyms lines name.
        let function = f["function"].as_str().unwrap();
        let named: HashSet<&str> = kallsyms
            .lines()
            .filter(|l| l.ends_with(&format!("[{name}]")))
            .filter_map(|l| l.split_whitespace().nth(2))
            .collect();
        assert!(
            named.contains(function),
            "{function} in {module} is none of its symbols {named:?}"
        );
    }
    assert_eq!(
        ours,
        truth,
        "self samples per module: {:#}",
        module_rows(&report)
    );
    eprintln!("{tag}: samples with their leaf in each module: {truth:?}");
}

fn module_rows(report: &Value) -> Value {
    Value::Array(
        report["cpu"]["functions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["module"] != "[kernel.kallsyms]")
            .cloned()
            .collect(),
    )
}
