#!/usr/bin/env python3
"""Sampled heap recording (`rec --heap --heap-sample 512KiB`, issue 27): its slowdown of the
program's own run time (goal: at most 5%), beside exact `rec --heap` and heaptrack, on the
real-world heap corpus (tests/realworld/: Lua, SQLite with lookaside off, Ninja; GNU ld,
-O2, PIE builds, their corpus workloads).

Per program, RUNS rounds of five configurations, interleaved so that the machine's noise
hits all alike:
  base       the program alone
  sampled    rec --heap --no-cpu --heap-sample SAMPLE
  exact      rec --heap --no-cpu
  heaptrack  heaptrack -o FILE (Debian's 1.4)
  base       again (two base runs per round: the slowdown's reference)
Wall time and CPU time (user+sys) of the whole process tree, the profiler's own work
included. Slowdown = median(tool) / median(base) - 1, wall and CPU; then sampled's slowdown
against exact's and heaptrack's, as ratios.

With --instructions, instead: each program once alone and once under each rec mode, the
program run by valgrind's callgrind, which counts the instructions it executes (its own, the
C library's and the interposer's; not rec's): a measure of the per-call cost that the
machine's noise does not touch. rec's own work is left out; in sampled mode it handles a few
thousand events a run (a 5 s `sleep` under rec costs it 0.02 s of CPU in all).

Usage: bench/heap_sample.py [--runs N] [--sample BYTES] [--only lua|sqlite3|ninja]
                            [--instructions]
(run via bench/run.sh heapsample; needs heaptrack, and valgrind for --instructions; rec and
hostside from scripts/env.sh)
"""
import argparse, os, shutil, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = {"lua": [], "sqlite3": ["-lookaside", "0", "0"], "ninja": []}
CONFIGS = ["base", "sampled", "exact", "heaptrack", "base"]


def build(program):
    out = subprocess.run([os.path.join(ROOT, "tests/realworld/build.sh"), program, "bfd-O2-pie"],
                         check=True, capture_output=True, text=True).stdout.strip()
    m, args = {}, []
    for line in open(os.path.join(out, "manifest")):
        k, v = line.rstrip("\n").split("=", 1)
        if k == "arg":
            args.append(v)
        else:
            m.setdefault(k, v)
    return m, args


def run(cmd, cwd, env):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} failed with status {status}")
    return wall, ru.ru_utime + ru.ru_stime


def command(config, work, out, sample):
    rec = os.environ["CROSSPROF_REC"]
    return {
        "base": work,
        "sampled": [rec, "--heap", "--no-cpu", "--heap-sample", sample, "--out", out, "--"] + work,
        "exact": [rec, "--heap", "--no-cpu", "--out", out, "--"] + work,
        "heaptrack": ["heaptrack", "-o", out] + work,
    }[config]


def instructions(config, work, m, sample, env, tmp):
    """Instructions the program executes under `config` (callgrind's total)."""
    cg = os.path.join(tmp, f"callgrind-{config}")
    valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}"] + work
    run(command(config, valgrind, os.path.join(tmp, f"{config}.out"), sample), m["workdir"], env)
    with open(cg) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    sys.exit(f"no instruction total in {cg}")


def workloads(a):
    """Each program asked for, built: (name, manifest, command line)."""
    for name in [a.only] if a.only else PROGRAMS:
        m, args = build(name)
        yield name, m, [m["board"]] + PROGRAMS[name] + args


def count_instructions(a, env):
    print("| program | instructions alone | sampled | exact | sampled / alone - 1 | "
          "exact / alone - 1 |")
    print("|---|---|---|---|---|---|")
    for name, m, work in workloads(a):
        with tempfile.TemporaryDirectory() as tmp:
            n = {c: instructions(c, work, m, a.sample, env, tmp)
                 for c in ["base", "sampled", "exact"]}
        print(f"| {name} | {n['base']:,} | {n['sampled']:,} | {n['exact']:,} | "
              f"**{100 * (n['sampled'] / n['base'] - 1):+.2f}%** | "
              f"{100 * (n['exact'] / n['base'] - 1):+.2f}% |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sample", default="512KiB")
    ap.add_argument("--only", choices=sorted(PROGRAMS))
    ap.add_argument("--instructions", action="store_true")
    a = ap.parse_args()
    if not shutil.which("heaptrack"):
        sys.exit("heaptrack not found: apt-get install heaptrack")
    env = dict(os.environ)
    if "CROSSPROF_HEAP_LIB" not in env:
        lib = os.path.join(os.path.dirname(env["CROSSPROF_REC"]), "libcrossprof_heap.so")
        env["CROSSPROF_HEAP_LIB"] = lib
    if a.instructions:
        return count_instructions(a, env)
    print("| program | base wall / cpu | sampled slowdown wall / cpu | exact slowdown wall / cpu "
          "| heaptrack slowdown wall / cpu | sampled/exact, sampled/heaptrack (cpu) |")
    print("|---|---|---|---|---|---|")
    for name, m, work in workloads(a):
        times = {c: [] for c in CONFIGS}
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(a.runs):
                for i, c in enumerate(CONFIGS):
                    out = os.path.join(tmp, f"{c}-{r}-{i}")
                    times[c].append(run(command(c, work, out, a.sample), m["workdir"], env))
                    for f in os.listdir(tmp):
                        os.remove(os.path.join(tmp, f))
        med = {c: (statistics.median(t[0] for t in v), statistics.median(t[1] for t in v))
               for c, v in times.items()}
        base = med["base"]
        slow = {c: (med[c][0] / base[0] - 1, med[c][1] / base[1] - 1) for c in CONFIGS}
        pc = lambda s: f"{100 * s[0]:+.1f}% / {100 * s[1]:+.1f}%"
        ratio = lambda x, y: f"{x / y:.3f}" if y > 0 else "-"
        print(f"| {name} | {base[0]:.2f} s / {base[1]:.2f} s | **{pc(slow['sampled'])}** | "
              f"{pc(slow['exact'])} | {pc(slow['heaptrack'])} | "
              f"{ratio(slow['sampled'][1], slow['exact'][1])}, "
              f"{ratio(slow['sampled'][1], slow['heaptrack'][1])} |", flush=True)


if __name__ == "__main__":
    main()
