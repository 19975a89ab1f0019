#!/usr/bin/env bash
# Installs what tests/packaging/check.sh needs, idempotently: python3-venv with the pinned
# oelint-adv and bitbake-setup in venvs under the user cache, the aarch64 cross compiler and C library for the
# interposer's glibc build, and the two rustup targets of the build rehearsal.
# scripts/test-setup.sh runs it before the suite; check.sh runs it too when run by hand.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=../../scripts/lib/apt.sh
. scripts/lib/apt.sh
. tests/packaging/versions.sh
python3 -c 'import ensurepip' 2>/dev/null || APT_WHO=packaging apt_ensure python3-venv
venv="$PACKAGING_CACHE/oelint-venv"
if ! "$venv/bin/oelint-adv" --version 2>/dev/null | grep -qx "oelint-adv $OELINT_VERSION"; then
    echo "packaging: installing oelint-adv $OELINT_VERSION into $venv" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "oelint-adv==$OELINT_VERSION"
fi
bb_venv="$PACKAGING_CACHE/bitbake-venv"
if ! "$bb_venv/bin/pip" show bitbake-setup 2>/dev/null | grep -qx "Version: $BITBAKE_SETUP_VERSION"; then
    echo "packaging: installing bitbake-setup $BITBAKE_SETUP_VERSION (bitbake's fetcher) into $bb_venv" >&2
    rm -rf "$bb_venv"
    python3 -m venv "$bb_venv"
    "$bb_venv/bin/pip" install -q "bitbake-setup==$BITBAKE_SETUP_VERSION"
fi
# wget: bitbake's fetcher downloads crates with it.
APT_WHO=packaging apt_ensure gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils file wget
for t in "$TRIPLE" "$HEAP_TRIPLE"; do
    rustup target list --installed | grep -qx "$t" || rustup target add "$t"
done
