#!/usr/bin/env python3
"""CPU-sampling overhead of `rec` versus `perf record`, as a ratio from one interleaved run.

Workload: tests/programs/cpu_split.c (-O2, frame pointers), ROUNDS rounds. Each configuration
runs RUNS times, interleaved (base, perf, rec, base, perf, rec, ...) so machine noise hits all
alike. For each run we take the wall time and the CPU time (user+sys) of the whole process
tree, which includes the profiler's own work (ring draining, compression, perf's build-id
pass at exit). Overhead = median(tool) - median(base); the ratio rec/perf is the number
issue 2 asks about (<= 1.2).

Usage: bench/cpu_overhead.py [--rounds N] [--runs N]   (needs linux-perf; run via bench/run.sh)
"""
import argparse, os, resource, statistics, subprocess, sys, tempfile, time

def run(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--freq", type=int, default=999)
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rec = os.environ["CROSSPROF_REC"]
    tmp = tempfile.mkdtemp(prefix="crossprof-bench-")
    app = os.path.join(tmp, "cpu_split")
    subprocess.run(["gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer", os.path.join(root, "tests/programs/cpu_split.c"), "-o", app], check=True)
    subprocess.run(["strip", app], check=True)
    work = [app, str(a.rounds)]
    configs = {
        "base": work,
        "perf": ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(a.freq), "-g", "-o", os.path.join(tmp, "perf.data"), "--"] + work,
        "rec": [rec, "--freq", str(a.freq), "--call-graph", "fp", "--out", os.path.join(tmp, "rec.zst"), "--"] + work,
    }
    results = {k: [] for k in configs}
    for _ in range(a.runs):
        for name, cmd in configs.items():
            results[name].append(run(cmd))
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in results.items()}
    print(f"workload: cpu_split {a.rounds} rounds, {a.runs} interleaved runs each, -F {a.freq}, fp call graphs")
    print(f"{'config':<6} {'wall s':>8} {'cpu s':>8}")
    for k, (w, c) in med.items():
        print(f"{k:<6} {w:>8.3f} {c:>8.3f}")
    ow = {k: med[k][0] - med["base"][0] for k in ("perf", "rec")}
    oc = {k: med[k][1] - med["base"][1] for k in ("perf", "rec")}
    print(f"overhead wall: perf {ow['perf']:+.3f} s, rec {ow['rec']:+.3f} s")
    print(f"overhead cpu:  perf {oc['perf']:+.3f} s, rec {oc['rec']:+.3f} s")
    if oc["perf"] > 0:
        print(f"ratio rec/perf (cpu overhead): {oc['rec'] / oc['perf']:.2f}")
    sizes = {k: os.path.getsize(os.path.join(tmp, f)) for k, f in (("perf", "perf.data"), ("rec", "rec.zst"))}
    print(f"file size: perf.data {sizes['perf']} B, rec.zst {sizes['rec']} B, ratio {sizes['rec'] / sizes['perf']:.2f}")

if __name__ == "__main__":
    sys.exit(main())
