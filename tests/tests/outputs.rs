//! Flame graphs, folded-stack export and `info --json` on a real recording: the same 75:25
//! ground truth must come out of every output, not just the report.

use std::sync::OnceLock;

use crossprof_tests::*;

struct Fixture {
    program: Program,
    recording: std::path::PathBuf,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let program = build("cpu_split.c", "outputs", C_FP);
        let recording = scratch().join("outputs.zst");
        // About 2000 samples: 75:25 to 5 points is then four standard deviations.
        record(&recording, &[], &[program.board.to_str().unwrap(), "2000"]);
        Fixture { program, recording }
    })
}

#[test]
fn collapsed_export_carries_the_split_and_the_chain() {
    let f = fixture();
    let out = scratch().join("outputs.folded");
    hostside_ok(&[
        "export",
        "--format",
        "collapsed",
        "--sysroot",
        f.program.sysroot.to_str().unwrap(),
        f.recording.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&out).unwrap();
    let sum = |leaf: &str| -> u64 {
        text.lines()
            .filter(|l| {
                l.split(' ')
                    .next()
                    .is_some_and(|stack| stack.ends_with(&format!(";main;{leaf}")))
            })
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    let (a, b) = (sum("hot_a"), sum("hot_b"));
    let s = share(a, b);
    assert!(is_three_to_one(a, b), "hot_a share {s:.1}% in:\n{text}");
    // Every line starts at the process name, like perf's stackcollapse.
    assert!(text.lines().all(|l| l.starts_with("outputs;")), "{text}");
}

#[test]
fn flamegraph_is_an_interactive_svg_naming_the_hot_functions() {
    let f = fixture();
    let out = scratch().join("outputs.svg");
    hostside_ok(&[
        "flamegraph",
        "--sysroot",
        f.program.sysroot.to_str().unwrap(),
        f.recording.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.starts_with("<?xml") && svg.contains("<svg"));
    assert!(svg.contains("<script"), "no interactivity script");
    for name in ["hot_a", "hot_b", "main"] {
        assert!(
            svg.contains(&format!("<title>{name} (")),
            "{name} missing from the flame graph"
        );
    }
}

#[test]
fn info_json_says_what_the_file_holds() {
    let f = fixture();
    let j: serde_json::Value = serde_json::from_str(&hostside_ok(&[
        "info",
        "--json",
        f.recording.to_str().unwrap(),
    ]))
    .unwrap();
    assert_eq!(j["arch"], "x86_64");
    assert_eq!(j["complete"], true);
    assert_eq!(j["bytes_discarded"], 0);
    assert_eq!(j["sample_freq"], 999);
    // Exactly the samples the file holds, not a count of its own choosing: how many a fixed
    // amount of work takes depends on how fast the processor does it.
    let (records, _) = read_records(&f.recording);
    let samples = records
        .iter()
        .filter(|r| matches!(r, crossprof_format::Record::Sample(_)))
        .count() as u64;
    assert!(samples > 0);
    assert_eq!(j["records"]["sample"].as_u64(), Some(samples), "{j:#}");
    assert!(j["records"]["mmap"].as_u64().unwrap() >= 3, "{j:#}");
}
