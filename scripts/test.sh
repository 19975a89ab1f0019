#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests and the end-to-end suites that record real
# programs with the real rec and analyse them with hostside. Every install happens first, in
# scripts/test-setup.sh; no test installs anything. Every stage runs even when one fails, and
# cargo test runs every test binary (--no-fail-fast), so one red run shows all that is wrong.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/test-setup.sh
scripts/build.sh
. scripts/env.sh
# The cross-built rec for every board triple (dist/<triple>/, cached builds).
targets/dist.sh
export CROSSPROF_DIST="$PWD/dist"
cargo fmt --all -- --check
# No Rust source file over 600 lines.
scripts/file_sizes.sh
cargo clippy --locked --workspace --all-targets -- -D warnings
# Every doc link resolves, and public docs link only to what a reader of them can see.
RUSTDOCFLAGS="-D warnings" cargo doc --locked --workspace --no-deps
# The heap interposer's code differs per architecture (unwinder, relocation layout, system
# calls): lint it as built for the boards too (targets/dist.sh installed their std).
for t in aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf i686-unknown-linux-gnu \
    riscv64gc-unknown-linux-gnu; do
    cargo clippy --locked -p crossprof-heap --target "$t" -- -D warnings
done
failed=()
cargo test --locked --workspace --profile host --no-fail-fast || failed+=("cargo test")
# The fuzz crate (outside the workspace): formatted, linted, built, and each target run for a
# fixed time from its seed corpus.
scripts/fuzz.sh || failed+=(scripts/fuzz.sh)
# The Yocto layer and Buildroot package: oelint-adv, Buildroot's style rules, and an offline
# vendored build of rec for aarch64 as both build systems do it.
tests/packaging/check.sh || failed+=(tests/packaging/check.sh)
if [ ${#failed[@]} -gt 0 ]; then
    echo "test: FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "test: all passed" >&2
