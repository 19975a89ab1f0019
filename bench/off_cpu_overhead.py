#!/usr/bin/env python3
"""Off-CPU recording overhead: `rec --off-cpu` versus `perf record -e sched:sched_switch
--switch-events -g`, as a ratio from one interleaved run (issue 14, acceptance 6).

Workload: bench/workloads/pingpong.c (-O2, frame pointers, so perf's -g chains are complete):
two threads pass a token through pipes ROUNDS times, two context switches per round. Each
configuration runs RUNS times, interleaved (base, perf, rec, rec-fp, base, ...). For each run we
take the wall time and the CPU time (user+sys) of the whole process tree, the profiler's own
work included. Overhead = median(tool) - median(base).

Configurations: perf records every sched_switch tracepoint hit with its kernel and user call
chain plus switch records; rec records switch records, a context-switch sample with the
blocking stack (default: registers plus an 8 KiB stack copy; `rec-fp`: the kernel's frame-
pointer chain) and its usual 999 Hz CPU samples.

Usage: bench/off_cpu_overhead.py [--rounds N] [--runs N]   (needs root and linux-perf; via
bench/run.sh off-cpu)
"""
import argparse, os, resource, statistics, subprocess, sys, tempfile, time

def run(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.stderr.decode(errors="replace")

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200000)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rec = os.environ["CROSSPROF_REC"]
    hostside = os.environ["CROSSPROF_HOSTSIDE"]
    tmp = tempfile.mkdtemp(prefix="crossprof-bench-")
    app = os.path.join(tmp, "pingpong")
    subprocess.run(["gcc", "-O2", "-g", "-pthread", "-fno-omit-frame-pointer", os.path.join(root, "bench/workloads/pingpong.c"), "-o", app], check=True)
    work = [app, str(a.rounds)]
    configs = {
        "base": work,
        "perf": ["perf", "record", "-q", "-e", "sched:sched_switch", "--switch-events", "-g", "-o", os.path.join(tmp, "perf.data"), "--"] + work,
        "rec": [rec, "--off-cpu", "--out", os.path.join(tmp, "rec.zst"), "--"] + work,
        "rec-fp": [rec, "--off-cpu", "--call-graph", "fp", "--out", os.path.join(tmp, "rec-fp.zst"), "--"] + work,
    }
    results = {k: [] for k in configs}
    notes = {}
    for _ in range(a.runs):
        for name, cmd in configs.items():
            wall, cpu, err = run(cmd)
            results[name].append((wall, cpu))
            if err.strip():
                notes[name] = err.strip().splitlines()[-1]
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in results.items()}
    print(f"workload: pingpong {a.rounds} rounds ({2 * a.rounds} context switches), {a.runs} interleaved runs each")
    print(f"{'config':<7} {'wall s':>8} {'cpu s':>8}")
    for k, (w, c) in med.items():
        print(f"{k:<7} {w:>8.3f} {c:>8.3f}")
    ow = {k: med[k][0] - med["base"][0] for k in configs}
    oc = {k: med[k][1] - med["base"][1] for k in configs}
    for k in ("perf", "rec", "rec-fp"):
        print(f"overhead {k:<7} wall {ow[k]:+.3f} s, cpu {oc[k]:+.3f} s")
    for r in ("rec", "rec-fp"):
        if oc["perf"] > 0 and ow["perf"] > 0:
            print(f"ratio {r}/perf: cpu overhead {oc[r] / oc['perf']:.2f}, wall overhead {ow[r] / ow['perf']:.2f}")
    for k, n in notes.items():
        print(f"{k} said: {n}")
    stats = subprocess.run(["perf", "report", "--stats", "-i", os.path.join(tmp, "perf.data")], capture_output=True, text=True).stdout
    print("perf's last run: " + "; ".join(" ".join(l.split()) for l in stats.splitlines() if "LOST" in l or "SAMPLE events" in l or "SWITCH events" in l))
    for name in ("perf.data", "rec.zst", "rec-fp.zst"):
        print(f"file size {name}: {os.path.getsize(os.path.join(tmp, name))} B")
    # What each recording holds: rec's last run, analysed.
    out = subprocess.run([hostside, "report", "--off-cpu", "--json", os.path.join(tmp, "rec.zst")], check=True, capture_output=True, text=True).stdout
    import json
    oc_json = json.loads(out)["off_cpu"]
    print(f"rec: {oc_json['wait_ns'] / 1e9:.3f} s off-CPU, stacks {oc_json['stacks']}, exact {oc_json['exact_ns'] / 1e9:.3f} s, approximate {oc_json['approximate_ns'] / 1e9:.3f} s, lost samples {json.loads(out)['recording']['lost_samples']}")

if __name__ == "__main__":
    sys.exit(main())
