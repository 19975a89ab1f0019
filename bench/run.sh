#!/usr/bin/env bash
# Runs the benchmarks against the peers (perf) on this machine. Results go to bench/RESULTS.md
# by hand, with the command that produced them.
set -euo pipefail
cd "$(dirname "$0")/.."
CROSSPROF_BENCH=1 scripts/setup.sh
scripts/build.sh
. scripts/env.sh
python3 bench/cpu_overhead.py "$@"
