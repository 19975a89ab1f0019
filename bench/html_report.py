#!/usr/bin/env python3
"""`hostside html` on a recording of at least 100,000 samples (issue 15, acceptance 3): the
time to write the report, the time headless Chromium takes to its first render, and the
report's size, with `perf report --stdio` on perf's recording of the same workload timed in
the same interleaved runs as the peer.

Workload: tests/programs/cpu_split.c (-O2, frame pointers) run for ROUNDS rounds, recorded by
`rec --freq FREQ` and by `perf record -e cpu-clock -F FREQ -g`. The first render is measured
by tests/browser/report.js (the page's own "rendered" stamp minus its navigation start), the
browser's start-up excluded.

Usage: bench/html_report.py [--rounds N] [--freq HZ] [--runs N]   (via bench/run.sh html)
"""
import argparse, json, os, statistics, subprocess, tempfile, time


def sh(cmd, **kw):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)


def timed(cmd):
    t0 = time.monotonic()
    sh(cmd)
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4500)
    ap.add_argument("--freq", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rec, hostside = os.environ["CROSSPROF_REC"], os.environ["CROSSPROF_HOSTSIDE"]
    npm = subprocess.run([os.path.join(root, "tests/browser/setup.sh")], check=True,
                         capture_output=True, text=True).stdout.strip()
    tmp = tempfile.mkdtemp(prefix="crossprof-html-")
    app = os.path.join(tmp, "cpu_split")
    sh(["gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer",
        os.path.join(root, "tests/programs/cpu_split.c"), "-o", app])
    zst, data = os.path.join(tmp, "t.zst"), os.path.join(tmp, "perf.data")
    sh([rec, "--freq", str(a.freq), "--out", zst, app, str(a.rounds)])
    sh(["perf", "record", "-e", "cpu-clock", "-F", str(a.freq), "-g", "-o", data, app, str(a.rounds)])
    info = json.loads(subprocess.run([hostside, "report", "--json", zst], check=True,
                                     capture_output=True, text=True).stdout)
    samples = info["cpu"]["samples"]
    html = os.path.join(tmp, "t.html")
    t_html, t_perf, renders = [], [], []
    for _ in range(a.runs):
        t_html.append(timed([hostside, "html", zst, "-o", html]))
        t_perf.append(timed(["perf", "report", "-i", data, "--stdio"]))
        out = json.loads(subprocess.run(["node", os.path.join(root, "tests/browser/report.js"), npm, html],
                                        check=True, capture_output=True, text=True).stdout)
        assert not out["errors"], out["errors"]
        renders.append(out["first_render_ms"])
    h, p = statistics.median(t_html), statistics.median(t_perf)
    size = os.path.getsize(html)
    print(f"samples: {samples} (rec), file {os.path.getsize(zst)} B")
    print(f"hostside html: {h:.3f} s (median of {a.runs}); perf report --stdio: {p:.3f} s; ratio {h / p:.2f}")
    print(f"first render in headless Chromium: {statistics.median(renders):.0f} ms (runs: {', '.join(f'{r:.0f}' for r in renders)})")
    print(f"report size: {size} B ({size / samples:.1f} B per sample)")


if __name__ == "__main__":
    main()
