//! Issue 29, acceptance 3: `export --format callgrind` read by Debian's `callgrind_annotate`
//! (valgrind). The ground-truth CPU program (hot_a does 3x hot_b's work) shows its 75:25
//! split in the function table, each function's samples on the source line that does its work
//! (the `LINE:` markers of tests/programs/cpu_split.c), and main's two call sites with the
//! samples spent in each callee; every number is the one `hostside report` counts.

use std::path::Path;
use std::process::Command;

use crossprof_tests::*;

/// `callgrind_annotate ARGS FILE`'s standard output.
fn annotate(args: &[&str], file: &Path) -> String {
    let o = Command::new("callgrind_annotate")
        .args(args)
        .arg(file)
        .output()
        .expect("callgrind_annotate (Debian's valgrind; scripts/setup.sh installs it)");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "callgrind_annotate failed: {err}");
    assert!(err.trim().is_empty(), "callgrind_annotate warned: {err}");
    String::from_utf8(o.stdout).expect("UTF-8")
}

/// The first number of `line` ("1,225 (73.18%) ..."), without its thousands separators.
fn first_number(line: &str) -> u64 {
    let word = line.split_whitespace().next().unwrap_or_default();
    word.replace(',', "")
        .parse()
        .unwrap_or_else(|_| panic!("no count at the start of {line:?}"))
}

/// The function table's row for `name`: "N (P%) M (Q%)  FILE:NAME [MODULE]".
fn row<'a>(table: &'a str, name: &str) -> &'a str {
    let tag = format!(":{name} [");
    table
        .lines()
        .find(|l| l.contains(&tag))
        .unwrap_or_else(|| panic!("{name} not in:\n{table}"))
}

#[test]
fn callgrind_annotate_shows_the_split_on_its_source_lines() {
    let (program, recording) = fixtures::recorded_cpu_split("callgrind_export");
    let report = report_json(&recording, Some(&program.sysroot));
    let out = scratch().join("callgrind_export.callgrind");
    hostside_ok(&[
        "export",
        "--format",
        "callgrind",
        "--sysroot",
        program.sysroot.to_str().expect("UTF-8 path"),
        recording.to_str().expect("UTF-8 path"),
        "-o",
        out.to_str().expect("UTF-8 path"),
    ]);
    let (hot_a, hot_b, main) = (
        function_named(&report, "hot_a"),
        function_named(&report, "hot_b"),
        function_named(&report, "main"),
    );

    // Self samples per function, with the source file, as the report counts them.
    let table = annotate(&[], &out);
    for (name, f) in [("hot_a", hot_a), ("hot_b", hot_b)] {
        let line = row(&table, name);
        assert_eq!(first_number(line), number(f, "self"), "{line}");
        assert!(line.contains("cpu_split.c:"), "{line}");
    }
    let (a, b) = (number(hot_a, "self"), number(hot_b, "self"));
    let split = share(a, b);
    assert!(
        is_three_to_one(a, b),
        "hot_a's share is {split:.1}% ({a} vs {b})"
    );
    // The program's source annotated: the line doing each function's work holds its samples
    // (all but the odd one on the function's entry or exit).
    for (marker, f) in [("LINE:hot_a", hot_a), ("LINE:hot_b", hot_b)] {
        let line = table
            .lines()
            .find(|l| l.contains(marker))
            .unwrap_or_else(|| panic!("{marker} not annotated:\n{table}"));
        let (on_line, all) = (first_number(line), number(f, "self"));
        assert!(
            on_line <= all && on_line * 100 >= all * 98,
            "{marker}: {on_line} of {all} samples: {line}"
        );
    }
    // main's call sites: each followed by its callee and the samples spent inside it.
    let lines: Vec<&str> = table.lines().collect();
    for (marker, callee, f) in [
        ("LINE:call_a", "hot_a", hot_a),
        ("LINE:call_b", "hot_b", hot_b),
    ] {
        let at = lines
            .iter()
            .position(|l| l.contains(marker))
            .unwrap_or_else(|| panic!("{marker} not annotated:\n{table}"));
        let call = lines[at + 1];
        assert!(call.contains(&format!("cpu_split.c:{callee} (")), "{call}");
        assert_eq!(first_number(call), number(f, "total"), "{call}");
    }

    // Inclusive costs: main holds everything its callees did.
    let inclusive = annotate(&["--inclusive=yes"], &out);
    let main_total = first_number(row(&inclusive, "main"));
    assert_eq!(main_total, number(main, "total"));
    assert!(main_total >= number(hot_a, "total") + number(hot_b, "total"));
}
