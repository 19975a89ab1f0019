#!/usr/bin/env python3
"""rec and hostside against perf on programs of the real-world corpus (tests/realworld/),
issue 11 acceptance 3, as ratios from one run:

1. Recording overhead: `rec` at its defaults (dwarf, 24 KiB copies, 999 Hz) versus
   `perf record -F 999 --call-graph dwarf` (perf's default 8 KiB copies) on sqlite3
   (GNU ld, -O2, PIE), interleaved with unprofiled runs (base, perf, rec, base, ...), RUNS
   rounds, medians. Overhead = CPU time (user+sys) of the whole process tree over the
   unprofiled run, so each profiler's own work counts. Also bytes per sample of each file
   and the share of samples each unwinds to the entry.
2. Analysis: one recording of ripgrep (crates.io, full debug info: over 50 MB of DWARF) by
   each tool at --freq FREQ with rec's default copy size, at least 20,000 samples; then
   `hostside report --sysroot` versus `perf report --stdio --symfs`, interleaved, RUNS
   rounds each: median wall time and peak resident memory (each process's own maxrss).

Usage: bench/realworld.py [--runs N] [--freq HZ]   (run via bench/run.sh realworld)
"""
import argparse, json, os, re, resource, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build(program, variant):
    out = subprocess.run([os.path.join(ROOT, "tests/realworld/build.sh"), program, variant],
                         check=True, capture_output=True, text=True).stdout.strip()
    m, args = {}, []
    for line in open(os.path.join(out, "manifest")):
        k, v = line.rstrip("\n").split("=", 1)
        if k == "arg":
            args.append(v)
        else:
            m.setdefault(k, v)
    m["cmd"] = [m["board"]] + args
    return m


def run(cmd, cwd=None):
    """Wall time, CPU time of the whole tree, and the peak RSS (KiB) of the process itself."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if status != 0:
        raise SystemExit(f"{cmd[0]} failed with status {status}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, usage.ru_maxrss


def perf_samples(data, sysroot):
    """Samples in a perf.data and how many of them unwound to an entry (_start or clone3)."""
    out = subprocess.run(["perf", "script", "-i", data, "--symfs", sysroot, "-F", "comm,tid,ip,sym"],
                         capture_output=True, text=True).stdout
    blocks = [b for b in out.split("\n\n") if b.strip()]
    entry = 0
    for b in blocks:
        frames = [l.strip() for l in b.strip().splitlines()[1:]]
        if frames and frames[-1].split()[-1].split("+")[0] in ("_start", "clone3", "clone"):
            entry += 1
    return len(blocks), entry


def rec_default_stack(rec):
    """The default of `--call-graph dwarf` that `rec --help` names."""
    help_text = subprocess.run([rec, "--help"], capture_output=True, text=True).stdout
    return int(re.search(r"bytes, default (\d+)", help_text).group(1))


def hostside_json(hostside, rec_file, sysroot):
    return json.loads(subprocess.run([hostside, "report", "--json", "--top", "1", "--sysroot",
                                      sysroot, rec_file], check=True, capture_output=True,
                                     text=True).stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--freq", type=int, default=12999)
    ap.add_argument("--skip-overhead", action="store_true")
    a = ap.parse_args()
    rec, hostside = os.environ["CROSSPROF_REC"], os.environ["CROSSPROF_HOSTSIDE"]
    tmp = tempfile.mkdtemp(prefix="crossprof-realworld-bench-")

    if not a.skip_overhead:
        sq = build("sqlite3", "bfd-O2-pie")
        perf_data = os.path.join(tmp, "sqlite3.perf.data")
        rec_file = os.path.join(tmp, "sqlite3.zst")
        configs = {
            "base": sq["cmd"],
            "perf": ["perf", "record", "-q", "-F", "999", "--call-graph", "dwarf", "-o",
                     perf_data, "--"] + sq["cmd"],
            "rec": [rec, "--out", rec_file, "--"] + sq["cmd"],
        }
        times = {k: [] for k in configs}
        for _ in range(a.runs):
            for k, cmd in configs.items():
                times[k].append(run(cmd, cwd=sq["workdir"]))
        med = {k: (statistics.median(w for w, _, _ in v), statistics.median(c for _, c, _ in v))
               for k, v in times.items()}
        n_perf, e_perf = perf_samples(perf_data, sq["sysroot"])
        j = hostside_json(hostside, rec_file, sq["sysroot"])
        n_rec = j["cpu"]["samples"]
        e_rec = j["cpu"]["stack_unwinding"]["complete"]
        print(f"1. sqlite3 bfd-O2-pie, {a.runs} interleaved runs, medians")
        for k, (w, c) in med.items():
            print(f"   {k:<5} wall {w:6.3f} s  cpu {c:6.3f} s")
        ow = {k: med[k][0] - med["base"][0] for k in ("perf", "rec")}
        oc = {k: med[k][1] - med["base"][1] for k in ("perf", "rec")}
        print(f"   overhead cpu:  perf {oc['perf']:+.3f} s, rec {oc['rec']:+.3f} s, "
              f"ratio rec/perf {oc['rec'] / oc['perf']:.2f}")
        print(f"   overhead wall: perf {ow['perf']:+.3f} s, rec {ow['rec']:+.3f} s, "
              f"ratio rec/perf {ow['rec'] / ow['perf']:.2f}")
        sp, sr = os.path.getsize(perf_data), os.path.getsize(rec_file)
        print(f"   perf.data {sp} B / {n_perf} samples = {sp / n_perf:.0f} B/sample; "
              f"rec {sr} B / {n_rec} samples = {sr / n_rec:.0f} B/sample; ratio "
              f"{(sr / n_rec) / (sp / n_perf):.4f}")
        print(f"   reaching the entry: perf (8 KiB) {100 * e_perf / n_perf:.1f}%, "
              f"rec ({rec_default_stack(rec)} B) {100 * e_rec / n_rec:.1f}%")

    rg = build("ripgrep", "rust")
    unstripped = rg["unstripped"]
    sections = subprocess.run(["readelf", "-SW", unstripped], capture_output=True,
                              text=True).stdout
    dwarf = sum(int(m.group(1), 16) for m in re.finditer(
        r"\]\s+\.debug_\S+\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)", sections))
    perf_data = os.path.join(tmp, "rg.perf.data")
    rec_file = os.path.join(tmp, "rg.zst")
    stack = rec_default_stack(rec)
    subprocess.run(["perf", "record", "-q", "-N", "-F", str(a.freq), "--call-graph", f"dwarf,{stack}",
                    "-o", perf_data, "--"] + rg["cmd"], cwd=rg["workdir"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run([rec, "--freq", str(a.freq), "--out", rec_file, "--"] + rg["cmd"],
                   cwd=rg["workdir"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    n_perf, _ = perf_samples(perf_data, rg["sysroot"])
    n_rec = hostside_json(hostside, rec_file, rg["sysroot"])["cpu"]["samples"]
    reports = {
        "perf report": ["perf", "report", "-i", perf_data, "--symfs", rg["sysroot"], "--stdio"],
        "hostside report": [hostside, "report", "--sysroot", rg["sysroot"], rec_file],
    }
    res = {k: [] for k in reports}
    for _ in range(a.runs):
        for k, cmd in reports.items():
            res[k].append(run(cmd))
    print(f"2. ripgrep (rust, {dwarf / 1e6:.1f} MB of DWARF), -F {a.freq}, {stack}-byte copies: "
          f"perf {n_perf} samples ({os.path.getsize(perf_data)} B), rec {n_rec} samples "
          f"({os.path.getsize(rec_file)} B); {a.runs} interleaved runs, medians")
    med = {k: (statistics.median(w for w, _, _ in v), statistics.median(r for _, _, r in v))
           for k, v in res.items()}
    for k, (w, r) in med.items():
        print(f"   {k:<16} wall {w:7.3f} s  peak RSS {r / 1024:7.1f} MiB")
    print(f"   speed-up hostside vs perf report: {med['perf report'][0] / med['hostside report'][0]:.1f}x; "
          f"memory hostside/perf: {med['hostside report'][1] / med['perf report'][1]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
