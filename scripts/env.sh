# Sourced by the build and test scripts: one build cache shared by every checkout on this
# machine (a fresh clone then rebuilds only the workspace crates, not the dependencies), and
# the paths of the binaries under test.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/crossprof/target}"
export CROSSPROF_REC="$CARGO_TARGET_DIR/x86_64-unknown-linux-musl/release/rec"
export CROSSPROF_HOSTSIDE="$CARGO_TARGET_DIR/host/hostside"
