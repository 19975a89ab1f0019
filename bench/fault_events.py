#!/usr/bin/env python3
"""Fault events with each tool's call graphs: what is kept, what it costs (issue 24).

Workload: tests/programs/page_faults.c (-O2, the compiler's default: no frame pointers), which
takes exactly 16,384 minor faults touching a 64 MiB anonymous mapping in a few milliseconds,
a burst no drain keeps up with. Configurations, interleaved RUNS times:
- `rec -e page-faults` with its defaults (frame-pointer chains for fault events),
- `rec -e page-faults --call-graph dwarf` (24 KiB stack copies, the CPU default),
- `perf record -e page-faults -c 1 -g` (frame-pointer chains),
- `perf record -e page-faults -c 1 --call-graph dwarf` (perf's 8 KiB copies).
For each: faults kept and lost (rec: `hostside info`; perf: `perf report`'s sample count and
"Total Lost Samples"), the file's bytes per kept fault, and the command's wall time (the tool's
start and end included: these runs are short). Medians are printed, with the ratios of rec's
default to perf -g.

Usage: bench/fault_events.py [--runs N]   (needs linux-perf; via bench/run.sh faults)
"""
import argparse, json, os, re, statistics, subprocess, sys, tempfile, time

def timed(cmd):
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - t0

def rec_counts(hostside, path):
    info = json.loads(subprocess.run([hostside, "info", "--json", path], check=True,
                                     capture_output=True, text=True).stdout)
    return info["records"].get("sample", 0), info["lost_samples"]

def perf_counts(path):
    rep = subprocess.run(["perf", "report", "--stdio", "-i", path], capture_output=True, text=True).stdout
    kept = re.search(r"# Samples: (\d+)(K?)", rep)
    n = int(kept.group(1)) * (1000 if kept.group(2) else 1) if kept else 0
    stats = subprocess.run(["perf", "report", "--stats", "-i", path], capture_output=True, text=True).stdout
    m = re.search(r"^\s*SAMPLE events:\s+(\d+)", stats, re.M)
    n = int(m.group(1)) if m else n
    lost = re.search(r"Total Lost Samples: (\d+)", rep)
    return n, int(lost.group(1)) if lost else 0

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    rec, hostside = os.environ["CROSSPROF_REC"], os.environ["CROSSPROF_HOSTSIDE"]
    tmp = tempfile.mkdtemp(prefix="faults-")
    app = os.path.join(tmp, "page_faults")
    subprocess.run(["gcc", "-O2", "-g", "-Wl,--build-id", "tests/programs/page_faults.c", "-o", app], check=True)
    out = os.path.join(tmp, "out")
    configs = {
        "rec (default: fp)": ([rec, "-e", "page-faults", "--out", out, app], "rec"),
        "rec --call-graph dwarf": ([rec, "-e", "page-faults", "--call-graph", "dwarf", "--out", out, app], "rec"),
        "perf -g": (["perf", "record", "-q", "-e", "page-faults", "-c", "1", "-g", "-o", out, app], "perf"),
        "perf --call-graph dwarf": (["perf", "record", "-q", "-e", "page-faults", "-c", "1", "--call-graph", "dwarf", "-o", out, app], "perf"),
    }
    rows = {k: [] for k in configs}
    for _ in range(a.runs):
        for name, (cmd, tool) in configs.items():
            wall = timed(cmd)
            kept, lost = rec_counts(hostside, out) if tool == "rec" else perf_counts(out)
            rows[name].append((wall, kept, lost, os.path.getsize(out)))
            os.remove(out)
    med = lambda xs: statistics.median(xs)
    print("| configuration | faults kept (median) | lost (median, max) | bytes per kept fault | wall |")
    print("|---|---|---|---|---|")
    summary = {}
    for name, rs in rows.items():
        wall, kept = med([r[0] for r in rs]), med([r[1] for r in rs])
        lost = [r[2] for r in rs]
        size = med([r[3] for r in rs])
        summary[name] = (wall, kept, size)
        print(f"| {name} | {kept:,.0f} | {med(lost):,.0f}, {max(lost):,} | {size / max(kept, 1):,.1f} | {wall * 1000:.0f} ms |")
    r, p = summary["rec (default: fp)"], summary["perf -g"]
    print(f"\nrec default / perf -g: wall {r[0] / p[0]:.2f}, file {r[2] / p[2]:.3f}")

if __name__ == "__main__":
    sys.exit(main())
