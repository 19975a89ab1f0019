#!/usr/bin/env python3
"""What rec's bytes are, per target: a cargo-bloat-style table of the symbols of an unstripped
release build (the same build as targets/dist.sh's, with the symbols kept), grouped by the
crate or C library they come from, beside the stripped size targets/dist.sh enforces (of the shipped build itself).

    bench/run.sh rec-size [TRIPLE...]     # default: every triple of targets/dist.sh

Symbol sizes come from `nm -S` (code, read-only data and data; zero-filled memory takes no file
bytes); what no symbol covers (ELF headers, unwind tables, relocations, padding) is the
difference to the stripped file's size, shown as "not in a symbol". The unstripped builds
are cached apart from dist's, under ~/.cache/crossprof/size.
"""

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRIPLES = [
    "x86_64-unknown-linux-musl",
    "aarch64-unknown-linux-musl",
    "armv7-unknown-linux-musleabihf",
    "i686-unknown-linux-musl",
    "riscv64gc-unknown-linux-musl",
]

# (owner, pattern on the demangled name), first match wins.
OWNERS = [
    ("std: backtrace symbolizer (gimli, addr2line, miniz_oxide, libunwind)",
     r"gimli|addr2line|miniz_oxide|backtrace|rustc_demangle|libunwind|_Unwind|symbolize|"
     r"rust_eh_personality"),
    ("zstd (C)", r"^(ZSTD|HUF|FSE|HIST|ZDICT|XXH|POOL|ERR_)|ZSTD"),
    ("rec", r"(^|[<(&\s])rec::"),
    ("crossprof-format", r"crossprof_format"),
    ("crossprof-heap-wire", r"crossprof_heap_wire"),
    ("object", r"object::"),
    ("lexopt", r"lexopt"),
    ("core: formatting and numbers", r"core::fmt|core::num|dec2flt|flt2dec|float_to_"),
    ("std, core, alloc, hashbrown", r"std::|core::|alloc::|hashbrown"),
]


def owner(name: str) -> str:
    for who, pattern in OWNERS:
        if re.search(pattern, name):
            return who
    return "musl and the rest"


def build(triple: str, symbols: bool) -> Path:
    """targets/build.sh's rec: the shipped (stripped) one, or the same with its symbols."""
    env = dict(os.environ)
    if symbols:
        env["CARGO_PROFILE_RELEASE_STRIP"] = "false"
        env["CROSSPROF_CROSS_DIR"] = str(Path.home() / ".cache/crossprof/size")
    out = subprocess.run(
        [ROOT / "targets/build.sh", triple, "rec"],
        env=env, check=True, stdout=subprocess.PIPE, text=True,
    )
    return Path(out.stdout.strip().splitlines()[-1])


def table(triple: str) -> None:
    binary = build(triple, symbols=True)
    total = build(triple, symbols=False).stat().st_size
    nm = subprocess.run(
        ["nm", "-S", "-C", "--size-sort", binary], check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    sizes: Counter = Counter()
    for line in nm.splitlines():
        parts = line.split(None, 3)
        if len(parts) < 4 or parts[2] in "bBuUvV":
            continue
        sizes[owner(parts[3])] += int(parts[1], 16)
    print(f"\n{triple}: {total:,} bytes stripped ({total / 1024:.0f} KiB)\n")
    print("| from | bytes | share |")
    print("|---|---|---|")
    for who, n in sizes.most_common():
        print(f"| {who} | {n:,} | {100 * n / total:.1f}% |")
    rest = total - sum(sizes.values())
    print(f"| not in a symbol | {rest:,} | {100 * rest / total:.1f}% |")


def main() -> None:
    for triple in sys.argv[1:] or TRIPLES:
        table(triple)


if __name__ == "__main__":
    main()
