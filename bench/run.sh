#!/usr/bin/env bash
# Runs a benchmark against the peers (perf) on this machine. Results go to bench/RESULTS.md
# by hand, with the command that produced them.
#   bench/run.sh [cpu] [ARGS...]    CPU-sampling overhead, rec vs perf record (default)
#   bench/run.sh dwarf [ARGS...]    stack-copy size and analysis time, rec+hostside vs perf
#   bench/run.sh stack-size [ARGS...]  which stack-copy size: coverage and cost on real programs
#   bench/run.sh heap [ARGS...]     rec --heap vs heaptrack on tests/programs/heap_bench.c
#   bench/run.sh heapreal [ARGS...] rec --heap vs heaptrack on Debian's lua5.4 and sqlite3
#   bench/run.sh heapsample [ARGS...] rec --heap --heap-sample: slowdown on the real-world corpus
#   bench/run.sh board-stack-size [ARGS...]  the same coverage on the emulated ARM boards
#   bench/run.sh board-heap-cost    rec --heap on the ARMv7 board vs the AArch64 board: cost, file
#   bench/run.sh realworld [ARGS...]   rec and hostside vs perf on sqlite3 and ripgrep
#   bench/run.sh index [ARGS...]    the build-id index's first and cached runs on a large tree
#   bench/run.sh off-cpu [ARGS...]  rec --off-cpu vs perf record -e sched:sched_switch
#   bench/run.sh html [ARGS...]     hostside html on 100,000 samples: time, first render, size
#   bench/run.sh faults [ARGS...]   fault events kept and their cost, rec vs perf record
#   bench/run.sh media [ARGS...]    rec's default vs perf on a GStreamer pipeline: overhead, bytes
#   bench/run.sh rec-size [TRIPLE...]  what rec's bytes are, per crate, per target
#   bench/run.sh scaling [ARGS...]  hostside report on 10k, 100k and 1M samples vs perf report
#   bench/run.sh syscalls [ARGS...] rec -e syscalls vs strace -c -f and perf trace -s on find
set -euo pipefail
cd "$(dirname "$0")/.."
CROSSPROF_BENCH=1 scripts/setup.sh
scripts/build.sh
. scripts/env.sh
what="${1:-cpu}"
case "$what" in
    cpu) shift || true; python3 bench/cpu_overhead.py "$@" ;;
    dwarf) shift; python3 bench/dwarf_unwind.py "$@" ;;
    realworld) shift; python3 bench/realworld.py "$@" ;;
    index)
        shift
        cargo build --locked --profile host -p crossprof-symbols --example index_tree
        python3 bench/build_id_index.py "$@"
        ;;
    off-cpu) shift; python3 bench/off_cpu_overhead.py "$@" ;;
    html) shift; python3 bench/html_report.py "$@" ;;
    faults) shift; python3 bench/fault_events.py "$@" ;;
    media) shift; python3 bench/media.py "$@" ;;
    rec-size) shift; python3 bench/rec_size.py "$@" ;;
    scaling) shift; python3 bench/scaling.py "$@" ;;
    syscalls) shift; python3 bench/syscall_overhead.py "$@" ;;
    stack-size)
        shift
        cargo build --locked --release -p crossprof-tests --example truncate_stacks
        python3 bench/stack_size.py "$@"
        ;;
    heap) shift; python3 bench/heap_overhead.py "$@" ;;
    heapreal) shift; python3 bench/heap_real.py "$@" ;;
    heapsample) shift; python3 bench/heap_sample.py "$@" ;;
    board-stack-size)
        shift
        tests/boards/setup.sh >/dev/null
        targets/dist.sh aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf
        export CROSSPROF_DIST="$PWD/dist"
        cargo build --locked --release -p crossprof-tests --example truncate_stacks
        python3 bench/board_stack_size.py "$@"
        ;;
    board-heap-cost)
        shift
        tests/boards/setup.sh >/dev/null
        targets/dist.sh aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf
        export CROSSPROF_DIST="$PWD/dist"
        python3 bench/board_heap_cost.py "$@"
        ;;
    *) python3 bench/cpu_overhead.py "$@" ;;
esac
