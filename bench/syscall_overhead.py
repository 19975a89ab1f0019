#!/usr/bin/env python3
"""System-call recording overhead: `rec -e syscalls` versus `strace -c -f` and `perf trace -s`
on a system-call-heavy real program, as ratios from one interleaved run (issue 30,
acceptance 3).

Workload: GNU find listing a tree (`find TREE`, default /usr, output to /dev/null): a
quarter of a million system calls a second (getdents64, newfstatat, openat, close, fchdir).
Configurations, each RUNS times, interleaved:
- base: find alone;
- strace: `strace -c -f -o FILE find TREE` (ptrace: two stops per call, nothing lost);
- perf-trace: `perf trace -s -o FILE -- find TREE` (perf's strace-like summary);
- perf-record: `perf record -e raw_syscalls:sys_enter,raw_syscalls:sys_exit` (the same two
  tracepoints rec samples, without stacks);
- rec: `rec -e syscalls` as it runs by default (each entry's stack copy, 512 bytes, plus its
  999 Hz CPU samples with 32 KiB copies);
- rec-nocpu: `rec --no-cpu -e syscalls` (the system calls alone, as strace -c records them).
For each run: wall time and CPU time (user+sys) of the whole process tree, the tool's own work
included. Slowdown = median(tool wall) / median(base wall). Events seen and lost are counted
in every run (strace's total calls; perf's SAMPLE and LOST_SAMPLES; rec's system-call samples
and lost samples), so a ratio is never read without its losses.

Usage: bench/syscall_overhead.py [--tree DIR] [--runs N]   (needs root, strace and
linux-perf; via bench/run.sh syscalls)
"""
import argparse, json, os, re, resource, statistics, subprocess, tempfile, time

def run(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

def strace_seen(path):
    m = re.search(r"^\S+\s+\S+\s+\S+\s+(\d+)\s+(?:\d+\s+)?total$", open(path).read(), re.M)
    return (int(m.group(1)), 0) if m else (0, 0)

def perf_seen(path):
    stats = subprocess.run(["perf", "report", "--stats", "-i", path], capture_output=True, text=True).stdout
    samples = sum(int(n) for n in re.findall(r"^\s*SAMPLE events:\s+(\d+)", stats, re.M)[:1])
    lost = sum(int(n) for n in re.findall(r"LOST_SAMPLES events:\s+(\d+)", stats))
    return samples // 2, lost // 2

def rec_seen(hostside, path):
    info = json.loads(subprocess.run([hostside, "info", "--json", path], check=True, capture_output=True, text=True).stdout)
    return info["records"].get("event_sample", 0) // 2, info["lost_samples"] // 2

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", default="/usr")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    rec = os.path.join(target, "x86_64-unknown-linux-musl/release/rec")
    hostside = os.path.join(target, "host/hostside")
    find = ["find", a.tree]
    tmp = tempfile.mkdtemp(prefix="crossprof-syscalls-")
    out = lambda name: os.path.join(tmp, name)
    configs = {
        "base": (find, None),
        "strace": (["strace", "-c", "-f", "-o", out("strace.txt")] + find, lambda: strace_seen(out("strace.txt"))),
        "perf-trace": (["perf", "trace", "-s", "-o", out("trace.txt"), "--"] + find, None),
        "perf-record": (["perf", "record", "-q", "-e", "raw_syscalls:sys_enter,raw_syscalls:sys_exit", "-o", out("perf.data"), "--"] + find,
                        lambda: perf_seen(out("perf.data"))),
        "rec": ([rec, "-e", "syscalls", "--out", out("rec.zst"), "--"] + find, lambda: rec_seen(hostside, out("rec.zst"))),
        "rec-nocpu": ([rec, "--no-cpu", "-e", "syscalls", "--out", out("nocpu.zst"), "--"] + find,
                      lambda: rec_seen(hostside, out("nocpu.zst"))),
    }
    run(find)  # warm the page cache
    results = {k: [] for k in configs}
    for _ in range(a.runs):
        for name, (cmd, seen) in configs.items():
            wall, cpu = run(cmd)
            results[name].append((wall, cpu, seen() if seen else None))
    base_wall = statistics.median(w for w, _, _ in results["base"])
    base_cpu = statistics.median(c for _, c, _ in results["base"])
    print(f"tree {a.tree}; {a.runs} runs each, interleaved; base wall {base_wall:.3f} s, cpu {base_cpu:.3f} s")
    print("| config | wall (median) | slowdown | cpu (median) | calls seen / lost per run |")
    print("|---|---|---|---|---|")
    for name, rs in results.items():
        wall = statistics.median(w for w, _, _ in rs)
        cpu = statistics.median(c for _, c, _ in rs)
        seen = ", ".join(f"{s[0]}/{s[1]}" for _, _, s in rs if s) or "-"
        print(f"| {name} | {wall:.3f} s | {wall / base_wall:.2f}x | {cpu:.3f} s | {seen} |")
    for name in ("rec", "rec-nocpu"):
        w = statistics.median(x for x, _, _ in results[name])
        s = statistics.median(x for x, _, _ in results["strace"])
        print(f"{name} / strace wall: {w / s:.2f}")

if __name__ == "__main__":
    main()
