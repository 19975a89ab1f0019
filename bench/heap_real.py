#!/usr/bin/env python3
"""Heap recording on real programs: `rec --heap` against heaptrack, as ratios from one
interleaved run (issue 12, acceptance 2).

Programs: Debian's packaged lua5.4 running bench/workloads/alloc.lua (15.2 M allocations,
realloc-based allocator), sqlite3 with its lookaside allocator off running
bench/workloads/sqlite.sql (11.8 M allocations) and perl running bench/workloads/alloc.pl
(7.5 M allocations) and protoc, a C++ program (libprotobuf, libstdc++), generating C++ and
Python for ten renamed copies of libprotobuf-dev's eleven .proto files (7.4 M allocations
from deep call chains whose whole stacks rarely repeat; see protoc_workload). Perl runs with PERL_HASH_SEED=0: with a random hash seed the order in
which a hash's entries are freed differs per hash and per run, and some seeds make every
tool's file several times larger (measured: seed 1 and 2 gave heaptrack 1.54 MB and rec
--heap --no-cpu 0.82 MB, seed 0 gave 268 KB and 63 KB), so without it the sizes compare runs
of different workloads. Per program five configurations run
interleaved (base, heaptrack, rec --heap --no-cpu, rec --heap, base, ...) so that the
machine's noise hits all alike:
  base        the program alone
  heaptrack   heaptrack -o FILE (1.4, Debian; its recorder, interpreter and compressor)
  rec-nocpu   rec --heap --no-cpu
  rec         rec --heap (CPU sampling on, the default: cpu-clock, dwarf stack copies)
Wall time and CPU time (user+sys) cover the whole process tree, the profiler's own work
included. Slowdown = median(tool) - median(base); the ratios divide rec's slowdown by
heaptrack's (goal: at most 0.5, wall and CPU, sampling off and on). File sizes are medians
over the runs, against heaptrack's .zst (goal: at most 1.0 with sampling off, 1.5 on), and
bytes per heap event (allocations + frees, from `hostside info --json`).

Usage: bench/heap_real.py [--runs N] [--only PROGRAM[,PROGRAM...]] (lua, sqlite, perl, protoc)
(needs heaptrack, lua5.4, sqlite3, perl, protoc and libprotobuf-dev installed; rec and hostside from scripts/env.sh,
the interposer as CROSSPROF_HEAP_LIB or libcrossprof_heap.so next to $CROSSPROF_REC)
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = {
    "lua": (["lua5.4", os.path.join(ROOT, "bench/workloads/alloc.lua")], None),
    "sqlite": (["sqlite3", "-lookaside", "0", "0", ":memory:"],
               os.path.join(ROOT, "bench/workloads/sqlite.sql")),
    "perl": (["perl", os.path.join(ROOT, "bench/workloads/alloc.pl")], None),
    "protoc": None,  # made in the run's directory by protoc_workload
}
PROTO_DIR = "/usr/include/google/protobuf"
PROTO_COPIES = 10


def protoc_workload(tmp):
    """protoc generating C++ and Python for PROTO_COPIES copies of libprotobuf-dev's .proto
    files, each copy in its own package (so that one run compiles them all), named in an
    argument file (heaptrack cannot take a long command line)."""
    src, out = os.path.join(tmp, "protos"), os.path.join(tmp, "protoc-out")
    names = []
    for i in range(PROTO_COPIES):
        os.makedirs(os.path.join(src, f"p{i}"), exist_ok=True)
        for f in sorted(os.listdir(PROTO_DIR)):
            if not f.endswith(".proto"):
                continue
            text = open(os.path.join(PROTO_DIR, f)).read()
            text = text.replace("google.protobuf", f"bench.p{i}").replace("google/protobuf/", f"p{i}/")
            open(os.path.join(src, f"p{i}", f), "w").write(text)
            names.append(f"p{i}/{f}")
    os.makedirs(out, exist_ok=True)
    args = os.path.join(tmp, "protoc.args")
    open(args, "w").write("\n".join([f"-I{src}", f"--cpp_out={out}", f"--python_out={out}"] + names) + "\n")
    return ["protoc", "@" + args], None
CONFIGS = ["base", "heaptrack", "rec-nocpu", "rec"]


def run(cmd, stdin_path, env):
    stdin = open(stdin_path, "rb") if stdin_path else subprocess.DEVNULL
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if stdin_path:
        stdin.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} failed with status {status}")
    return wall, ru.ru_utime + ru.ru_stime


def command(config, work, out):
    if config == "base":
        return work
    if config == "heaptrack":
        return ["heaptrack", "-o", out] + work
    extra = ["--no-cpu"] if config == "rec-nocpu" else []
    return [os.environ["CROSSPROF_REC"], "--heap"] + extra + ["--out", out, "--"] + work


def heap_events(path):
    out = subprocess.run([os.environ["CROSSPROF_HOSTSIDE"], "info", "--json", path],
                         check=True, capture_output=True, text=True).stdout
    rec = json.loads(out)["records"]
    return rec.get("alloc", 0) + rec.get("free", 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", help="comma-separated programs, of " + ",".join(PROGRAMS))
    a = ap.parse_args()
    programs = a.only.split(",") if a.only else list(PROGRAMS)
    for prog in programs:
        if prog not in PROGRAMS:
            sys.exit(f"unknown program {prog}: one of {', '.join(PROGRAMS)}")
    tools = {"lua": "lua5.4", "sqlite": "sqlite3", "perl": "perl", "protoc": "protoc"}
    for tool in ["heaptrack"] + [tools[p] for p in programs]:
        if not shutil.which(tool):
            sys.exit(f"{tool} not found: apt-get install heaptrack lua5.4 sqlite3 perl protobuf-compiler")
    env = dict(os.environ)
    env["PERL_HASH_SEED"] = "0"
    if "CROSSPROF_HEAP_LIB" not in env:
        env["CROSSPROF_HEAP_LIB"] = os.path.join(os.path.dirname(env["CROSSPROF_REC"]), "libcrossprof_heap.so")
    tmp = tempfile.mkdtemp(prefix="crossprof-heapreal-")
    if "protoc" in programs:
        PROGRAMS["protoc"] = protoc_workload(tmp)
    times = {(p, c): [] for p in programs for c in CONFIGS}
    sizes = {(p, c): [] for p in programs for c in CONFIGS[1:]}
    events = {}
    for _ in range(a.runs):
        for prog in programs:
            work, stdin_path = PROGRAMS[prog]
            for config in CONFIGS:
                out = os.path.join(tmp, f"{prog}-{config}")
                for old in (out, out + ".zst"):
                    if os.path.exists(old):
                        os.remove(old)
                times[(prog, config)].append(run(command(config, work, out), stdin_path, env))
                if config == "heaptrack":
                    sizes[(prog, config)].append(os.path.getsize(out + ".zst"))
                elif config != "base":
                    sizes[(prog, config)].append(os.path.getsize(out))
                    events[prog] = heap_events(out)
    print(f"{a.runs} interleaved runs of each configuration; medians")
    for prog in programs:
        med = {c: (statistics.median(t[0] for t in times[(prog, c)]),
                   statistics.median(t[1] for t in times[(prog, c)])) for c in CONFIGS}
        size = {c: statistics.median(sizes[(prog, c)]) for c in CONFIGS[1:]}
        print(f"\n{prog}: {' '.join(PROGRAMS[prog][0]).replace(tmp + os.sep, '')}"
              + (f" < {os.path.relpath(PROGRAMS[prog][1], ROOT)}" if PROGRAMS[prog][1] else "")
              + f"; {events[prog]:,} heap events")
        print(f"  {'config':<10} {'wall s':>8} {'cpu s':>8} {'file B':>11} {'B/event':>8}")
        for c in CONFIGS:
            file = f"{size[c]:>11,.0f} {size[c] / events[prog]:>8.3f}" if c in size else ""
            print(f"  {c:<10} {med[c][0]:>8.3f} {med[c][1]:>8.3f} {file}")
        ht_wall = med["heaptrack"][0] - med["base"][0]
        ht_cpu = med["heaptrack"][1] - med["base"][1]
        for c in ("rec-nocpu", "rec"):
            wall = med[c][0] - med["base"][0]
            cpu = med[c][1] - med["base"][1]
            print(f"  {c}: slowdown wall {wall:+.3f} s vs heaptrack {ht_wall:+.3f} s = {wall / ht_wall:.2f}x,"
                  f" cpu {cpu:+.3f} s vs {ht_cpu:+.3f} s = {cpu / ht_cpu:.2f}x,"
                  f" file {size[c] / size['heaptrack']:.2f}x heaptrack's")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    sys.exit(main())
