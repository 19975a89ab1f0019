//! The ground truth of `tests/programs/asm_nocfi.c` (issue 24: code no unwind table covers),
//! shared by the native test and the AArch64 board's.

use std::collections::HashMap;

/// The program's own part of each folded stack (root first): from `main` through the
/// program's functions, up to the first frame that is not one of them (the kernel's, when a
/// sample interrupted it). A stack in the assembly that never reaches `main` is keyed
/// `cut:` and its frames; stacks of neither (start-up, the loader) are left out.
pub fn own_stacks(stacks: &[(Vec<String>, u64)]) -> HashMap<String, u64> {
    const OWN: [&str; 5] = ["main", "run_leaf", "run_framed", "spin_leaf", "spin_framed"];
    let mut out = HashMap::new();
    for (frames, n) in stacks {
        let own: Vec<&str> = frames
            .iter()
            .map(String::as_str)
            .skip_while(|f| *f != "main")
            .take_while(|f| OWN.contains(f))
            .collect();
        let key = if !own.is_empty() {
            own.join(";")
        } else if frames.iter().any(|f| f.starts_with("spin_")) {
            format!("cut:{}", frames.join(";"))
        } else {
            continue;
        };
        *out.entry(key).or_insert(0) += n;
    }
    out
}

/// Asserts the exact chains through the two assembly functions and the 50/50 split of the
/// program's equal loops (42-58%); returns (samples on the known chains, samples in the
/// assembly).
pub fn assert_asm_nocfi_ground_truth(stacks: &[(Vec<String>, u64)]) -> (u64, u64) {
    let stacks = own_stacks(stacks);
    let via_leaf = stacks.get("main;run_leaf;spin_leaf").copied().unwrap_or(0);
    let via_framed = stacks
        .get("main;run_framed;spin_framed;spin_leaf")
        .copied()
        .unwrap_or(0);
    let user: u64 = stacks
        .iter()
        .filter(|(s, _)| s.contains("spin_"))
        .map(|(_, n)| n)
        .sum();
    assert!(
        (via_leaf + via_framed) * 100 >= user * 98,
        "{via_leaf} + {via_framed} of {user} samples on the two known chains: {stacks:#?}"
    );
    let share = crate::share(via_leaf, via_framed);
    assert!(
        (42.0..=58.0).contains(&share),
        "run_leaf's share {share:.1}% of the two equal loops: {stacks:#?}"
    );
    (via_leaf + via_framed, user)
}
