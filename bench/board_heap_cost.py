#!/usr/bin/env python3
"""Issue 25: the per-allocation cost and the file size of `rec --heap` on the emulated ARMv7
board (sparse stacks, unwound on the host) against the AArch64 board (framehop in the process,
with its memo), on the same programs: tests/programs/heap_bench.c and Lua from the real-world
corpus, each built with Debian's defaults for the board. Runs tests/tests/board_heap_cost.rs
(two boots), which times each program alone and under `rec --heap --no-cpu` on the board,
three rounds interleaved, and prints the medians; this script prints the ratios ARMv7 / AArch64.

Cost per allocation = (median time with rec - median time without) / allocations, wall and CPU
(the whole process tree, rec's draining included). TCG emulates the two instruction sets at
different speeds, so the slowdown relative to the program's own time on the same board is
shown too.

Usage: bench/board_heap_cost.py   (needs CROSSPROF_DIST with both triples' dist/ builds)
"""
import re, subprocess, sys


def main():
    out = subprocess.run(
        ["cargo", "test", "--profile", "host", "-p", "crossprof-tests", "--test",
         "board_heap_cost", "--", "--ignored", "--nocapture", "--test-threads", "1"],
        capture_output=True, text=True)
    rows = {}
    for line in out.stdout.splitlines() + out.stderr.splitlines():
        m = re.search(r"board_heap_cost (\S+) (\S+): (.*)", line)
        if m:
            kv = dict(zip(*[iter(m.group(3).split())] * 2))
            rows[(m.group(1), m.group(2))] = {k: float(v) for k, v in kv.items()}
            print(line)
    if out.returncode != 0 or len(rows) != 4:
        sys.exit(f"board_heap_cost failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    for prog in ("heap_bench", "lua"):
        a, b = rows[("armv7", prog)], rows[("aarch64", prog)]
        print(f"{prog}: per allocation armv7/aarch64 wall {a['wall_ns_per_alloc'] / b['wall_ns_per_alloc']:.2f}x "
              f"cpu {a['cpu_ns_per_alloc'] / b['cpu_ns_per_alloc']:.2f}x; slowdown armv7 "
              f"{a['wall_ratio']:.2f}x vs aarch64 {b['wall_ratio']:.2f}x (wall), "
              f"{a['cpu_ratio']:.2f}x vs {b['cpu_ratio']:.2f}x (cpu); file armv7/aarch64 "
              f"{a['file_bytes'] / b['file_bytes']:.2f}x ({a['file_bytes']:.0f} / {b['file_bytes']:.0f} bytes, "
              f"{a['allocations']:.0f} / {b['allocations']:.0f} allocations)")


if __name__ == "__main__":
    main()
