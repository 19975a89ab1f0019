#!/usr/bin/env bash
# Installs what building and profiling the real-world corpus needs, idempotently (only what
# is missing): dpkg-dev to unpack Debian source packages, tcl to generate SQLite's
# amalgamation, the linkers lld and mold, perf (the reference the suite compares with), and
# the cross compilers of the ARM builds, and the C library's detached debug info (libc6-dbg)
# so that its frames have names in both hostside's and perf's reports.
#
#   tests/realworld/setup.sh [ARCH [LINKER]]    # ARCH x86_64|aarch64|armv7, LINKER bfd|lld|mold|rust
#   tests/realworld/setup.sh all                # everything the corpus can use
set -euo pipefail

arch=${1:-x86_64}
linker=${2:-bfd}
pkgs=(dpkg-dev tcl gcc g++ binutils linux-perf libc6-dbg)
case "$arch" in
    aarch64) pkgs+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross) ;;
    armv7) pkgs+=(gcc-arm-linux-gnueabihf libc6-dev-armhf-cross) ;;
    all) pkgs+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross gcc-arm-linux-gnueabihf libc6-dev-armhf-cross lld mold) ;;
esac
case "$linker" in
    lld) pkgs+=(lld) ;;
    mold) pkgs+=(mold) ;;
esac
need=()
for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "realworld: installing ${need[*]}" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if [ "$linker" = rust ] && ! command -v cargo >/dev/null 2>&1; then
    echo "realworld: cargo not found; install Rust with rustup first (https://rustup.rs)" >&2
    exit 1
fi
