#!/usr/bin/env python3
"""Which stack-copy size the emulated ARM boards need: SQLite's shell and Lua from the real-world
corpus (tests/realworld/), recorded on the AArch64 and ARMv7 boards by the board suite
(tests/tests/board_realworld.rs, CROSSPROF_BOARD_CALL_GRAPH=dwarf=SIZE), in two parts:

1. Recorded at each size: samples, how many unwound to the entry, bytes per sample in the file.
   Each size is a separate boot, so the samples differ from size to size.
2. Coverage on identical samples: the 65528-byte recordings cut to each size with the
   truncate_stacks example (what a smaller copy would have held) and analysed by hostside.

Emulation (TCG on a shared host) makes CPU cost on the board unmeasurable here; bench/stack_size.py
measures it natively.

Usage: bench/board_stack_size.py [--sizes 8192,16384,...]  (via bench/run.sh board-stack-size)
"""
import argparse, json, os, re, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE = re.compile(r"^(\w+)-bfd on (\w+): (\d+) samples .*?\((\d+) bytes each in the file\), (\d+) unwound"
                  r".*; recording (\S+) sysroot (\S+)$")


def board_suite(call_graph):
    env = dict(os.environ, CROSSPROF_BOARD_CALL_GRAPH=call_graph, CROSSPROF_BOARD_LINKERS="bfd")
    out = subprocess.run(["cargo", "test", "--locked", "--profile", "host", "-p", "crossprof-tests",
                          "--test", "board_realworld", "--", "--nocapture"],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    rows = {}
    for line in (out.stdout + out.stderr).splitlines():
        m = LINE.match(line.strip())
        if m:
            prog, arch, n, b, done, rec, sysroot = m.groups()
            rows[(prog, arch)] = (int(n), int(b), int(done), rec, sysroot)
    if len(rows) != 4:
        sys.exit(f"board suite at {call_graph}: expected 4 results, got {rows}:\n{out.stderr[-3000:]}")
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="8192,16384,20480,24576,32768,49152,57344,65528")
    sizes = [int(s) for s in ap.parse_args().sizes.split(",")]
    hostside = os.environ["CROSSPROF_HOSTSIDE"]
    truncate = os.path.join(os.environ["CARGO_TARGET_DIR"], "release/examples/truncate_stacks")
    keys = [("sqlite3", "aarch64"), ("sqlite3", "arm"), ("lua", "aarch64"), ("lua", "arm")]
    print("Recorded at each size: samples unwound to the entry (bytes per sample in the file)")
    print(f"{'size':>6} " + " ".join(f"{p + ' ' + a:>22}" for p, a in keys))
    full = None
    for size in sizes:
        rows = board_suite(f"dwarf={size}")
        if size == 65528:
            full = rows
        cells = [f"{100 * rows[k][2] / rows[k][0]:>6.1f}% of {rows[k][0]:>5} ({rows[k][1]:>3} B)"
                 for k in keys]
        print(f"{size:>6} " + " ".join(f"{c:>22}" for c in cells))
    full = full or board_suite("dwarf=65528")
    tmp = tempfile.mkdtemp(prefix="crossprof-board-stack-")
    print()
    print("Identical samples: the 65528-byte recordings cut to each size")
    print(f"{'size':>6} " + " ".join(f"{p + ' ' + a:>16}" for p, a in keys))
    for size in sizes:
        cells = []
        for k in keys:
            _, _, _, rec, sysroot = full[k]
            cut = os.path.join(tmp, f"{k[0]}-{k[1]}-{size}.zst")
            subprocess.run([truncate, rec, cut, str(size)], check=True)
            j = json.loads(subprocess.run([hostside, "report", "--json", "--top", "1", "--sysroot",
                                           sysroot, cut], check=True, capture_output=True,
                                          text=True).stdout)
            u, n = j["cpu"]["stack_unwinding"], j["cpu"]["samples"]
            cells.append(f"{100 * u['complete'] / max(n, 1):>15.1f}%")
        print(f"{size:>6} " + " ".join(cells))


if __name__ == "__main__":
    sys.exit(main())
