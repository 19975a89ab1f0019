#!/usr/bin/env python3
"""Which stack-copy size should `rec --call-graph dwarf` default to? Measured on the real-world
corpus (tests/realworld/), in two parts:

1. Coverage, on identical samples: each program is recorded once with the largest copy
   (65528 bytes); copies of that recording with every stack cut to SIZE bytes (what
   `--call-graph dwarf=SIZE` would have captured: the kernel copies from the stack pointer
   upward) are analysed by hostside, giving the share of samples whose stack unwinds to the
   program's or thread's entry at each size (`cpu.stack_unwinding`).
2. Cost on the board, recorded at each size: CPU time of the whole process tree over the
   unprofiled run (the sampling interrupt's copy, rec's draining and compression), bytes
   through the ring per sample (the kernel reserves the full SIZE in every record), bytes per
   sample in the file, and samples the kernel dropped because the ring was full. Runs are
   interleaved (base, size1, size2, ... per round) so machine noise hits all alike; medians
   over RUNS rounds.

Usage: bench/stack_size.py [--runs N] [--sizes 8192,16384,...] [--programs sqlite3:bfd-O2-pie,...]
(run via bench/run.sh stack-size, which builds rec, hostside and the truncate_stacks example)
"""
import argparse, json, os, resource, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PROGRAMS = "sqlite3:bfd-O2-pie,lua:bfd-O2-pie,zstd:bfd-O2-pie,ninja:bfd-O2-pie,ripgrep:rust"


def build(program, variant):
    out = subprocess.run([os.path.join(ROOT, "tests/realworld/build.sh"), program, variant],
                         check=True, capture_output=True, text=True).stdout.strip()
    m, args = {}, []
    for line in open(os.path.join(out, "manifest")):
        k, v = line.rstrip("\n").split("=", 1)
        if k == "arg":
            args.append(v)
        else:
            m[k] = v
    m["cmd"] = [m["board"]] + args
    return m


def run(cmd, cwd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="8192,12288,16384,24576,32768,65528",
                    help="sizes for the coverage table")
    ap.add_argument("--cost-sizes", default="8192,16384,24576,65528",
                    help="sizes for the cost table (each costs RUNS runs per program)")
    ap.add_argument("--programs", default=DEFAULT_PROGRAMS)
    a = ap.parse_args()
    rec, hostside = os.environ["CROSSPROF_REC"], os.environ["CROSSPROF_HOSTSIDE"]
    sizes = [int(s) for s in a.sizes.split(",")]
    cost_sizes = [int(s) for s in a.cost_sizes.split(",")]
    programs = [tuple(p.split(":")) for p in a.programs.split(",")]
    tmp = tempfile.mkdtemp(prefix="crossprof-stack-size-")
    built = {p: build(*p) for p in programs}
    truncate = os.environ.get("CROSSPROF_TRUNCATE", os.path.join(
        os.environ["CARGO_TARGET_DIR"], "release/examples/truncate_stacks"))

    def unwinding(p, path):
        j = json.loads(subprocess.run([hostside, "report", "--json", "--top", "1", "--sysroot",
                                       built[p]["sysroot"], path],
                                      check=True, capture_output=True, text=True).stdout)
        u = j["cpu"]["stack_unwinding"]
        return u, j["cpu"]["samples"], j["recording"]["lost_samples"]

    print("Coverage: samples reaching the entry, one 65528-byte recording per program cut to each size")
    print(f"{'program':<10} {'samples':>8} " + " ".join(f"{s:>7}" for s in sizes))
    for p in programs:
        full = os.path.join(tmp, f"{p[0]}-full.zst")
        subprocess.run([rec, "--call-graph", "dwarf=65528", "--out", full, "--"] + built[p]["cmd"],
                       cwd=built[p]["workdir"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        cells = []
        for size in sizes:
            cut = os.path.join(tmp, f"{p[0]}-cut-{size}.zst")
            subprocess.run([truncate, full, cut, str(size)], check=True)
            u, n, _ = unwinding(p, cut)
            cells.append(f"{100 * u['complete'] / max(n, 1):>6.1f}%")
        print(f"{p[0]:<10} {n:>8} " + " ".join(cells), flush=True)
    print(flush=True)
    # (program, size) -> list of (wall, cpu); size None = unprofiled
    times = {}
    last = {}
    for _ in range(a.runs):
        for p in programs:
            m = built[p]
            for size in [None] + cost_sizes:
                if size is None:
                    cmd = m["cmd"]
                else:
                    out = os.path.join(tmp, f"{p[0]}-{size}.zst")
                    cmd = [rec, "--call-graph", f"dwarf={size}", "--out", out, "--"] + m["cmd"]
                    last[(p, size)] = out
                times.setdefault((p, size), []).append(run(cmd, m["workdir"]))
    print(f"Cost: {a.runs} interleaved runs at each size, medians; rec at its default 999 Hz")
    print(f"{'program':<10} {'size':>6} {'samples':>8} {'lost':>6} {'ring B/sample':>14} "
          f"{'file B/sample':>14} {'cpu s':>7} {'+cpu s':>7} {'+cpu us/sample':>15}")
    for p in programs:
        base = statistics.median(c for _, c in times[(p, None)])
        for size in cost_sizes:
            u, n, lost = unwinding(p, last[(p, size)])
            size_b = os.path.getsize(last[(p, size)])
            cpu = statistics.median(c for _, c in times[(p, size)])
            # A stack-copy record: header, ip, tid, time, cpu, period, the callchain's count
            # (plus 8 bytes per kernel frame), abi + 3 user registers (bp, sp, ip), size, the
            # full SIZE-byte copy, dyn_size.
            ring = size + 8 * 13
            print(f"{p[0]:<10} {size:>6} {n:>8} {lost:>6} {ring:>14} {size_b / max(n, 1):>14.1f} "
                  f"{cpu:>7.3f} {cpu - base:>+7.3f} {1e6 * (cpu - base) / max(n, 1):>15.1f}")
        print(f"{p[0]:<10} {'base':>6} {'':>8} {'':>6} {'':>14} {'':>14} {base:>7.3f}")


if __name__ == "__main__":
    sys.exit(main())
