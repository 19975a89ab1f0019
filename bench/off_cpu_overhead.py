#!/usr/bin/env python3
"""Off-CPU recording overhead: `rec --off-cpu` versus `perf record -e sched:sched_switch
--switch-events -g`, as a ratio from one interleaved run (issue 14, acceptance 6).

Workload: bench/workloads/pingpong.c (-O2, frame pointers, so perf's -g chains are complete):
two threads pass a token through pipes ROUNDS times, two context switches per round. Each
configuration runs RUNS times, interleaved (base, perf, perf-waking, rec, rec-nowake, base,
...). For each run we take the wall time and the CPU time (user+sys) of the whole process tree,
the profiler's own work included (rec's threads and perf's, and the kernel's work in the
application for both). Overhead = median(tool) - median(base).

Each rec configuration is compared with the perf one that records the same events:
- `perf` (`-e sched:sched_switch --switch-events -g`, the command of issue 14's acceptance)
  records every switch's tracepoint with its kernel and user call chain, plus switch records;
  `rec-nowake` (`rec --off-cpu --no-wakeups`) records switch records and a context-switch
  sample with the blocking stack at every switch (registers and a 2 KiB user stack copy,
  `--off-cpu-stack`'s default).
- `perf-waking` adds `-e sched:sched_waking` (the waker's call chain at every wakeup);
  `rec` (`rec --off-cpu`, its default) adds the same tracepoint with the waker's registers
  and stack copy.
Beyond perf, both rec configurations take their usual 999 Hz CPU samples with 24 KiB stack
copies. What each tool dropped is counted in every run and printed: perf's lost samples (`perf report`'s "Total Lost Samples", the sum of
its LOST records) and rec's (the Lost records `hostside info` sums), next to the records each
kept, so a ratio is never read without its losses.

Usage: bench/off_cpu_overhead.py [--rounds N] [--runs N]   (needs root and linux-perf; via
bench/run.sh off-cpu)
"""
import argparse, json, os, re, resource, statistics, subprocess, sys, tempfile, time

def run(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.stderr.decode(errors="replace")

def perf_kept_lost(path):
    """(records kept: samples + switch records, samples lost) of a perf.data."""
    stats = subprocess.run(["perf", "report", "--stats", "-i", path], capture_output=True, text=True).stdout
    kept = 0
    for kind in ("SAMPLE", "SWITCH"):
        m = re.search(rf"^\s*{kind} events:\s+(\d+)", stats, re.M)
        kept += int(m.group(1)) if m else 0
    rep = subprocess.run(["perf", "report", "--stdio", "-i", path], capture_output=True, text=True).stdout
    m = re.search(r"Total Lost Samples: (\d+)", rep)
    return kept, int(m.group(1)) if m else 0

def rec_kept_lost(hostside, path):
    info = json.loads(subprocess.run([hostside, "info", "--json", path], check=True, capture_output=True, text=True).stdout)
    r = info["records"]
    return r.get("event_sample", 0) + r.get("switch", 0), info["lost_samples"]

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rec = os.environ["CROSSPROF_REC"]
    hostside = os.environ["CROSSPROF_HOSTSIDE"]
    tmp = tempfile.mkdtemp(prefix="crossprof-bench-")
    app = os.path.join(tmp, "pingpong")
    subprocess.run(["gcc", "-O2", "-g", "-pthread", "-fno-omit-frame-pointer", os.path.join(root, "bench/workloads/pingpong.c"), "-o", app], check=True)
    work = [app, str(a.rounds)]
    out = {k: os.path.join(tmp, f) for k, f in (("perf", "perf.data"), ("perf-waking", "perf-waking.data"), ("rec", "rec.zst"), ("rec-nowake", "rec-nowake.zst"))}
    perf = ["perf", "record", "-q", "-e", "sched:sched_switch", "--switch-events", "-g"]
    configs = {
        "base": work,
        "perf": perf + ["-o", out["perf"], "--"] + work,
        "perf-waking": perf + ["-e", "sched:sched_waking", "-o", out["perf-waking"], "--"] + work,
        "rec": [rec, "--off-cpu", "--out", out["rec"], "--"] + work,
        "rec-nowake": [rec, "--off-cpu", "--no-wakeups", "--out", out["rec-nowake"], "--"] + work,
    }
    same = {"rec": "perf-waking", "rec-nowake": "perf"}
    results = {k: [] for k in configs}
    kept_lost = {k: [] for k in configs if k != "base"}
    for _ in range(a.runs):
        for name, cmd in configs.items():
            wall, cpu, _err = run(cmd)
            results[name].append((wall, cpu))
            if name.startswith("perf"):
                kept_lost[name].append(perf_kept_lost(out[name]))
            elif name != "base":
                kept_lost[name].append(rec_kept_lost(hostside, out[name]))
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in results.items()}
    print(f"workload: pingpong {a.rounds} rounds ({2 * a.rounds} context switches), {a.runs} interleaved runs each")
    print(f"{'config':<11} {'wall s':>8} {'cpu s':>8}  records kept / lost, each run")
    for k, (w, c) in med.items():
        runs = "  ".join(f"{kept}/{lost}" for kept, lost in kept_lost.get(k, []))
        print(f"{k:<11} {w:>8.3f} {c:>8.3f}  {runs}")
    ow = {k: med[k][0] - med["base"][0] for k in configs}
    oc = {k: med[k][1] - med["base"][1] for k in configs}
    for k in kept_lost:
        lost = [l for _, l in kept_lost[k]]
        print(f"overhead {k:<11} wall {ow[k]:+.3f} s, cpu {oc[k]:+.3f} s; lost per run: median {statistics.median(lost):.0f}, max {max(lost)}")
    for r, p in same.items():
        if oc[p] > 0 and ow[p] > 0:
            print(f"ratio {r}/{p} (same events): cpu overhead {oc[r] / oc[p]:.2f}, wall overhead {ow[r] / ow[p]:.2f}")
    for name in out:
        print(f"file size {name} (last run): {os.path.getsize(out[name])} B")
    # What rec's last recording holds, analysed.
    rep = json.loads(subprocess.run([hostside, "report", "--off-cpu", "--json", out["rec"]], check=True, capture_output=True, text=True).stdout)
    o = rep["off_cpu"]
    print(f"rec (last run): {o['wait_ns'] / 1e9:.3f} s off-CPU, stacks {o['stacks']}, exact {o['exact_ns'] / 1e9:.3f} s, approximate {o['approximate_ns'] / 1e9:.3f} s, lost samples {rep['recording']['lost_samples']}")

if __name__ == "__main__":
    sys.exit(main())
