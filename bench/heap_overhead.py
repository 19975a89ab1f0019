#!/usr/bin/env python3
"""Heap-recording overhead of `rec --heap` versus heaptrack, as ratios from one interleaved run.

Workload: tests/programs/heap_bench.c (-O2 -g, stripped; no frame pointers): N short-lived
16-79 byte allocations, 20,000 leaked calloc(1, 100), a 10,000-step realloc loop. Each
configuration runs RUNS times, interleaved (base, heaptrack, rec, rec-nocpu, base, ...) so
machine noise hits all alike. Wall time and CPU time (user+sys) cover the whole process tree,
including the profiler's own work (heaptrack_interpret and its compressor; rec's draining and
compression). Slowdown = median(tool) - median(base); issue 3 asks rec's to be at most half of
heaptrack's, and rec's file at most 2x heaptrack's .zst. rec's peak RSS is the largest
ru_maxrss that wait4 reports for the rec process tree (rec dominates it: the workload itself
stays under a few MiB).

Usage: bench/heap_overhead.py [--n N] [--runs N]   (needs heaptrack; the interposer is
CROSSPROF_HEAP_LIB or libcrossprof_heap.so next to $CROSSPROF_REC)
"""
import argparse, glob, os, statistics, subprocess, sys, tempfile, time


def run(cmd, env=None):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{cmd[0]} failed with {status}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rec = os.environ["CROSSPROF_REC"]
    env = dict(os.environ)
    if "CROSSPROF_HEAP_LIB" not in env:
        env["CROSSPROF_HEAP_LIB"] = os.path.join(os.path.dirname(rec), "libcrossprof_heap.so")
    tmp = tempfile.mkdtemp(prefix="crossprof-heapbench-")
    app = os.path.join(tmp, "heap_bench")
    subprocess.run(["gcc", "-O2", "-g", os.path.join(root, "tests/programs/heap_bench.c"), "-o", app], check=True)
    subprocess.run(["strip", app], check=True)
    work = [app, str(a.n)]
    ht_out = os.path.join(tmp, "ht")
    configs = {
        "base": work,
        "heaptrack": ["heaptrack", "-o", ht_out, "--"] + work,
        "rec": [rec, "--heap", "--out", os.path.join(tmp, "rec.zst"), "--"] + work,
        "rec-nocpu": [rec, "--heap", "--no-cpu", "--out", os.path.join(tmp, "rec-nocpu.zst"), "--"] + work,
    }
    results = {k: [] for k in configs}
    for _ in range(a.runs):
        for name, cmd in configs.items():
            results[name].append(run(cmd, env))
    med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v)) for k, v in results.items()}
    print(f"workload: heap_bench {a.n} short-lived allocations (+20,000 leaked, 10,000 reallocs), {a.runs} interleaved runs each")
    print(f"{'config':<10} {'wall s':>8} {'cpu s':>8}")
    for k, (w, c) in med.items():
        print(f"{k:<10} {w:>8.3f} {c:>8.3f}")
    for k in ("rec", "rec-nocpu"):
        ow = {t: med[t][0] - med["base"][0] for t in ("heaptrack", k)}
        oc = {t: med[t][1] - med["base"][1] for t in ("heaptrack", k)}
        print(f"slowdown wall: heaptrack {ow['heaptrack']:+.3f} s, {k} {ow[k]:+.3f} s, ratio {ow[k] / ow['heaptrack']:.2f}")
        print(f"overhead cpu:  heaptrack {oc['heaptrack']:+.3f} s, {k} {oc[k]:+.3f} s, ratio {oc[k] / oc['heaptrack']:.2f}")
    ht = max(glob.glob(ht_out + "*"), key=os.path.getmtime)
    sizes = {"heaptrack": os.path.getsize(ht), "rec": os.path.getsize(os.path.join(tmp, "rec.zst")),
             "rec-nocpu": os.path.getsize(os.path.join(tmp, "rec-nocpu.zst"))}
    print(f"file size: heaptrack {sizes['heaptrack']} B, rec {sizes['rec']} B (ratio {sizes['rec'] / sizes['heaptrack']:.2f}), "
          f"rec --no-cpu {sizes['rec-nocpu']} B (ratio {sizes['rec-nocpu'] / sizes['heaptrack']:.2f})")
    for k in ("rec", "rec-nocpu"):
        print(f"peak RSS of the {k} process tree: {max(r[2] for r in results[k]) / 1024:.1f} MiB")


if __name__ == "__main__":
    sys.exit(main())
