#!/usr/bin/env python3
"""How `hostside report` scales with the recording (issue 26, acceptance 5): time and peak
memory on 10,000, 100,000 and 1,000,000 stack-copy samples of a real program with complete
stacks, beside `perf report --stdio` on perf's recording of the same run.

Workload: the real-world corpus' sqlite3 (Debian's source, GNU ld, -O2, PIE, its debug info
in the sysroot) running its benchmark script as often as the sample count asks, in one
process (perf 6.1 aborts recording or reading a run that forks after perf attached). Each size is one run recorded at once by `rec` at its
defaults (`--call-graph dwarf`, its default copy size) and by `perf record --call-graph
dwarf,SIZE` with the same copy size at the same frequency: rec launches `waitexec` (which
waits on a fifo), perf attaches to it and is enabled over its control fifo, then the workload
starts (as the test suite's tests/src/perf.rs does). Then `hostside report --sysroot` and
`perf report --stdio --symfs`, one after the other, each timed with its peak resident memory
(its own maxrss); perf report is stopped after --perf-timeout seconds and said so. perf's
recording is skipped (said so) when the disk has less than 1.3 times its expected size free.

Usage: bench/scaling.py [--freq HZ] [--sizes N,N,...] [--perf-timeout SECS]
(run via bench/run.sh scaling; needs linux-perf and gcc)
"""
import argparse, json, math, os, resource, shutil, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from realworld import build, rec_default_stack  # noqa: E402


def cpu_of(cmd, cwd):
    """CPU seconds (user+sys) one run of `cmd` takes."""
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0:
        raise SystemExit(f"{cmd[0]} failed with status {status}")
    return usage.ru_utime + usage.ru_stime


def timed(cmd, timeout=None):
    """Wall seconds and peak RSS (MiB) of `cmd`, or None for the time when it timed out."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = None if timeout is None else t0 + timeout
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if deadline and time.monotonic() > deadline:
            p.kill()
            _, status, usage = os.wait4(p.pid, 0)
            return None, usage.ru_maxrss / 1024
        time.sleep(0.05)
    if status != 0:
        raise SystemExit(f"{cmd[0]} failed with status {status}")
    return time.monotonic() - t0, usage.ru_maxrss / 1024


def child_named(parent, name, timeout=30):
    """The pid of `parent`'s child whose command is `name`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for task in os.listdir(f"/proc/{parent}/task"):
            try:
                kids = open(f"/proc/{parent}/task/{task}/children").read().split()
            except OSError:
                continue
            for k in kids:
                try:
                    if open(f"/proc/{k}/comm").read().strip() == name:
                        return int(k)
                except OSError:
                    pass
        time.sleep(0.01)
    raise SystemExit(f"no {name} child of {parent}")


def enable_perf(perf, ctl, ack):
    """Sends `enable` over perf's control fifo and waits for its acknowledgement."""
    deadline = time.monotonic() + 30
    answer = os.open(ack, os.O_RDONLY | os.O_NONBLOCK)
    while True:
        try:
            control = os.open(ctl, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:
            if perf.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("perf record did not open its control fifo")
            time.sleep(0.005)
    os.write(control, b"enable\n")
    got = b""
    while b"ack" not in got:
        try:
            got += os.read(answer, 16)
        except BlockingIOError:
            pass
        if perf.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("perf record did not acknowledge enable")
        time.sleep(0.005)
    os.close(control)
    os.close(answer)


def record_both(rec, waitexec, freq, stack, workload, cwd, rec_out, perf_out):
    """One run of `workload` recorded by rec and (when perf_out) by perf at once."""
    tmp = tempfile.mkdtemp(prefix="crossprof-scaling-fifo-")
    go, ctl, ack = (os.path.join(tmp, n) for n in ("go", "ctl", "ack"))
    for f in (go, ctl, ack):
        os.mkfifo(f)
    r = subprocess.Popen([rec, "--out", rec_out, "--freq", str(freq), "--", waitexec, go]
                         + workload, cwd=cwd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    shell = child_named(r.pid, "waitexec")
    perf = None
    if perf_out:
        perf = subprocess.Popen(["perf", "record", "-q", "-N", "-e", "cpu-clock", "-F",
                                 str(freq), "--call-graph", f"dwarf,{stack}", "-o", perf_out,
                                 "-D", "-1", "--control", f"fifo:{ctl},{ack}", "-p",
                                 str(shell)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        enable_perf(perf, ctl, ack)
    with open(go, "w"):
        pass
    if r.wait() != 0:
        raise SystemExit(f"rec failed with status {r.returncode}")
    if perf and perf.wait() != 0:
        raise SystemExit(f"perf record failed with status {perf.returncode}")
    shutil.rmtree(tmp)


def perf_samples(perf_out):
    """perf's sample count: the SAMPLE events of `perf report --stats`."""
    out = subprocess.run(["perf", "report", "-i", perf_out, "--stats"], capture_output=True,
                         text=True).stdout
    for line in out.splitlines():
        if line.strip().startswith("SAMPLE events:"):
            return int(line.split(":")[1].split()[0])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--freq", type=int, default=9999)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--perf-timeout", type=int, default=600)
    a = ap.parse_args()
    rec, hostside = os.environ["CROSSPROF_REC"], os.environ["CROSSPROF_HOSTSIDE"]
    tmp = tempfile.mkdtemp(prefix="crossprof-scaling-", dir="/var/tmp")
    waitexec = os.path.join(tmp, "waitexec")
    subprocess.run(["gcc", "-O2", "-static", "-o", waitexec,
                    os.path.join(ROOT, "tests/realworld/waitexec.c")], check=True)
    sq = build("sqlite3", "bfd-O2-pie")
    stack = rec_default_stack(rec)
    one = cpu_of(sq["cmd"], sq["workdir"])
    print(f"sqlite3 bfd-O2-pie: {one:.2f} s of CPU per run; -F {a.freq}, {stack}-byte copies")
    print("| samples (rec / perf) | recording (rec / perf) | hostside report | perf report "
          "--stdio | time ratio perf/hostside |")
    print("|---|---|---|---|---|")
    # Samples per second of the unprofiled run's CPU time, relative to the frequency: the
    # profiled run takes more CPU (both profilers' stack copies are charged to it), measured
    # on each size and used for the next (2 on the machine this was written on).
    factor = 2.0
    for n in (int(s) for s in a.sizes.split(",")):
        runs = max(1, math.ceil(n / (a.freq * one * factor)))
        # Fewer samples than one run gives at the frequency come from a lower frequency.
        freq = min(a.freq, max(99, round(n / (runs * one * factor))))
        script = os.path.join(sq["workdir"], f"scaling-{runs}.sql")
        with open(script, "w") as f:
            # Each round starts from empty tables, so every round does the same work.
            f.write("DROP TABLE IF EXISTS customers;\nDROP TABLE IF EXISTS orders;\n"
                    ".read bench.sql\n" * runs)
        workload = [sq["board"], ":memory:", f".read {os.path.basename(script)}"]
        rec_out = os.path.join(tmp, f"sqlite3-{n}.zst")
        perf_out = os.path.join(tmp, f"sqlite3-{n}.perf.data")
        free = shutil.disk_usage(tmp).free
        with_perf = free > n * stack * 1.3
        record_both(rec, waitexec, freq, stack, workload, sq["workdir"], rec_out,
                    perf_out if with_perf else None)
        info = json.loads(subprocess.run([hostside, "info", "--json", rec_out], check=True,
                                         capture_output=True, text=True).stdout)
        samples = info["records"].get("sample", 0)
        factor = max(0.5, samples / (runs * one * freq))
        hs_time, hs_rss = timed([hostside, "report", "--sysroot", sq["sysroot"], rec_out])
        if with_perf:
            p_samples = perf_samples(perf_out)
            p_time, p_rss = timed(["perf", "report", "-i", perf_out, "--symfs", sq["sysroot"],
                                   "--stdio"], a.perf_timeout)
            p_size = os.path.getsize(perf_out)
            perf_col = (f"{p_time:.1f} s, {p_rss:.0f} MiB" if p_time is not None else
                        f"stopped after {a.perf_timeout} s ({p_rss:.0f} MiB)")
            ratio = f"{p_time / hs_time:.1f}x" if p_time is not None else \
                f"> {a.perf_timeout / hs_time:.0f}x"
            os.unlink(perf_out)
        else:
            p_samples, p_size, perf_col, ratio = "-", 0, "not recorded (disk)", "-"
        print(f"| {samples:,} / {p_samples:,} | {os.path.getsize(rec_out) / 1e6:.1f} MB / "
              f"{p_size / 1e9:.1f} GB | {hs_time:.1f} s, {hs_rss:.0f} MiB | {perf_col} | "
              f"{ratio} |", flush=True)
        os.unlink(rec_out)
    shutil.rmtree(tmp)


if __name__ == "__main__":
    sys.exit(main())
