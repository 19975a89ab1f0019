# Sourced by tests/packaging/setup.sh and check.sh: the pinned linter, the cache, and the
# triples of the build rehearsal, in one place.
PACKAGING_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/crossprof/packaging"
OELINT_VERSION=9.11.2
# PyPI's bitbake-setup bundles bitbake's bb library, whose fetcher checks the recipe's crates.
BITBAKE_SETUP_VERSION=2.19.0
TRIPLE=aarch64-unknown-linux-musl
# The interposer is a dynamic library: linking it needs the board's libc.so and libgcc_s, which a
# Yocto or Buildroot sysroot has and this machine has only for glibc (Debian's arm64 cross
# toolchain). So it is rehearsed for a glibc board, the default C library of both build systems.
HEAP_TRIPLE=aarch64-unknown-linux-gnu
