#!/usr/bin/env bash
# Makes, from a release tarball, the file Buildroot keeps in its download directory for a
# cargo package: the release unpacked, its crates vendored into VENDOR/ (`cargo vendor`, whose
# output replaces .cargo/config.toml), packed again reproducibly, and named for the vendoring
# format, crossprof-<version>-cargoN.tar.gz. crossprof.hash holds the sha256 of that file, not
# of the release, because Buildroot checks the hash after vendoring.
#
#   [CARGO="cargo +nightly"] buildroot-pkg/scripts/vendored-tarball.sh RELEASE.tar.gz OUTDIR
#
# Prints the crossprof.hash line of the file it wrote. The format follows the cargo that
# vendors, as Buildroot's does with its Rust version: cargo 1.94.1 to 1.96 write format 5
# (Buildroot 2026.05.x), cargo 1.97 and later format 6 (Buildroot master from July 2026: a
# "$comment" in every .cargo-checksum.json). The packing follows Buildroot's download helpers:
# files only, sorted bytewise, under one leading directory named like the release, POSIX tar
# as GNU tar 1.35 writes it with owner and group 0, every time stamp set to the one of the first file in sorted order,
# modes with group and other equal to the owner's minus write, gzip -6 without a name.
# tests/packaging/real-trees.sh checks the result against what Buildroot itself stores. Needs
# network access to crates.io (or a CARGO_HOME that already holds the crates).
set -euo pipefail
usage="usage: [CARGO=...] vendored-tarball.sh RELEASE.tar.gz OUTDIR"
release=$(realpath "${1:?$usage}")
outdir=$(realpath "${2:?$usage}")
read -r -a cargo <<<"${CARGO:-cargo}"
base=$(basename "$release" .tar.gz)

# Buildroot's name for the vendoring format of this cargo.
cargo_version=$("${cargo[@]}" --version | cut -d' ' -f2 | cut -d- -f1)
format=$(python3 - "$cargo_version" <<'PY'
import sys
v = tuple(int(x) for x in sys.argv[1].split("."))
print("cargo6" if v >= (1, 97) else "cargo5" if v >= (1, 94, 1) else "")
PY
)
if [ -z "$format" ]; then
    echo "vendored-tarball: cargo $cargo_version vendors in a format older than Buildroot 2026.05's (-cargo5); use cargo >= 1.94.1" >&2
    exit 2
fi
out="$outdir/$base-$format.tar.gz"

# Buildroot requires GNU tar 1.35 (it builds its own where the system's is older), which
# leaves the device-number fields of every entry that is not a device empty where 1.34 wrote
# zeros: the same archive, another hash. With an older tar, its output is rewritten so.
as_tar_1_35() {
    local version
    version=$(tar --version | sed -n '1s/.* \([0-9][0-9.]*\)$/\1/p')
    if [ "$(printf '%s\n1.35\n' "$version" | sort -V | head -1)" = 1.35 ]; then
        cat
        return
    fi
    python3 -c '
import sys
data = bytearray(sys.stdin.buffer.read())
pos = 0
while pos + 512 <= len(data) and any(data[pos:pos + 512]):
    h = data[pos:pos + 512]
    if h[156:157] not in (b"3", b"4"):
        h[329:345] = bytes(16)
        h[148:156] = b" " * 8
        h[148:156] = b"%06o\0 " % sum(h)
        data[pos:pos + 512] = h
    size = int(bytes(h[124:136]).rstrip(b"\0 ") or b"0", 8)
    pos += 512 + (size + 511) // 512 * 512
sys.stdout.buffer.write(data)
'
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/$base"
tar -C "$work/$base" --strip-components=1 -xzf "$release"
# The time stamp every entry gets: that of the release's first file in bytewise order.
# (Read from a process substitution: `head` in a pipeline would end sort early, and
# pipefail would take its SIGPIPE for a failure.)
IFS= read -r -d '' first < <(cd "$work" && find "$base" -type f -print0 | LC_ALL=C sort -z)
stamp=$(date -u -d "@$(stat -c %Y "$work/$first")" +%Y-%m-%dT%H:%M:%S+00:00)

(
    cd "$work/$base"
    mkdir -p .cargo
    # (Not --quiet: it also silences the configuration cargo writes to standard output.)
    "${cargo[@]}" vendor --manifest-path Cargo.toml --locked VENDOR >.cargo/config.toml 2>/dev/null
    find . -not -type d | LC_ALL=C sort >"$work/files"
    tar -cf - --transform="s#^\./#$base/#S" --numeric-owner --owner=0 --group=0 \
        --mtime="$stamp" --format=posix --mode='go=u,go-w' \
        --pax-option="delete=atime,delete=ctime,delete=mtime,exthdr.name=%d/PaxHeaders/%f,exthdr.mtime={$stamp}" \
        -T "$work/files" | as_tar_1_35 | gzip -6 -n >"$out"
)
echo "sha256  $(sha256sum "$out" | cut -d' ' -f1)  $(basename "$out")"
