#!/usr/bin/env bash
# The main job: build rec and hostside, build the bundled demo applications (debug info kept in a
# sysroot, stripped copies as on a board), record them (CPU, then heap), print the symbolized reports.
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

# The heap half: every allocation of a second demo program, with its stack, reported as
# heaptrack would count it (the interposer is preloaded by rec --heap).
gcc -O2 -g -Wl,--build-id tests/programs/heap_truth.c -o "$work/sysroot$work/board/heap-demo"
strip -o "$work/board/heap-demo" "$work/sysroot$work/board/heap-demo"
echo "== rec --heap --no-cpu --out $work/h.zst $work/board/heap-demo" >&2
"$CROSSPROF_REC" --heap --no-cpu --out "$work/h.zst" "$work/board/heap-demo"
echo "== hostside report --heap --sysroot $work/sysroot $work/h.zst" >&2
"$CROSSPROF_HOSTSIDE" report --heap --top 5 --sysroot "$work/sysroot" "$work/h.zst"
