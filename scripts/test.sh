#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests and the end-to-end suites that record real
# programs with the real rec and analyse them with hostside.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
. scripts/env.sh
# The cross-built rec for every board triple (dist/<triple>/, cached builds) and the emulated
# boards' kernels and cross toolchains, for the tests that record on emulated ARM boards.
tests/boards/setup.sh >/dev/null
targets/dist.sh
# The real consumers the export and HTML tests read hostside's files with: go tool pprof,
# headless Chromium, speedscope (npm). Installs only what is missing.
tests/browser/setup.sh >/dev/null
export CROSSPROF_DIST="$PWD/dist"
cargo fmt --all -- --check
# No Rust source file over 600 lines.
scripts/file_sizes.sh
cargo clippy --locked --workspace --all-targets -- -D warnings
cargo test --locked --workspace --profile host
# The fuzz crate (outside the workspace): formatted, linted, built, and each target run for a
# fixed time from its seed corpus.
scripts/fuzz.sh
# The Yocto layer and Buildroot package: oelint-adv, Buildroot's style rules, and an offline
# vendored build of rec for aarch64 as both build systems do it.
tests/packaging/check.sh
