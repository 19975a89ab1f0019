#!/usr/bin/env python3
"""Regenerates the recipe's crate list as `bitbake -c update_crates crossprof` would.

oe-core's cargo-update-recipe-crates class walks CARGO_LOCK_SRC_DIR (S unless the recipe says
otherwise), skipping only `.pc` and `.git`, and writes one `crate://` URL and one sha256sum
per crates.io package of every Cargo.lock it meets, lock file after lock file, without
removing duplicates. This script does the same walk on a directory and compares the crate
lines it would write with those of the committed crate list:

    update_crates_like_oe.py DIR [--inc FILE]

DIR is what the class would walk: tests/packaging/check.sh unpacks the release, runs the
recipe's do_update_crates:prepend on it, and passes the CARGO_LOCK_SRC_DIR that results.
tests/packaging/real-trees.sh runs the class's own code from `bitbake -e` instead.
Exit status 0 when both lists hold the same lines.
"""
import argparse
import os
import pathlib
import sys
import tomllib

REPO = pathlib.Path(__file__).resolve().parents[2]
INC = REPO / "yocto-layer" / "recipes-devtools" / "crossprof" / "crossprof-crates.inc"


def walk(top: str):
    """The URL and checksum lines the class writes for `top`, in its order, and the lock files."""
    urls, sums, locks = [], [], []
    for root, _dirs, files in os.walk(top):
        if root.startswith(os.path.join(top, ".pc")) or root.startswith(os.path.join(top, ".git")):
            continue
        if "Cargo.lock" not in files:
            continue
        path = os.path.join(root, "Cargo.lock")
        locks.append(os.path.relpath(path, top))
        with open(path, "rb") as f:
            packages = tomllib.load(f).get("package", [])
        for p in packages:
            if "crates.io" not in p.get("source", ""):
                continue
            urls.append(f"crate://crates.io/{p['name']}/{p['version']}")
            if "checksum" in p:
                sums.append(f'SRC_URI[{p["name"]}-{p["version"]}.sha256sum] = "{p["checksum"]}"')
    return urls, sums, locks


def committed(inc: pathlib.Path):
    """The URL and checksum lines of the committed list."""
    lines = inc.read_text().splitlines()
    urls = [ln.strip().rstrip("\\").strip() for ln in lines if ln.strip().startswith("crate://")]
    sums = [ln for ln in lines if ln.startswith("SRC_URI[")]
    return urls, sums


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="the directory the class walks (CARGO_LOCK_SRC_DIR)")
    ap.add_argument("--inc", type=pathlib.Path, default=INC)
    args = ap.parse_args()
    urls, sums, locks = walk(args.dir.rstrip("/"))
    want_urls, want_sums = committed(args.inc)
    twice = len(urls) - len(set(urls))
    print(f"update_crates would read {len(locks)} lock file(s) ({', '.join(locks) or 'none'}) "
          f"and write {len(urls)} crate URLs, {twice} of them duplicates")
    if urls == want_urls and sums == want_sums:
        return 0
    print(f"update_crates_like_oe: differs from {args.inc.name} ({len(want_urls)} URLs): "
          f"{len(set(urls) - set(want_urls))} URLs more, {len(set(want_urls) - set(urls))} fewer",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
