//! Issue 13: every fallback is shown. A recording whose sysroot holds a damaged debug file (its
//! DWARF and one unwind table entry broken) and lacks a library, and whose stacks are therefore
//! cut short, lists each in the report's
//! `diagnostics` (JSON and text) with exact counts; a heap recording of stacks deeper than the
//! interposer's frame limit lists those allocations.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crossprof_tests::*;
use serde_json::Value;

/// The file offset and size of section `name` of `path`, from `objdump -h`.
fn section(path: &Path, name: &str) -> (usize, usize) {
    let out = Command::new("objdump")
        .arg("-h")
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(name))
        .unwrap_or_else(|| panic!("no {name} in {}", path.display()));
    let f: Vec<&str> = line.split_whitespace().collect();
    let size = usize::from_str_radix(f[2], 16).unwrap();
    (usize::from_str_radix(f[5], 16).unwrap(), size)
}

/// Points the CIE pointer of the first FDE in `.eh_frame` (the entry after the leading CIE) at
/// the FDE itself, which is no CIE: that one entry no longer parses, the others do.
fn damage_one_fde(path: &Path) {
    let (offset, _) = section(path, ".eh_frame");
    let mut data = std::fs::read(path).unwrap();
    let word = |d: &[u8], at: usize| u32::from_le_bytes(d[at..at + 4].try_into().unwrap()) as usize;
    // 32-bit lengths: the CIE at offset 0 (its length word, then id 0), then the first FDE.
    let cie_len = word(&data, offset);
    assert_eq!(word(&data, offset + 4), 0, "a CIE first");
    let fde = offset + 4 + cie_len;
    assert_ne!(word(&data, fde + 4), 0, "an FDE second");
    data[fde + 4..fde + 8].copy_from_slice(&4u32.to_le_bytes());
    std::fs::write(path, data).unwrap();
}

/// Overwrites the version of the first unit header in `.debug_info` with an impossible one:
/// the file stays a valid ELF with the same build-id, its DWARF cannot be parsed.
fn damage_debug_info(path: &Path) {
    let (offset, _) = section(path, ".debug_info");
    let mut data = std::fs::read(path).unwrap();
    // 32-bit DWARF: unit_length (4 bytes), then the version (2 bytes).
    data[offset + 4] = 0x7f;
    data[offset + 5] = 0x7f;
    std::fs::write(path, data).unwrap();
}

struct Damaged {
    recording: PathBuf,
    sysroot: PathBuf,
}

/// deep.c + libdeep.so recorded with stack copies; the sysroot has the executable with damaged
/// DWARF, no libdeep.so, and the system libraries.
fn damaged() -> &'static Damaged {
    static D: OnceLock<Damaged> = OnceLock::new();
    D.get_or_init(|| {
        let fixtures::DeepBuild {
            board,
            sys_dir,
            sysroot,
        } = fixtures::build_deep("diagnostics");
        damage_debug_info(&sys_dir.join("deep"));
        damage_one_fde(&sys_dir.join("deep"));
        // The sysroot lacks the library: its frames cannot be named or unwound.
        std::fs::remove_file(sys_dir.join("libdeep.so")).unwrap();
        let recording = scratch().join("diagnostics.zst");
        record(
            &recording,
            &["--call-graph", "dwarf"],
            &[board.to_str().unwrap(), "300"],
        );
        // Without --sysroot's copy, hostside would take the board's file at its path on this
        // machine (profiling where it ran): the library must be gone from there too.
        std::fs::remove_file(board.with_file_name("libdeep.so")).unwrap();
        Damaged { recording, sysroot }
    })
}

/// `kind` or `kind (reason)` → count, from the JSON `diagnostics`.
fn json_diagnostics(report: &Value) -> BTreeMap<String, u64> {
    report["diagnostics"]
        .as_array()
        .expect("a diagnostics array")
        .iter()
        .map(|d| {
            assert!(
                !d["message"].as_str().unwrap().is_empty(),
                "a message for {d}"
            );
            let kind = d["kind"].as_str().unwrap().to_string();
            let mut key = match d["reason"].as_str() {
                Some(r) => format!("{kind} ({r})"),
                None => kind,
            };
            if let Some(p) = d["profile"].as_str() {
                key = format!("{key}, {p} stacks");
            }
            (key, d["count"].as_u64().unwrap())
        })
        .collect()
}

/// The same from the text report's `Diagnostics` section
/// (`  COUNT  KIND[ (REASON)][, PROFILE stacks]: ...`).
fn text_diagnostics(text: &str) -> BTreeMap<String, u64> {
    let section = text
        .split("\nDiagnostics (what the analysis fell back on)\n")
        .nth(1)
        .expect("a Diagnostics section");
    section
        .lines()
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            let (count, rest) = l.trim_start().split_once("  ").unwrap();
            let (key, _) = rest.split_once(": ").unwrap();
            (key.to_string(), count.parse().unwrap())
        })
        .collect()
}

#[test]
fn damaged_debug_file_missing_module_and_cut_short_stacks_are_each_listed() {
    let d = damaged();
    let report = report_json(&d.recording, Some(&d.sysroot));
    let modules = report["modules"].as_array().unwrap();
    let matched = |suffix: &str| {
        modules
            .iter()
            .find(|m| m["path"].as_str().unwrap().ends_with(suffix))
            .map(|m| m["match"].as_str().unwrap().to_string())
    };
    assert_eq!(matched("/libdeep.so").as_deref(), Some("missing"));
    // Every sample's leaf lies in it: the report says how many distinct addresses it cost.
    let libdeep = modules
        .iter()
        .find(|m| m["path"].as_str().unwrap().ends_with("/libdeep.so"))
        .unwrap();
    assert!(libdeep["addresses"].as_u64().unwrap() > 0, "{libdeep}");
    assert_eq!(matched("/board/deep").as_deref(), Some("build-id"));

    let diags = json_diagnostics(&report);
    assert_eq!(diags.get("module-missing"), Some(&1), "{diags:?}");
    assert_eq!(diags.get("debug-info-damaged"), Some(&1), "{diags:?}");
    assert_eq!(diags.get("cfi-entries-skipped"), Some(&1), "{diags:?}");
    assert_eq!(
        report["cpu"]["stack_unwinding"]["cfi_entries_skipped"].as_u64(),
        Some(1)
    );
    let message = |kind: &str| {
        report["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["kind"] == kind)
            .unwrap()["message"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(message("module-missing").contains("libdeep.so"));
    assert!(message("debug-info-damaged").contains("/board/deep"));

    // Every sample's leaf is in libdeep.so, whose tables are missing: each stack is cut
    // short, and the diagnostics count exactly what the unwinding statistics count.
    let unwinding = &report["cpu"]["stack_unwinding"];
    let samples = report["cpu"]["samples"].as_u64().unwrap();
    let by = unwinding["truncated_by"].as_object().unwrap();
    let mut cut = 0;
    for (reason, n) in by {
        let n = n.as_u64().unwrap();
        let key = format!("unwind-cut-short ({reason})");
        assert_eq!(diags.get(&key).copied().unwrap_or(0), n, "{key}: {diags:?}");
        cut += n;
    }
    assert_eq!(cut, unwinding["truncated"].as_u64().unwrap());
    let no_tables = diags["unwind-cut-short (no_unwind_tables)"];
    assert!(
        no_tables * 10 >= samples * 9,
        "{no_tables} of {samples} samples cut short for want of libdeep.so's tables"
    );

    // The text report lists the same entries with the same counts.
    let text = hostside_ok(&[
        "report",
        "--sysroot",
        d.sysroot.to_str().unwrap(),
        d.recording.to_str().unwrap(),
    ]);
    assert_eq!(text_diagnostics(&text), diags, "{text}");
}

/// `readelf --debug-dump=info` of `path`.
fn dwarf_info(path: &Path) -> String {
    String::from_utf8(
        Command::new("readelf")
            .arg("--debug-dump=info")
            .arg(path)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
}

/// `cpu_split.c` built as `tag`, its sysroot copy's DWARF damaged by `damage` (given the
/// file's bytes and its path) before it is recorded; the report's JSON and diagnostics. Every
/// such damage must leave the file loadable (no `debug-info-damaged`), name `hot_a` from the
/// symbol table and keep the program's 3:1 split, which is checked here.
fn report_with_damaged_dwarf(
    tag: &str,
    damage: impl FnOnce(&Path, &mut Vec<u8>),
) -> (Value, BTreeMap<String, u64>, Program) {
    let p = build("cpu_split.c", tag, &["-O2"]);
    add_system_libs(&p.sysroot, &p.board);
    add_host_debug_files(&p.sysroot);
    let mut data = std::fs::read(&p.unstripped).unwrap();
    damage(&p.unstripped, &mut data);
    std::fs::write(&p.unstripped, data).unwrap();
    let recording = scratch().join(format!("{tag}.zst"));
    // The program's default 2000 rounds: ~1,500 samples at 999 Hz, so the 70-80% band is
    // about 4.5 standard deviations of sampling noise wide (600 rounds made it 2.5).
    record(&recording, &[], &[p.board.to_str().unwrap()]);
    let report = report_json(&recording, Some(&p.sysroot));
    let diags = json_diagnostics(&report);
    assert!(!diags.contains_key("debug-info-damaged"), "{diags:?}");
    let hot_a = function(&report, "hot_a").unwrap();
    assert!(
        hot_a["file"].is_null(),
        "named from the symbol table: {hot_a}"
    );
    let (a, b) = (
        count(&report, "hot_a", "self"),
        count(&report, "hot_b", "self"),
    );
    let share = share(a, b);
    assert!(is_three_to_one(a, b), "hot_a's share {share:.1}%");
    (report, diags, p)
}

/// Issue 26: DWARF that fails quietly is counted. `cpu_split.c` (one compilation unit) with
/// the version of its line table header (`.debug_line`) overwritten: the file still loads, but
/// its unit no longer parses and is skipped, as addr2line skips it, so its addresses are named
/// from the symbol table. `dwarf-units-unreadable` counts that one unit, and the split between
/// `hot_a` and `hot_b` still holds.
#[test]
fn skipped_dwarf_units_are_counted() {
    let (_, diags, _) = report_with_damaged_dwarf("cpu-split-bad-lines", |path, data| {
        let units = dwarf_info(path).matches("Compilation Unit @").count();
        assert_eq!(units, 1, "cpu_split.c is one compilation unit");
        let (offset, _) = section(path, ".debug_line");
        // 32-bit DWARF: unit_length (4 bytes), then the version (2 bytes).
        data[offset + 4] = 0x7f;
        data[offset + 5] = 0x7f;
    });
    assert_eq!(diags.get("dwarf-units-unreadable"), Some(&1), "{diags:?}");
}

/// Issue 26: a DWARF lookup that fails part way is counted. `cpu_split.c` with the
/// abbreviation code of its first function's entry (`DW_TAG_subprogram`, a child of the
/// unit's root) overwritten with one the unit does not define: the unit still parses, but
/// reading its functions fails, so each lookup in it fails and its address is named from the
/// symbol table. `dwarf-lookup-failed` counts them: some, at most the module's distinct
/// addresses; the split between `hot_a` and `hot_b` holds.
#[test]
fn failed_dwarf_lookups_are_counted() {
    let (report, diags, p) = report_with_damaged_dwarf("cpu-split-bad-die", |path, data| {
        // ` <1><2b2>: Abbrev Number: 21 (DW_TAG_subprogram)`
        let die = dwarf_info(path)
            .lines()
            .find(|l| l.trim_start().starts_with("<1><") && l.ends_with("(DW_TAG_subprogram)"))
            .and_then(|l| {
                let (off, _) = l.trim_start().strip_prefix("<1><")?.split_once('>')?;
                usize::from_str_radix(off, 16).ok()
            })
            .expect("a function entry in the unit");
        let (offset, _) = section(path, ".debug_info");
        assert!(data[offset + die] < 0x7f, "a one-byte abbreviation code");
        data[offset + die] = 0x7f;
    });
    assert!(!diags.contains_key("dwarf-units-unreadable"), "{diags:?}");
    let failed = diags.get("dwarf-lookup-failed").copied().unwrap_or(0);
    let module = report["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["path"] == p.board.to_str().unwrap())
        .unwrap();
    let addresses = module["addresses"].as_u64().unwrap();
    assert!(
        failed > 0 && failed <= addresses,
        "{failed} failed lookups of {addresses} addresses: {diags:?}"
    );
}

/// Issue 26: the stacks of every profile in the report, not only the CPU samples', have
/// their fallbacks listed. `off_cpu.c` recorded with `--off-cpu` and stack copies too small to
/// hold any blocking stack (`--off-cpu-stack 64`): the off-CPU profile's cut-short stacks are listed under
/// `profile: off-cpu` with exactly the count of its own unwinding statistics, apart from the
/// CPU samples' entries, in the JSON and the text report alike.
#[test]
fn cut_short_off_cpu_stacks_are_listed_under_their_profile() {
    let p = build("off_cpu.c", "off_cpu_small_copy", &["-O2", "-Wl,-z,now"]);
    add_system_libs(&p.sysroot, &p.board);
    let out = scratch().join("off_cpu_small_copy.zst");
    let o = run_rec(&[
        "--off-cpu",
        "--call-graph",
        "dwarf=256",
        "--off-cpu-stack",
        "64",
        "--out",
        out.to_str().unwrap(),
        "--",
        p.board.to_str().unwrap(),
        "20",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = off_cpu_report(&out, &p.sysroot, &[]);
    let diags = json_diagnostics(&report);
    let blocking = &report["off_cpu"]["stack_unwinding"];
    let cut = blocking["truncated_by"]["stack_copy_ended"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        cut > 0,
        "64-byte copies hold no blocking stack whole: {blocking}"
    );
    assert_eq!(
        diags.get("unwind-cut-short (stack_copy_ended), off-cpu stacks"),
        Some(&cut),
        "{diags:?}"
    );
    // Every reason of either profile, each under its own name.
    for (section, suffix) in [("off_cpu", ", off-cpu stacks"), ("cpu", "")] {
        let by = report[section]["stack_unwinding"]["truncated_by"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (reason, n) in by {
            let key = format!("unwind-cut-short ({reason}){suffix}");
            let n = n.as_u64().unwrap();
            assert_eq!(diags.get(&key).copied().unwrap_or(0), n, "{key}: {diags:?}");
        }
    }
    let text = hostside_ok(&[
        "report",
        "--off-cpu",
        "--sysroot",
        p.sysroot.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert_eq!(text_diagnostics(&text), diags, "{text}");
}

#[test]
fn heap_stacks_the_interposer_cut_short_are_counted_exactly() {
    let program = build("heap_deep_stack.c", "heap_deep_stack", &["-O0"]);
    let recording = scratch().join("heap_deep_stack.zst");
    record(&recording, &["--heap"], &[program.board.to_str().unwrap()]);
    let report = heap_report_json(&recording, &program.sysroot);
    let diags = json_diagnostics(&report);
    // DEEP_ALLOCS in heap_deep_stack.c, cut at the limit; the SHALLOW_ALLOCS from main are
    // whole. The interposer recorded the reason with each stack.
    assert_eq!(
        diags.get("heap-stack-cut-short (too_deep)"),
        Some(&7),
        "{diags:?}"
    );
    let cut = &report["heap"]["anomalies"]["cut_short_allocations"];
    assert_eq!(
        (cut["too_deep"].as_u64(), cut["bad_frame"].as_u64()),
        (Some(7), Some(0)),
        "{cut}"
    );
    // The reason is no frame: the deep site's stack is the 127 frames kept, ending in
    // `descend` (the 128th slot held the reason).
    let sites = report["heap"]["sites"].as_array().expect("sites");
    let deep = sites
        .iter()
        .find(|s| s["allocations"] == 7)
        .unwrap_or_else(|| panic!("no site of 7 allocations: {sites:#?}"));
    let stack: Vec<&str> = deep["stack"]
        .as_array()
        .expect("stack")
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    assert_eq!(stack.len(), 127, "{stack:?}");
    assert!(
        stack.iter().all(|f| *f == "descend"),
        "frames other than descend: {stack:?}"
    );
    let text = hostside_ok(&[
        "report",
        "--heap",
        "--sysroot",
        program.sysroot.to_str().unwrap(),
        recording.to_str().unwrap(),
    ]);
    assert_eq!(text_diagnostics(&text), diags, "{text}");
}
