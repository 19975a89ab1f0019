#!/usr/bin/env python3
"""Fetches every crate of the Yocto recipe's crate list with bitbake's own fetcher.

The crate list (yocto-layer/recipes-devtools/crossprof/crossprof-crates.inc) is what bitbake
downloads in do_fetch, so it is checked the way bitbake reads it: bitbake's `bb.fetch2` (from
PyPI's bitbake-setup package, which bundles the bb library with its crate:// fetcher) fetches
each crate into a download directory and verifies its sha256sum, exactly as do_fetch does. A
wrong checksum, a crate crates.io does not serve, one missing from the recipe's Cargo.lock or
one too many (or twice) fails the check.

The .inc is read line by line rather than by bitbake's parser (the bundled bb cannot import its
parser without bitbake's hash server module); any line that is not a comment, the `SRC_URI +=`
list or a `SRC_URI[<name>.sha256sum]` flag is an error, so nothing in the file goes unread.

    bb_fetch_crates.py --dl-dir DIR [--inc FILE] [--rev REV] [--only NAME-VERSION] [--offline]

Exit status 0 when every crate was fetched and verified, 1 otherwise.
"""
import argparse
import hashlib
import logging
import pathlib
import re
import subprocess
import sys
import tomllib

REPO = pathlib.Path(__file__).resolve().parents[2]
INC = REPO / "yocto-layer" / "recipes-devtools" / "crossprof" / "crossprof-crates.inc"
sys.path.insert(0, str(REPO / "yocto-layer" / "scripts"))


def crate_key(url: str) -> str:
    """`crate://crates.io/NAME/VERSION` -> `NAME-VERSION`, the name of its checksum flag."""
    return "-".join(url.split("/")[-2:])


def read_inc(path: pathlib.Path):
    """The crate:// URLs and the sha256sum flags of a crate list, in file order."""
    urls, sums, errors = [], {}, []
    in_list = False
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if in_list:
            if line == '"':
                in_list = False
            elif m := re.fullmatch(r"    (crate://crates\.io/[^/\s]+/[^/\s]+) \\", line):
                urls.append(m.group(1))
            else:
                errors.append(f"{path.name}:{n}: not a crate URL line: {line!r}")
        elif line == 'SRC_URI += " \\':
            in_list = True
        elif m := re.fullmatch(r'SRC_URI\[([^\]]+)\.sha256sum\] = "([0-9a-f]{64})"', line):
            if m.group(1) in sums:
                errors.append(f"{path.name}:{n}: second checksum for {m.group(1)}")
            sums[m.group(1)] = m.group(2)
        elif line and not line.startswith("#"):
            errors.append(f"{path.name}:{n}: unexpected line: {line!r}")
    return urls, sums, errors


def lock_crates(rev: str):
    """name-version of every crates.io package of Cargo.lock at `rev`, and their checksums."""
    import importlib

    gen = importlib.import_module("gen-crates-inc")
    lock = tomllib.loads(gen.lock_at(rev or gen.recipe_srcrev()).decode())
    return {f"{p['name']}-{p['version']}": p.get("checksum") for p in gen.registry_crates(lock)}


def compare(urls, sums, lock):
    """Differences between the list and the lock file, as messages."""
    errors = []
    keys = [crate_key(u) for u in urls]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        errors.append(f"listed twice: {', '.join(twice)}")
    missing = sorted(set(lock) - set(keys))
    extra = sorted(set(keys) - set(lock))
    if missing:
        errors.append(f"{len(missing)} crates of Cargo.lock not in the list: {', '.join(missing[:10])}")
    if extra:
        errors.append(f"{len(extra)} crates not in Cargo.lock: {', '.join(extra[:10])}")
    for k in keys:
        if k not in sums:
            errors.append(f"{k}: no sha256sum")
        elif k in lock and lock[k] and lock[k] != sums[k]:
            errors.append(f"{k}: sha256sum differs from Cargo.lock's checksum")
    return errors


def fetch(urls, sums, dl_dir: pathlib.Path, offline: bool):
    """Runs bitbake's fetcher on the URLs; returns error messages."""
    import bb.data
    import bb.fetch2

    d = bb.data.init()
    d.setVar("DL_DIR", str(dl_dir))
    d.setVar("BB_STRICT_CHECKSUM", "1")
    if offline:
        d.setVar("BB_NO_NETWORK", "1")
    for name, digest in sums.items():
        d.setVarFlag("SRC_URI", f"{name}.sha256sum", digest)
    d.setVar("SRC_URI", " ".join(urls))
    dl_dir.mkdir(parents=True, exist_ok=True)
    try:
        fetcher = bb.fetch2.Fetch(urls, d)
        fetcher.download()
    except bb.fetch2.BBFetchException as e:
        return [f"bitbake's fetcher: {e}"]
    errors = []
    for url in urls:
        path = pathlib.Path(fetcher.localpath(url))
        key = crate_key(url)
        if not path.is_file():
            errors.append(f"{url}: fetcher reported success but {path.name} is missing")
        elif hashlib.sha256(path.read_bytes()).hexdigest() != sums.get(key):
            errors.append(f"{url}: {path.name} does not have the listed sha256sum")
    return errors


class Collect(logging.Handler):
    """Keeps bitbake's warnings and errors, to show the ones that explain a failure."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage().splitlines()[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dl-dir", type=pathlib.Path, required=True,
                    help="bitbake's DL_DIR (kept between runs: a warm run downloads nothing)")
    ap.add_argument("--inc", type=pathlib.Path, default=INC)
    ap.add_argument("--rev", help="the commit whose Cargo.lock the list must match "
                    "(default: the recipe's CROSSPROF_SRCREV)")
    ap.add_argument("--only", help="fetch only this crate (name-version)")
    ap.add_argument("--offline", action="store_true", help="BB_NO_NETWORK=1")
    args = ap.parse_args()

    urls, sums, errors = read_inc(args.inc)
    errors += compare(urls, sums, lock_crates(args.rev))
    chosen = [u for u in urls if not args.only or crate_key(u) == args.only]
    if args.only and not chosen:
        errors.append(f"--only {args.only}: no such crate in the list")
    collect = Collect()
    logging.getLogger("BitBake").addHandler(collect)
    logging.getLogger("BitBake").propagate = False
    fetch_errors = fetch(chosen, sums, args.dl_dir, args.offline) if chosen else []
    if fetch_errors:
        errors += [f"bitbake: {line}" for line in collect.lines if "hecksum" in line or "rror" in line]
        errors += fetch_errors
    if errors:
        for e in errors:
            print(f"bb_fetch_crates: {e}", file=sys.stderr)
        return 1
    import bb

    print(f"bb_fetch_crates: {len(chosen)} of {len(urls)} crates fetched and sha256-verified by "
          f"bitbake {bb.__version__}'s fetcher; the list equals Cargo.lock's {len(urls)} registry crates")
    return 0


if __name__ == "__main__":
    sys.exit(main())
