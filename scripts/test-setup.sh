#!/usr/bin/env bash
# Everything the test suite needs from the machine, done once before any test runs: every Debian
# package, rustup target, pip and npm package a test uses, and the one piece of root setup a
# fresh machine lacks (tracefs, for the wakeup tests). Idempotent: a second run changes nothing.
# scripts/test.sh runs it; the tests themselves only check and never install.
set -euo pipefail
cd "$(dirname "$0")/.."
# The build's own packages and targets (scripts/build.sh runs this too; cheap when done).
scripts/setup.sh
# The emulated boards: QEMU, cross compilers, Debian kernels and C libraries in the user cache.
tests/boards/setup.sh >/dev/null
# The real-world corpus: dpkg-dev, tcl, lld and mold, perf, the ARM cross compilers, libc6-dbg.
tests/realworld/setup.sh all
# The consumers of the exports: go tool pprof, headless Chromium, speedscope and friends (npm).
tests/browser/setup.sh >/dev/null
# The packaging checks: python3-venv with oelint-adv, the aarch64 cross compiler and targets.
tests/packaging/setup.sh
# zig, cargo-zigbuild and the rustup targets of every board triple.
targets/setup.sh
# The wakeup tracepoint (sched:sched_waking) is read through tracefs, which a fresh machine has
# not mounted; perf and rec both look for it at /sys/kernel/tracing.
if [ ! -e /sys/kernel/tracing/events ] && [ ! -e /sys/kernel/debug/tracing/events ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "test-setup: mounting tracefs at /sys/kernel/tracing" >&2
    $sudo mount -t tracefs nodev /sys/kernel/tracing ||
        echo "test-setup: cannot mount tracefs; the wakeup tests will fail (mount it as root)" >&2
fi
