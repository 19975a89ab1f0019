#!/usr/bin/env python3
"""Issue 24 acceptance 5: recording overhead and bytes per sample of `rec` at its defaults
(dwarf, 32 KiB copies, 999 Hz) on a GStreamer Vorbis encoding pipeline as Debian ships it,
as ratios to `perf record -F 999 --call-graph dwarf` (perf's default 8 KiB copies) and to
perf with rec's copy size, from one interleaved run: base, perf, perf-same, rec, base, ...
RUNS rounds, medians. Overhead = CPU time (user+sys) of the whole process tree over the
unprofiled run, so each profiler's own work counts. Also the share of samples each tool
unwinds to the entry (hostside with the machine's root as sysroot; perf with --symfs /).
perf runs with -B -N (no build-ids): perf 6.1 aborts in its build-id pass on this pipeline's
recordings.

Usage: bench/media.py [--runs N] [--buffers N]   (run via bench/run.sh media)
"""
import argparse, os, statistics, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from realworld import hostside_json, perf_samples, rec_default_stack, run  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--buffers", type=int, default=12000)
    a = ap.parse_args()
    rec, hostside = os.environ["CROSSPROF_REC"], os.environ["CROSSPROF_HOSTSIDE"]
    tmp = tempfile.mkdtemp(prefix="crossprof-media-bench-")
    cmd = ["gst-launch-1.0", "-q", "audiotestsrc", f"num-buffers={a.buffers}", "wave=pink-noise",
           "!", "audioconvert", "!", "vorbisenc", "quality=0.9", "!", "oggmux", "!", "fakesink"]
    stack = rec_default_stack(rec)
    files = {k: os.path.join(tmp, f"{k}.data") for k in ("perf", "perf-same", "rec")}
    configs = {
        "base": cmd,
        "perf": ["perf", "record", "-q", "-B", "-N", "-F", "999", "--call-graph", "dwarf", "-o",
                 files["perf"], "--"] + cmd,
        "perf-same": ["perf", "record", "-q", "-B", "-N", "-F", "999", "--call-graph", f"dwarf,{stack}",
                      "-o", files["perf-same"], "--"] + cmd,
        "rec": [rec, "--out", files["rec"], "--"] + cmd,
    }
    times = {k: [] for k in configs}
    for _ in range(a.runs):
        for k, c in configs.items():
            times[k].append(run(c, cwd=tmp))
    med = {k: statistics.median(c for _, c, _ in v) for k, v in times.items()}
    print(f"GStreamer Vorbis pipeline ({a.buffers} buffers), {a.runs} interleaved runs, "
          f"median CPU time of the process tree")
    for k, c in med.items():
        print(f"   {k:<9} cpu {c:6.3f} s")
    over = {k: med[k] - med["base"] for k in ("perf", "perf-same", "rec")}
    j = hostside_json(hostside, files["rec"], "/")
    n_rec, e_rec = j["cpu"]["samples"], j["cpu"]["stack_unwinding"]["complete"]
    size_rec = os.path.getsize(files["rec"])
    print(f"   rec ({stack} B copies): overhead {over['rec']:+.3f} s, {size_rec} B / {n_rec} "
          f"samples = {size_rec / n_rec:.0f} B/sample, {100 * e_rec / n_rec:.1f}% reach the entry")
    for k, label in (("perf", "8192 B"), ("perf-same", f"{stack} B")):
        n, e = perf_samples(files[k], "/")
        size = os.path.getsize(files[k])
        print(f"   {k} ({label} copies): overhead {over[k]:+.3f} s, {size} B / {n} samples = "
              f"{size / n:.0f} B/sample, {100 * e / n:.1f}% reach the entry; ratios rec/{k}: "
              f"overhead {over['rec'] / over[k]:.2f}, bytes per sample "
              f"{(size_rec / n_rec) / (size / n):.4f}")


if __name__ == "__main__":
    main()
