#!/usr/bin/env bash
# Fuzzing, time-boxed, as part of the test suite: formats, lints and builds the fuzz crate
# (fuzz/, outside the workspace), then runs each target for CROSSPROF_FUZZ_SECONDS (default 25)
# from the seed corpus checked in under fuzz/corpus/<target>/. New inputs go to a scratch copy,
# never into the repository. A crash fails the run and leaves its input in
# fuzz/artifacts/<target>/: turn it into a regression test named for it (see fuzz/README.md).
# Executions per target are printed and written to $CARGO_TARGET_DIR/fuzz/executions.tsv.
#   scripts/fuzz.sh [TARGET...]     (default: every target)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
seconds=${CROSSPROF_FUZZ_SECONDS:-25}
# cargo-fuzz, pinned; `cargo install` skips it when this version is already there.
cargo install --locked --quiet cargo-fuzz --version 0.13.2 2>&1 | grep -v "already installed" >&2 || true
# libFuzzer's instrumentation needs -Z flags: RUSTC_BOOTSTRAP lets the stable compiler take
# them (no nightly toolchain needed). Built as hostside ships (release, no overflow checks):
# no sanitizer, since the code fuzzed is safe Rust (the only C, zstd's, is not instrumented by
# rustc anyway), and no overflow checks, which stop at wrapping arithmetic in third-party
# parsers that is harmless in the shipped build (gimli's .eh_frame_hdr pointer_to_offset).
export RUSTC_BOOTSTRAP=1
fuzz_dir="$CARGO_TARGET_DIR/fuzz"
targets=("$@")
# Every target the fuzz crate declares, so that a new one runs without being listed twice.
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -vx crossprof-fuzz)

cargo fmt --manifest-path fuzz/Cargo.toml -- --check
cargo clippy --manifest-path fuzz/Cargo.toml --target-dir "$fuzz_dir" --bins -- -D warnings
(cd fuzz && cargo fuzz build -O -s none --target-dir "$fuzz_dir")

stats="$fuzz_dir/executions.tsv"
printf 'target\tseconds\texecutions\n' >"$stats"
for t in "${targets[@]}"; do
    work=$(mktemp -d)
    cp -r "fuzz/corpus/$t/." "$work/"
    log="$fuzz_dir/$t.log"
    if ! (cd fuzz && cargo fuzz run -O -s none --target-dir "$fuzz_dir" "$t" "$work" -- \
        -max_total_time="$seconds" -print_final_stats=1 -max_len=65536 -timeout=10 \
        -rss_limit_mb=2048) >"$log" 2>&1; then
        tail -40 "$log" >&2
        echo "fuzz: $t failed; the input is in fuzz/artifacts/$t/ (log: $log)" >&2
        rm -rf "$work"
        exit 1
    fi
    rm -rf "$work"
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    printf '%s\t%s\t%s\n' "$t" "$seconds" "${runs:-0}" >>"$stats"
    echo "fuzz: $t: ${runs:-0} executions in $seconds s, nothing found" >&2
done
