#!/usr/bin/env python3
"""Analysis cost of `hostside report --heap` versus `heaptrack_print`, as ratios from one
interleaved run on real programs (issue 12, acceptance 2: at most 1.0x in time and peak RSS).

Each program of the real-world corpus (tests/realworld/, built once and cached) runs its
workload once under `rec --heap --no-cpu` and once under heaptrack; then the two analyses of
those recordings alternate RUNS times (hostside, heaptrack_print, hostside, ...), so machine
noise hits both alike. Wall time, CPU time (user+sys) and peak RSS (ru_maxrss) per run;
medians. hostside gets the debug sysroot (it symbolizes what it prints); heaptrack_print reads
a file heaptrack already symbolized at record time.

protoc (Debian's, libprotobuf and libstdc++; the workload of bench/heap_real.py, 7.4 M
allocations from deep C++ stacks) runs as installed: hostside gets no sysroot and reads the
modules at their recorded paths, as heaptrack did when it recorded.

Usage: bench/heap_analysis.py [--runs N] [--programs lua,sqlite3,ninja,protoc]
(after scripts/build.sh; `. scripts/env.sh` for CROSSPROF_REC and CROSSPROF_HOSTSIDE)
"""
import argparse, os, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from heap_real import protoc_workload  # noqa: E402

# Extra arguments before the corpus workload's own: SQLite with its lookaside allocator off,
# so that every allocation reaches malloc.
EXTRA = {"sqlite3": ["-lookaside", "0", "0"]}


def run(cmd, cwd=None, env=None):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} failed with {status}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024


def manifest(root, program):
    out = subprocess.run([os.path.join(root, "tests/realworld/build.sh"), program, "bfd-O2-pie"],
                         check=True, capture_output=True, text=True).stdout.strip()
    m = {"arg": []}
    for line in open(os.path.join(out, "manifest")):
        k, _, v = line.rstrip("\n").partition("=")
        if k == "arg":
            m["arg"].append(v)
        else:
            m[k] = v
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--programs", default="lua,sqlite3,ninja,protoc")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rec, hostside = os.environ["CROSSPROF_REC"], os.environ["CROSSPROF_HOSTSIDE"]
    tmp = tempfile.mkdtemp(prefix="crossprof-heapanalysis-")
    print(f"{'program':<9} {'allocs':>10} {'hostside wall/cpu/RSS':>26} {'heaptrack_print':>24}  "
          f"{'ratio wall':>10} {'cpu':>6} {'RSS':>6}")
    for program in a.programs.split(","):
        if program == "protoc":
            cmd, _ = protoc_workload(tmp)
            m = {"board": cmd[0], "unstripped": cmd[0], "workdir": tmp, "sysroot": None}
            args = cmd[1:]
        else:
            m = manifest(root, program)
            args = EXTRA.get(program, []) + m["arg"]
        ours = os.path.join(tmp, f"{program}.zst")
        ht = os.path.join(tmp, f"{program}.ht")
        run([rec, "--heap", "--no-cpu", "--out", ours, "--", m["board"]] + args, cwd=m["workdir"])
        run(["heaptrack", "-o", ht, m["unstripped"]] + args, cwd=m["workdir"])
        configs = {
            "hostside": [hostside, "report", "--heap"]
            + (["--sysroot", m["sysroot"]] if m["sysroot"] else []) + [ours],
            "heaptrack_print": ["heaptrack_print", "-f", ht + ".zst"],
        }
        res = {k: [] for k in configs}
        for _ in range(a.runs):
            for k, cmd in configs.items():
                res[k].append(run(cmd))
        med = {k: [statistics.median(r[i] for r in v) for i in range(3)] for k, v in res.items()}
        allocs = subprocess.run([hostside, "info", "--json", ours], capture_output=True, text=True).stdout
        n = next((l.split(":")[1].strip(" ,") for l in allocs.splitlines() if '"alloc"' in l), "?")
        h, t = med["hostside"], med["heaptrack_print"]
        print(f"{program:<9} {n:>10} {h[0]:>7.2f}s {h[1]:>6.2f}s {h[2] / 2**20:>6.0f}M "
              f"{t[0]:>7.2f}s {t[1]:>6.2f}s {t[2] / 2**20:>6.0f}M  "
              f"{h[0] / t[0]:>10.2f} {h[1] / t[1]:>6.2f} {h[2] / t[2]:>6.2f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
