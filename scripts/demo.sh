#!/usr/bin/env bash
# The main job: build rec and hostside, build the bundled demo application (debug info kept in a
# sysroot, a stripped copy as on a board), record it, and print the symbolized report.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
. scripts/env.sh
work="${DEMO_DIR:-$(mktemp -d -t crossprof-demo-XXXXXX)}"
mkdir -p "$work/board" "$work/sysroot$work/board"
gcc -O2 -g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -Wl,--build-id tests/programs/cpu_split.c -o "$work/sysroot$work/board/demo-app"
strip -o "$work/board/demo-app" "$work/sysroot$work/board/demo-app"
# The board's C library goes into the sysroot too, as a Yocto or Buildroot sysroot holds it.
for lib in $(ldd "$work/board/demo-app" | grep -o '/[^ ]*'); do
    real=$(readlink -f "$lib")
    mkdir -p "$work/sysroot$(dirname "$lib")" "$work/sysroot$(dirname "$real")"
    cp -n "$real" "$work/sysroot$real"
    [ "$lib" = "$real" ] || ln -sf "$real" "$work/sysroot$lib"
done
echo "== rec --out $work/t.zst $work/board/demo-app   (stripped, as on a board)" >&2
"$CROSSPROF_REC" --out "$work/t.zst" "$work/board/demo-app" 2000
# Debian's -dbg packages put separate debug files under /usr/lib/debug/.build-id: use them
# for the C library's frames when they are installed.
extra=()
[ -d /usr/lib/debug/.build-id ] && extra=(--debug-dir /usr/lib/debug)
echo "== hostside report --sysroot $work/sysroot ${extra[*]} $work/t.zst" >&2
"$CROSSPROF_HOSTSIDE" report --sysroot "$work/sysroot" "${extra[@]}" "$work/t.zst"
