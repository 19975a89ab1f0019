#!/usr/bin/env bash
# Installs what building and profiling the real-world corpus needs, idempotently (only what
# is missing): dpkg-dev to unpack Debian source packages, tcl to generate SQLite's
# amalgamation, the linkers lld and mold, perf (the reference the suite compares with), and
# the cross compilers of the ARM builds, and the C library's detached debug info (libc6-dbg)
# so that its frames have names in both hostside's and perf's reports.
# With "all", also GStreamer (the tools, base and good plugins), whose pipelines the suite
# profiles as Debian ships them (tests/tests/realworld_media.rs), and Python 3, whose stripped
# interpreter tests/tests/stripped_functions.rs profiles.
#
#   tests/realworld/setup.sh [ARCH [LINKER]]    # ARCH x86_64|aarch64|armv7, LINKER bfd|lld|mold|rust
#   tests/realworld/setup.sh all                # everything the corpus can use
#   tests/realworld/setup.sh --check ARCH LINKER  # install nothing; fail naming what is missing
#
# scripts/test-setup.sh runs it with "all" before the tests; build.sh, which the tests run,
# calls it with --check, so a test only checks and never installs.
set -euo pipefail
check=0
[ "${1:-}" = --check ] && { check=1; shift; }

arch=${1:-x86_64}
linker=${2:-bfd}
pkgs=(dpkg-dev make tcl gcc g++ binutils linux-perf libc6-dbg)
case "$arch" in
    aarch64) pkgs+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross) ;;
    armv7) pkgs+=(gcc-arm-linux-gnueabihf libc6-dev-armhf-cross) ;;
    all) pkgs+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross gcc-arm-linux-gnueabihf libc6-dev-armhf-cross lld mold
              gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good python3) ;;
esac
case "$linker" in
    lld) pkgs+=(lld) ;;
    mold) pkgs+=(mold) ;;
esac
# shellcheck source=../../scripts/lib/apt.sh
. "$(dirname "$0")/../../scripts/lib/apt.sh"
if [ "$check" = 1 ]; then
    # Run from a test (through build.sh): change nothing, say what setup has not installed.
    APT_WHO=realworld apt_require "${pkgs[@]}"
else
    APT_WHO=realworld apt_ensure "${pkgs[@]}"
fi
if [ "$linker" = rust ] && ! command -v cargo >/dev/null 2>&1; then
    echo "realworld: cargo not found; install Rust with rustup first (https://rustup.rs)" >&2
    exit 1
fi
