#!/usr/bin/env bash
# Builds everything that ships, for every target triple, into dist/<triple>/, checks each
# binary (static, GNU build-id, size limit) and writes dist/MANIFEST.tsv (triple, file, bytes,
# build-id, sha256). With triples as arguments, builds only those.
#
#   targets/dist.sh                                   # all five triples
#   targets/dist.sh aarch64-unknown-linux-musl        # one
#
# Cold, the two -Zbuild-std triples take about 2 minutes each; warm, a run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
targets/setup.sh

ALL=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf
    i686-unknown-linux-musl riscv64gc-unknown-linux-musl)
triples=("$@")
[ ${#triples[@]} -gt 0 ] || triples=("${ALL[@]}")
dist=${CROSSPROF_DIST:-dist}
# rec must fit a board's flash next to the application: at most 900 KiB stripped, per target,
# leaving room under 1 MiB for what later waves add (see bench/RESULTS.md, "rec's size").
MAX_REC_BYTES=$((900 * 1024))

mkdir -p "$dist"
manifest="$dist/MANIFEST.tsv"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
# Keep the rows of triples not rebuilt this time.
[ -f "$manifest" ] && tail -n +2 "$manifest" >"$tmp"

build_id() { readelf -n "$1" 2>/dev/null | sed -n 's/^ *Build ID: //p' | head -n 1; }

add() { # triple, kind, name in dist
    local triple=$1 kind=$2 name=$3 src
    src=$(targets/build.sh "$triple" "$kind")
    mkdir -p "$(dirname "$dist/$triple/$name")"
    cp "$src" "$dist/$triple/$name.tmp"
    mv "$dist/$triple/$name.tmp" "$dist/$triple/$name"
    local f="$dist/$triple/$name" id size sum
    id=$(build_id "$f")
    size=$(stat -c %s "$f")
    sum=$(sha256sum "$f" | cut -d' ' -f1)
    if [ -z "$id" ]; then
        echo "dist: $f has no GNU build-id" >&2
        exit 1
    fi
    if [ "$kind" = rec ]; then
        if readelf -l "$f" | grep -q INTERP; then
            echo "dist: $f is not static" >&2
            exit 1
        fi
        if [ "$size" -gt "$MAX_REC_BYTES" ]; then
            echo "dist: $f is $size bytes, over the $MAX_REC_BYTES limit" >&2
            exit 1
        fi
    fi
    grep -v -P "^\Q$triple\E\t\Q$name\E\t" "$tmp" >"$tmp.new" || true
    mv "$tmp.new" "$tmp"
    printf '%s\t%s\t%s\t%s\t%s\n' "$triple" "$name" "$size" "$id" "$sum" >>"$tmp"
    echo "dist: $f ($size bytes, build-id $id)" >&2
}

for t in "${triples[@]}"; do
    add "$t" rec rec
    # The heap interposer, once its crate exists: one build per userland C library.
    if [ -f recorder/heap/Cargo.toml ]; then
        add "$t" heap-musl musl/libcrossprof_heap.so
        add "$t" heap-gnu gnu/libcrossprof_heap.so
    fi
done

{
    printf 'triple\tfile\tbytes\tbuild_id\tsha256\n'
    sort "$tmp"
} >"$manifest"
echo "dist: wrote $manifest" >&2
