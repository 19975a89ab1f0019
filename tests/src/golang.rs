//! Go programs built by Debian's Go toolchain (`golang-go`, installed by
//! `tests/browser/setup.sh` for `go tool pprof`), and the ground truth of
//! `tests/programs/go_split.go` (issue 24: Go stacks), shared by the native test and the
//! AArch64 board's.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use crate::run_ok;

/// Builds the Go source `src` into `out` for `goarch` (`amd64`, `arm64`), statically (no cgo),
/// as `go build` does by default for a program without cgo, with `-trimpath` so the binary
/// does not depend on where the source lies.
pub fn go_build(src: &Path, out: &Path, goarch: &str) {
    run_ok(
        Command::new("go")
            .args(["build", "-trimpath", "-o"])
            .arg(out)
            .arg(src)
            .env("GOARCH", goarch)
            .env("CGO_ENABLED", "0")
            // Module mode needs no go.mod for a single file; keep the user's GOFLAGS out.
            .env_remove("GOFLAGS"),
    );
}

/// The chains of `go_split.go`, root first, each ending in `main.hotA` or `main.hotB`: from
/// the main goroutine and from the goroutine `go worker(...)` starts (Go 1.19 wraps a `go`
/// statement with arguments in a closure, `main.main.func1`).
const CHAINS: [&[&str]; 2] = [
    &["runtime.goexit", "runtime.main", "main.main", "main.work"],
    &[
        "runtime.goexit",
        "main.main.func1",
        "main.worker",
        "main.work",
    ],
];

/// Asserts the ground truth of `go_split.go` on folded stacks (root first, the module name
/// first when the exporter puts it there): at least 98% of the samples whose stack holds
/// `main.hotA` or `main.hotB` have exactly one of the known chains above it (kernel frames
/// below the leaf allowed), leaving out at most 5% taken while the thread returned from Go's
/// preemption signal, whose stacks stop at the interrupted function on AArch64; hotA's share of the two is 3/4 (70-80%); the two goroutines
/// share the work equally (40-60%). Returns (samples on the known chains, samples in the
/// two leaves).
pub fn assert_go_split_ground_truth(stacks: &[(Vec<String>, u64)]) -> (u64, u64) {
    let mut known: HashMap<(usize, &str), u64> = HashMap::new();
    let (mut user, mut on_chains, mut signal_cut) = (0u64, 0u64, 0u64);
    let mut odd = Vec::new();
    for (frames, n) in stacks {
        let Some(leaf_at) = frames
            .iter()
            .position(|f| f == "main.hotA" || f == "main.hotB")
        else {
            continue;
        };
        user += n;
        let own: Vec<&str> = frames[..leaf_at]
            .iter()
            .map(String::as_str)
            .skip_while(|f| *f != "runtime.goexit")
            .collect();
        // Taken while the thread returned from Go's preemption signal (its
        // `runtime.asyncPreempt` frame, or the vDSO's sigreturn trampoline, above the
        // interrupted function): on AArch64 such stacks stop at the interrupted function.
        let returning = frames[leaf_at + 1..]
            .iter()
            .any(|f| f == "runtime.asyncPreempt" || f.starts_with("[vdso]"));
        match CHAINS.iter().position(|c| own == *c) {
            Some(i) => {
                on_chains += n;
                *known.entry((i, frames[leaf_at].as_str())).or_default() += n;
            }
            None if returning && own.is_empty() => signal_cut += n,
            None => odd.push((frames.join(";"), *n)),
        }
    }
    assert!(user > 0, "no sample in main.hotA or main.hotB: {stacks:#?}");
    assert!(
        // 5%: on the emulated board these come with the runtime's preemption signals, whose
        // rate follows the host's load (9 of 248, 3.6%, beside a full test run).
        signal_cut * 100 <= user * 5,
        "{signal_cut} of {user} samples cut short returning from a preemption signal"
    );
    assert!(
        on_chains * 100 >= (user - signal_cut) * 98,
        "{on_chains} of {} samples on the known chains ({signal_cut} more cut short returning \
         from a preemption signal); the others: {odd:#?}",
        user - signal_cut
    );
    let get = |i, leaf| known.get(&(i, leaf)).copied().unwrap_or(0);
    let (a, b) = (
        get(0, "main.hotA") + get(1, "main.hotA"),
        get(0, "main.hotB") + get(1, "main.hotB"),
    );
    // Each split within a flat band, or within 4 standard deviations of sampling noise when
    // the run had too few samples for the band to be that (the emulated boards under a loaded
    // machine: 255 samples made 81.2% of a 3:1 split, 111 made 61.3% of an even one).
    let (share, allowed) = (crate::share(a, b), crate::share_band(75.0, 5.0, a + b));
    assert!(
        (share - 75.0).abs() <= allowed,
        "main.hotA's share {share:.1}% of the 3:1 loops (allowed 75 \u{b1} {allowed:.1}): {known:?}"
    );
    let main_goroutine = get(0, "main.hotA") + get(0, "main.hotB");
    let share = crate::share(main_goroutine, on_chains - main_goroutine);
    let allowed = crate::share_band(50.0, 10.0, on_chains);
    assert!(
        (share - 50.0).abs() <= allowed,
        "the main goroutine's share {share:.1}% of the equal phases (allowed 50 \u{b1} \
         {allowed:.1}): {known:?}"
    );
    (on_chains, user)
}
