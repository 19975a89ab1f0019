//! The diagnostics' gathering, on hand-made sources.

use super::*;

#[test]
fn zero_counts_are_left_out_and_reasons_named() {
    let lost = BTreeMap::from([("samples".to_string(), 3), ("resync".to_string(), 0)]);
    let mut unwind = UnwindStats::default();
    *unwind.truncated_by.get_mut(CutShort::StackCopyEnded) += 5;
    let d = gather(&Sources {
        bytes_discarded: 0,
        lost: &lost,
        modules: &[],
        vdso_error: None,
        unwind: &unwind,
        other_stacks: &[],
        unwind_errors: &[],
        unmapped_frames: 0,
        jit: &Default::default(),
        heap: None,
    });
    let got: Vec<(Kind, Option<&str>, u64)> =
        d.iter().map(|d| (d.kind, d.reason, d.count)).collect();
    assert_eq!(
        got,
        [
            (Kind::SamplesLost, None, 3),
            (Kind::UnwindCutShort, Some("stack_copy_ended"), 5)
        ]
    );
    let json = serde_json::to_value(&d[1]).unwrap();
    assert_eq!(json["kind"], "unwind-cut-short");
    assert_eq!(json["reason"], "stack_copy_ended");
}

#[test]
fn other_profiles_stacks_are_listed_under_their_name() {
    let mut cpu = UnwindStats::default();
    *cpu.truncated_by.get_mut(CutShort::StackCopyEnded) += 5;
    let mut off_cpu = UnwindStats::default();
    *off_cpu.truncated_by.get_mut(CutShort::StackCopyEnded) += 2;
    off_cpu.scanned_frames = 4;
    let d = gather(&Sources {
        bytes_discarded: 0,
        lost: &BTreeMap::new(),
        modules: &[],
        vdso_error: None,
        unwind: &cpu,
        other_stacks: &[("off-cpu", &off_cpu), ("event", &UnwindStats::default())],
        unwind_errors: &[],
        unmapped_frames: 0,
        jit: &Default::default(),
        heap: None,
    });
    let got: Vec<(Kind, Option<&str>, Option<&str>, u64)> = d
        .iter()
        .map(|d| (d.kind, d.reason, d.profile, d.count))
        .collect();
    assert_eq!(
        got,
        [
            (Kind::UnwindCutShort, Some("stack_copy_ended"), None, 5),
            (Kind::UnwindStackScanned, None, Some("off-cpu"), 4),
            (
                Kind::UnwindCutShort,
                Some("stack_copy_ended"),
                Some("off-cpu"),
                2
            ),
        ]
    );
    let json = serde_json::to_value(&d).unwrap();
    assert!(json[0].get("profile").is_none(), "{json}");
    assert_eq!(json[2]["profile"], "off-cpu");
}

#[test]
fn what_rec_could_not_record_is_listed_by_kind() {
    let lost = BTreeMap::from([
        ("undecodable".to_string(), 2),
        ("resync".to_string(), 1),
        ("enable-failed".to_string(), 4),
        ("heap-rings-unreadable".to_string(), 3),
        ("heap".to_string(), 7),
        ("segment-delete-failed".to_string(), 5),
        ("directory-sync-failed".to_string(), 6),
    ]);
    let d = gather(&Sources {
        bytes_discarded: 100,
        lost: &lost,
        modules: &[],
        vdso_error: Some("not an ELF file"),
        unwind: &UnwindStats::default(),
        other_stacks: &[],
        unwind_errors: &["/lib/libx.so: bad section".to_string()],
        unmapped_frames: 0,
        jit: &Default::default(),
        heap: None,
    });
    let got: Vec<(&str, u64)> = d.iter().map(|d| (d.kind.name(), d.count)).collect();
    assert_eq!(
        got,
        [
            ("recording-incomplete", 100),
            ("heap-events-lost", 7),
            ("perf-records-undecoded", 2),
            ("ring-resync", 1),
            ("attach-enable-failed", 4),
            ("heap-rings-unreadable", 3),
            ("segment-delete-failed", 5),
            ("directory-sync-failed", 6),
            ("vdso-unparsed", 1),
            ("unwind-sections-failed", 1),
        ]
    );
    assert!(d[9].message.contains("/lib/libx.so: bad section"));
}

fn missing(path: &str, addresses: u64) -> ModuleInfo {
    ModuleInfo {
        key: crate::processes::ModuleKey {
            path: path.into(),
            build_id: vec![1, 2],
        },
        located: crossprof_symbols::Located {
            match_kind: MatchKind::Missing,
            image: None,
            debug_file: None,
            origin: crossprof_symbols::Origin::Path,
            image_origin: crossprof_symbols::Origin::Path,
        },
        load_error: None,
        dwarf_error: None,
        dwarf_disabled: false,
        dwarf_lookup_errors: 0,
        dwarf_unreadable_units: 0,
        warnings: Vec::new(),
        fetch_error: None,
        addresses,
    }
}

#[test]
fn a_missing_module_no_frame_fell_in_is_no_fallback() {
    let modules = [
        missing("/usr/lib/libgcc_s.so.1", 0),
        missing("/usr/lib/libdeep.so", 12),
    ];
    let d = gather(&Sources {
        bytes_discarded: 0,
        lost: &BTreeMap::new(),
        modules: &modules,
        vdso_error: None,
        unwind: &UnwindStats::default(),
        other_stacks: &[],
        unwind_errors: &[],
        unmapped_frames: 0,
        jit: &Default::default(),
        heap: None,
    });
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!((d[0].kind, d[0].count), (Kind::ModuleMissing, 1));
    assert!(d[0].message.contains("libdeep.so"));
    assert!(!d[0].message.contains("libgcc_s"));
}
