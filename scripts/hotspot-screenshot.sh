#!/usr/bin/env bash
# Opens a perf.data in hotspot (Debian's hotspot package) on a virtual X display (Xvfb) and
# saves what the window shows as a PNG. docs/hotspot-aarch64.png is the AArch64 board fixture,
# exported and opened from a directory holding a copy of its sysroot (so that the messages
# hotspot shows name no path of the machine):
#
#   hostside export --format perf-data --sysroot sysroot -o cpu_split.data \
#       tests/fixtures/aarch64/cpu_split.zst
#   scripts/hotspot-screenshot.sh cpu_split.data sysroot docs/hotspot-aarch64.png 6
#
# Usage: scripts/hotspot-screenshot.sh PERF.DATA SYSROOT OUT.png [SECONDS]
#
# hotspot runs for SECONDS (default 10) before the picture is taken. Needs the hotspot and
# xvfb packages (scripts/setup.sh installs them) and python3, which turns Xvfb's framebuffer
# (an XWD image) into the PNG.
set -euo pipefail

if [ $# -lt 3 ]; then
    sed -n '2,15p' "$0" >&2
    exit 2
fi
data=$1 sysroot=$2 out=$3 wait=${4:-10}
for tool in hotspot Xvfb python3; do
    command -v "$tool" >/dev/null || {
        echo "hotspot-screenshot: $tool not found (scripts/setup.sh installs hotspot and xvfb)" >&2
        exit 2
    }
done
[ -r "$data" ] || { echo "hotspot-screenshot: cannot read $data" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/crossprof-hotspot-XXXXXX")
xvfb="" app=""
cleanup() {
    [ -n "$app" ] && kill "$app" 2>/dev/null
    [ -n "$xvfb" ] && kill "$xvfb" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

# Xvfb picks a free display itself and writes its number once it is ready (another X server,
# even one in another root sharing this network namespace, may hold any fixed number).
Xvfb -displayfd 3 -screen 0 1280x800x24 -fbdir "$work" -nolisten tcp 3>"$work/display" \
    >"$work/xvfb.log" 2>&1 &
xvfb=$!
for _ in $(seq 100); do
    [ -s "$work/display" ] && break
    if ! kill -0 "$xvfb" 2>/dev/null; then
        echo "hotspot-screenshot: Xvfb did not start:" >&2
        tail -n 20 "$work/xvfb.log" >&2
        exit 1
    fi
    sleep 0.1
done
display=$(head -n 1 "$work/display")
if [ -z "$display" ] || [ ! -e "$work/Xvfb_screen0" ]; then
    echo "hotspot-screenshot: Xvfb gave no display or framebuffer:" >&2
    tail -n 20 "$work/xvfb.log" >&2
    exit 1
fi

mkdir -p "$work/runtime" && chmod 700 "$work/runtime"
DISPLAY=":$display" XDG_RUNTIME_DIR="$work/runtime" HOME="$work" \
    hotspot --sysroot "$sysroot" "$data" >"$work/hotspot.log" 2>&1 &
app=$!
sleep "$wait"
if ! kill -0 "$app" 2>/dev/null; then
    echo "hotspot-screenshot: hotspot exited before the picture was taken:" >&2
    tail -n 20 "$work/hotspot.log" >&2
    exit 1
fi

python3 - "$work/Xvfb_screen0" "$out" <<'EOF'
"""Xvfb's framebuffer file (XWD, 24-bit TrueColor in 32-bit pixels) to an RGB PNG."""
import struct
import sys
import zlib

xwd = open(sys.argv[1], "rb").read()
h = struct.unpack(">25I", xwd[:100])
header_size, width, height, byte_order = h[0], h[4], h[5], h[7]
bits_per_pixel, bytes_per_line, ncolors = h[11], h[12], h[19]
assert bits_per_pixel == 32, f"{bits_per_pixel} bits per pixel"
pixels = header_size + 12 * ncolors
rows = []
for y in range(height):
    line = xwd[pixels + y * bytes_per_line : pixels + y * bytes_per_line + 4 * width]
    if byte_order == 0:  # LSBFirst: B, G, R, unused
        rgb = bytes(b for i in range(0, len(line), 4) for b in (line[i + 2], line[i + 1], line[i]))
    else:  # MSBFirst: unused, R, G, B
        rgb = bytes(b for i in range(0, len(line), 4) for b in line[i + 1 : i + 4])
    rows.append(b"\0" + rgb)


def chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


png = b"\x89PNG\r\n\x1a\n"
png += chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
png += chunk(b"IDAT", zlib.compress(b"".join(rows), 9))
png += chunk(b"IEND", b"")
open(sys.argv[2], "wb").write(png)
EOF
echo "hotspot-screenshot: $out"
