#!/usr/bin/env python3
"""Build-id index: the cost of building the index of a large tree without and with its cache
(issue 16, acceptance 1: the second run at least 10x faster than the first), alone and inside
`hostside report --search-dir`.

A ground-truth program (tests/programs/cpu_split.c) runs from a scratch directory under `rec`;
its unstripped copy sits in a small build tree. `hostside report` gets an empty sysroot (so the
program is not at its path) and two search dirs: the build tree and TREE (default `/usr`, about
130,000 files and 7 GB on Debian: a large sysroot or build tree). Each round starts with an
empty index cache (XDG_CACHE_HOME in a fresh directory), runs the report once (the index is
built: every file's headers are read) and once more (the cache answers; only `stat`s remain).
Rounds are repeated RUNS times, after one warm-up round, so the page cache is warm for both:
the ratio measures the index's own work, not the disk. The index alone is timed with the
`index_tree` example of crossprof-symbols (the same call hostside makes) in the same way. The
baseline is the same report with a sysroot that holds the program at its board path (no index
at all). Medians of wall and CPU (user+sys) time.

Usage: bench/build_id_index.py [--runs N] [--tree DIR]
(after scripts/build.sh and `cargo build --profile host -p crossprof-symbols --example
index_tree`; `. scripts/env.sh` for CROSSPROF_REC and CROSSPROF_HOSTSIDE)
"""
import argparse, json, os, shutil, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(cmd, env):
    """Wall time and CPU time (user+sys) of one run, and its standard output."""
    with tempfile.TemporaryFile() as out:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"{' '.join(cmd)} failed with {status}")
        out.seek(0)
        return (wall, ru.ru_utime + ru.ru_stime), out.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tree", default="/usr")
    a = ap.parse_args()
    rec, hostside = os.environ["CROSSPROF_REC"], os.environ["CROSSPROF_HOSTSIDE"]
    work = tempfile.mkdtemp(prefix="crossprof-index-bench-")
    try:
        build = os.path.join(work, "build")
        board = os.path.join(work, "board")
        os.makedirs(build)
        os.makedirs(board)
        unstripped = os.path.join(build, "cpu_split")
        subprocess.run(["gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-Wl,--build-id",
                        os.path.join(ROOT, "tests/programs/cpu_split.c"), "-o", unstripped],
                       check=True)
        exe = os.path.join(board, "cpu_split")
        subprocess.run(["strip", "-o", exe, unstripped], check=True)
        recording = os.path.join(work, "t.zst")
        subprocess.run([rec, "--out", recording, "--call-graph", "fp", "--", exe, "300"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        empty = os.path.join(work, "empty-sysroot")
        os.makedirs(empty)
        mirror = os.path.join(work, "mirror")
        os.makedirs(os.path.join(mirror, board.lstrip("/")))
        shutil.copy(unstripped, os.path.join(mirror, exe.lstrip("/")))

        report = [hostside, "report", "--json", recording]
        indexed = report + ["--sysroot", empty, "--search-dir", build, "--search-dir", a.tree]
        example = os.path.join(os.environ["CARGO_TARGET_DIR"], "host/examples/index_tree")
        first, second, base, idx1, idx2 = [], [], [], [], []
        for i in range(a.runs + 1):
            cache = os.path.join(work, f"cache-{i}")
            env = dict(os.environ, XDG_CACHE_HOME=cache)
            e1, o1 = timed([example, a.tree], env)
            e2, o2 = timed([example, a.tree], env)
            s1, s2 = json.loads(o1), json.loads(o2)
            assert s2["read"] == 0 and s1["files"] == s2["files"], (s1, s2)
            shutil.rmtree(cache)
            t1, out1 = timed(indexed, env)
            t2, out2 = timed(indexed, env)
            t0, _ = timed(report + ["--sysroot", mirror], env)
            r1, r2 = json.loads(out1), json.loads(out2)
            mod = next(m for m in r2["modules"] if m["path"] == exe)
            assert mod["found_by"] == "index" and r1["cpu"] == r2["cpu"], mod
            shutil.rmtree(cache)
            if i == 0:
                continue  # warm-up: page cache
            idx1.append(e1)
            idx2.append(e2)
            first.append(t1)
            second.append(t2)
            base.append(t0)
        files = sum(len(fs) for _, _, fs in os.walk(a.tree))
        print(f"tree {a.tree}: {files} files ({s1['elf_files']} ELF with a build-id); "
              f"{a.runs} runs, medians (wall / cpu)")
        med = [[statistics.median(t[k] for t in x) for k in (0, 1)]
               for x in (idx1, idx2, first, second, base)]
        names = ("index, first run", "index, second run", "report, first run",
                 "report, second run", "report without index")
        for name, (w, c) in zip(names, med):
            print(f"{name:22} {w:.3f} s / {c:.3f} s")
        print(f"index first/second:  wall {med[0][0] / med[1][0]:.1f}x, "
              f"cpu {med[0][1] / med[1][1]:.1f}x")
        print(f"report first/second: wall {med[2][0] / med[3][0]:.1f}x, "
              f"cpu {med[2][1] / med[3][1]:.1f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
