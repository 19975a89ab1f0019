#!/usr/bin/env python3
"""Stack-copy (`--call-graph dwarf`) recordings: size per sample and analysis time, rec +
hostside versus perf record + perf report, on the same workload in the same run.

Workload: tests/programs/deep.c + deep_lib.c (-O2, no frame pointers, 12 levels across a
shared library plus a 20-deep recursion), run once under each recorder at the same frequency
and stack size. Reported: bytes per sample of each file, and the median wall time of
`hostside report` versus `perf report --stdio` over RUNS interleaved runs each.

With --baseline HOSTSIDE, a second hostside binary (an older build) is timed on the same
file in the same interleaved runs, so a change can be measured against the machine's noise.

Usage: bench/dwarf_unwind.py [--rounds N] [--freq HZ] [--stack BYTES] [--runs N]
                             [--baseline HOSTSIDE]
(needs linux-perf; run via bench/run.sh dwarf)
"""
import argparse, os, statistics, subprocess, sys, tempfile, time


def sh(cmd, **kw):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)


def timed(cmd):
    t0 = time.monotonic()
    sh(cmd)
    return time.monotonic() - t0


def count_perf_samples(data):
    out = subprocess.run(["perf", "report", "-i", data, "--stdio", "--header-only"], capture_output=True, text=True).stdout
    out2 = subprocess.run(["perf", "script", "-i", data, "-F", "period"], capture_output=True, text=True).stdout
    return len([l for l in out2.splitlines() if l.strip()])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4000)
    ap.add_argument("--freq", type=int, default=4999)
    ap.add_argument("--stack", type=int, default=8192)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--baseline", help="an older hostside binary timed alongside")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rec, hostside = os.environ["CROSSPROF_REC"], os.environ["CROSSPROF_HOSTSIDE"]
    tmp = tempfile.mkdtemp(prefix="crossprof-dwarf-")
    lib = os.path.join(tmp, "libdeep.so")
    app = os.path.join(tmp, "deep")
    sh(["gcc", "-O2", "-g", "-shared", "-fPIC", os.path.join(root, "tests/programs/deep_lib.c"), "-o", lib])
    sh(["gcc", "-O2", "-g", os.path.join(root, "tests/programs/deep.c"), "-L" + tmp, "-ldeep", "-Wl,-rpath," + tmp, "-o", app])
    work = [app, str(a.rounds)]
    perf_data = os.path.join(tmp, "perf.data")
    rec_file = os.path.join(tmp, "rec.zst")
    sh(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(a.freq), "--call-graph", f"dwarf,{a.stack}", "-o", perf_data, "--"] + work)
    sh([rec, "--freq", str(a.freq), "--call-graph", f"dwarf={a.stack}", "--out", rec_file, "--"] + work)
    perf_samples = count_perf_samples(perf_data)
    info = subprocess.run([hostside, "info", "--json", rec_file], capture_output=True, text=True, check=True).stdout
    import json
    rec_samples = json.loads(info)["records"]["sample"]
    perf_size, rec_size = os.path.getsize(perf_data), os.path.getsize(rec_file)
    times = {"perf report": [], "hostside report": []}
    if a.baseline:
        times["baseline report"] = []
    for _ in range(a.runs):
        times["perf report"].append(timed(["perf", "report", "-i", perf_data, "--stdio"]))
        times["hostside report"].append(timed([hostside, "report", rec_file]))
        if a.baseline:
            times["baseline report"].append(timed([a.baseline, "report", rec_file]))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"workload: deep {a.rounds} rounds, -F {a.freq}, dwarf stack {a.stack} B, {a.runs} interleaved report runs")
    print(f"perf.data: {perf_size} B / {perf_samples} samples = {perf_size / max(perf_samples, 1):.0f} B/sample")
    print(f"rec.zst:   {rec_size} B / {rec_samples} samples = {rec_size / max(rec_samples, 1):.0f} B/sample")
    print(f"size ratio rec/perf per sample: {(rec_size / max(rec_samples, 1)) / (perf_size / max(perf_samples, 1)):.3f}")
    for k, v in med.items():
        print(f"{k:<16} median {v:.3f} s")
    print(f"speed-up hostside vs perf report: {med['perf report'] / med['hostside report']:.1f}x")
    if a.baseline:
        print(f"speed-up baseline vs perf report: {med['perf report'] / med['baseline report']:.1f}x")
        print(f"hostside / baseline time: {med['hostside report'] / med['baseline report']:.2f}")


if __name__ == "__main__":
    sys.exit(main())
