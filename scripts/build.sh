#!/usr/bin/env bash
# Builds the board recorder (static musl, size-tuned) and the host tool (speed-tuned).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
. scripts/env.sh
# Every binary the project ships carries a GNU build-id, which hostside matches board files by;
# rustc's self-contained musl link adds none by itself. (Set here, not in a .cargo/config.toml:
# Buildroot's vendoring replaces that file in the source tree.)
CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="-C link-arg=-Wl,--build-id=sha1" \
    cargo build --locked --release -p rec --target x86_64-unknown-linux-musl
cargo build --locked --profile host -p hostside
# The heap interposer for glibc programs on this machine (a musl-built library cannot load
# into a glibc process), placed next to rec, where rec looks for it.
cargo build --locked --release -p crossprof-heap
cp "$CARGO_TARGET_DIR/release/libcrossprof_heap.so" "$(dirname "$CROSSPROF_REC")/"
echo "built: $CROSSPROF_REC ($(stat -c %s "$CROSSPROF_REC") bytes), $CROSSPROF_HOSTSIDE" >&2
