#!/usr/bin/env bash
# Installs what building and testing crossprof needs on a Debian/Ubuntu machine. Idempotent:
# it only installs what is missing, so it is cheap to run before every build.
set -euo pipefail

# Cross gcc for ARM (Thumb-2), i686 and RISC-V plus qemu-user-static: real code of each
# architecture for the unwinding tests. (Debian's gcc-multilib conflicts with the cross
# compilers, so 32-bit x86 code comes from gcc-i686-linux-gnu.) heaptrack is the peer the heap
# reports are checked against; xz makes MiniDebugInfo for the symbol tests; libc6-dbg gives the
# C library's detached DWARF that the build-id index tests find away from its path; debuginfod
# is Debian's server (and elfutils' client) the debuginfod tests fetch from, on a loopback
# that iproute2's ip brings up in a private network namespace; nodejs and
# linux-perf run the JIT-map test against perf. protoc
# (protobuf-compiler) generates hostside's pprof types from the vendored profile.proto; the
# heap tests also run it, a C++ program nobody here wrote, on libprotobuf-dev's .proto files.
# valgrind's callgrind_annotate reads the Callgrind export back; hotspot (its perfparser,
# headless, and the GUI on xvfb's virtual display, pictured by python3) reads the perf.data
# export. strace -c -f and rt-tests' cyclictest are the peers of the system-call and
# scheduling-latency reports. gdb is what `heaptrack -p` attaches with, the peer of
# `rec --heap -p`.
pkgs=(gcc g++ binutils musl-tools file gcc-arm-linux-gnueabihf libc6-dev-armhf-cross
    gcc-i686-linux-gnu libc6-dev-i386-cross gcc-riscv64-linux-gnu libc6-dev-riscv64-cross
    qemu-user-static heaptrack xz-utils libc6-dbg protobuf-compiler libprotobuf-dev debuginfod
    iproute2 nodejs
    linux-perf valgrind hotspot xvfb python3 strace rt-tests gdb)
[ "${CROSSPROF_BENCH:-0}" = 1 ] && pkgs+=(hyperfine)
# shellcheck source=lib/apt.sh
. "$(dirname "$0")/lib/apt.sh"
APT_WHO=setup apt_ensure "${pkgs[@]}"

if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo not found; install Rust with rustup first (https://rustup.rs)" >&2
    exit 1
fi
if ! rustup target list --installed | grep -qx x86_64-unknown-linux-musl; then
    rustup target add x86_64-unknown-linux-musl
fi
