#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit tests and the end-to-end suites that record real
# programs with the real rec and analyse them with hostside.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
. scripts/env.sh
cargo fmt --all -- --check
cargo clippy --locked --workspace --all-targets -- -D warnings
cargo test --locked --workspace --profile host
# The Yocto layer and Buildroot package: oelint-adv, Buildroot's style rules, and an offline
# vendored build of rec for aarch64 as both build systems do it.
tests/packaging/check.sh
