#!/usr/bin/env bash
# Installs the toolchain pieces the cross builds of targets/build.sh need, idempotently (cheap
# when everything is there): the rustup targets with a prebuilt std, rust-src for the targets
# built with -Zbuild-std, zig (from PyPI's ziglang) as the C compiler and linker for every
# non-x86_64 target, and cargo-zigbuild, which drives cargo with zig.
set -euo pipefail

# Versions known to work together here; bump them together.
ZIGLANG_VERSION=0.17.1
ZIGBUILD_VERSION=0.24.1

pkgs=(gcc musl-tools binutils file)
# python3-pip only when no pip is on PATH (a pyenv or venv python brings its own).
command -v pip3 >/dev/null 2>&1 || pkgs+=(python3-pip)
# shellcheck source=../scripts/lib/apt.sh
. "$(dirname "$0")/../scripts/lib/apt.sh"
APT_WHO=targets apt_ensure "${pkgs[@]}"

installed=$(rustup target list --installed)
for t in x86_64-unknown-linux-musl aarch64-unknown-linux-musl i686-unknown-linux-musl; do
    grep -qx "$t" <<<"$installed" || rustup target add "$t"
done
rustup component list --installed | grep -q '^rust-src' || rustup component add rust-src

if ! python3 -m ziglang version >/dev/null 2>&1 && ! command -v zig >/dev/null 2>&1; then
    echo "targets: installing zig $ZIGLANG_VERSION (PyPI ziglang)" >&2
    # Debian's python refuses system-wide pip installs (PEP 668); a user install is enough.
    python3 -m pip install -q "ziglang==$ZIGLANG_VERSION" 2>/dev/null ||
        python3 -m pip install -q --user --break-system-packages "ziglang==$ZIGLANG_VERSION"
fi
if ! cargo-zigbuild --version 2>/dev/null | grep -q "$ZIGBUILD_VERSION"; then
    echo "targets: installing cargo-zigbuild $ZIGBUILD_VERSION" >&2
    cargo install -q --locked "cargo-zigbuild@$ZIGBUILD_VERSION"
fi
