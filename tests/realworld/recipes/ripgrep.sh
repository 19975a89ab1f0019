# ripgrep from crates.io, built the way a Rust user builds it: `cargo install --locked` with
# the stock toolchain and Rust's default linker, the release profile plus full debug info
# (CARGO_PROFILE_RELEASE_DEBUG=2, as a Yocto or Buildroot cargo build keeps it for the debug
# sysroot). A multi-threaded Rust program: run with -j2 over a generated tree.
RECIPE_KIND=rust
SOURCE_PACKAGE=ripgrep
SOURCE_VERSION=14.1.1
BINARY=rg
WORKLOAD_FILES=(tree.awk)
WORKLOAD_ARGS=(-j2 --no-config --no-ignore --count-matches "\\b\\w+\\b" tree)

recipe_build() {
    local out=$1 exe=$2
    CARGO_TARGET_DIR="$out/target" CARGO_PROFILE_RELEASE_DEBUG=2 \
        cargo install --quiet --locked --root "$out/root" --version "$SOURCE_VERSION" ripgrep ||
        rw_die "cargo install ripgrep $SOURCE_VERSION failed (is crates.io reachable?)"
    cp "$out/root/bin/rg" "$exe"
    rm -rf "$out/target"
}

workload() {
    (cd "$1" && awk -v files=400 -v lines=5000 -f "$RW_DIR/workloads/tree.awk")
}
