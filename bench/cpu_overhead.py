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
    ap.add_argument("--dwarf", action="store_true", help="also compare stack-copy modes (perf --call-graph dwarf vs rec --call-graph dwarf)")
    ap.add_argument("--program", default="cpu_split.c", help="ground-truth program under tests/programs/ (C, one file)")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rec = os.environ["CROSSPROF_REC"]
    tmp = tempfile.mkdtemp(prefix="crossprof-bench-")
    app = os.path.join(tmp, "cpu_split")
    subprocess.run(["gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer", os.path.join(root, "tests/programs", a.program), "-o", app], check=True)
    subprocess.run(["strip", app], check=True)
    work = [app, str(a.rounds)]
    configs = {
        "base": work,
        "perf": ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(a.freq), "-g", "-o", os.path.join(tmp, "perf.data"), "--"] + work,
        "rec": [rec, "--freq", str(a.freq), "--call-graph", "fp", "--out", os.path.join(tmp, "rec.zst"), "--"] + work,
    }
    if a.dwarf:
        configs["perf-dw"] = ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(a.freq), "--call-graph", "dwarf,8192", "-o", os.path.join(tmp, "perf-dw.data"), "--"] + work
        configs["rec-dw"] = [rec, "--freq", str(a.freq), "--call-graph", "dwarf=8192", "--out", os.path.join(tmp, "rec-dw.zst"), "--"] + work
    results = {k: [] for k in configs}
    for _ in range(a.runs):
        for name, cmd in configs.items():
            results[name].append(run(cmd))
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in results.items()}
    print(f"workload: cpu_split {a.rounds} rounds, {a.runs} interleaved runs each, -F {a.freq}, fp call graphs")
    print(f"{'config':<6} {'wall s':>8} {'cpu s':>8}")
    for k, (w, c) in med.items():
        print(f"{k:<6} {w:>8.3f} {c:>8.3f}")
    pairs = [("perf", "rec")] + ([("perf-dw", "rec-dw")] if a.dwarf else [])
    for p, r in pairs:
        ow = {k: med[k][0] - med["base"][0] for k in (p, r)}
        oc = {k: med[k][1] - med["base"][1] for k in (p, r)}
        print(f"overhead wall: {p} {ow[p]:+.3f} s, {r} {ow[r]:+.3f} s")
        print(f"overhead cpu:  {p} {oc[p]:+.3f} s, {r} {oc[r]:+.3f} s")
        if oc[p] > 0:
            print(f"ratio {r}/{p} (cpu overhead): {oc[r] / oc[p]:.2f}")
    files = {"perf": "perf.data", "rec": "rec.zst", "perf-dw": "perf-dw.data", "rec-dw": "rec-dw.zst"}
    for p, r in pairs:
        sp, sr = os.path.getsize(os.path.join(tmp, files[p])), os.path.getsize(os.path.join(tmp, files[r]))
        print(f"file size: {files[p]} {sp} B, {files[r]} {sr} B, ratio {sr / sp:.3f}")

if __name__ == "__main__":
    sys.exit(main())
