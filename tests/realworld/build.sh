#!/usr/bin/env bash
# Builds one program of the real-world corpus in one variant, cached, and prints the directory
# that holds it (see tests/realworld/README.md for the layout and the list of programs):
#
#   tests/realworld/build.sh sqlite3 bfd-O2-pie        # x86_64, GNU ld, -O2, PIE
#   tests/realworld/build.sh lua lld-Os-nopie
#   tests/realworld/build.sh sqlite3 aarch64-bfd-O2-pie
#   tests/realworld/build.sh ripgrep rust               # stock cargo, Rust's default linker
#
# Everything lands under ~/.cache/crossprof/realworld/ (CROSSPROF_REALWORLD_CACHE), keyed by a
# hash of the recipe, the flags and the tool versions, so a second run only checks stamps.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ $# -eq 2 ] || rw_die "usage: tests/realworld/build.sh PROGRAM VARIANT (see tests/realworld/README.md)"
PROGRAM=$1
VARIANT=$2
RECIPE="$RW_DIR/recipes/$PROGRAM.sh"
[ -f "$RECIPE" ] || rw_die "no recipe for $PROGRAM (have: $(cd "$RW_DIR/recipes" && ls | sed 's/\.sh$//' | tr '\n' ' '))"
rw_parse_variant "$VARIANT"
# Only the programs that also run on the emulated boards set these.
BOARD_WORKLOAD_ARGS=()
BOARD_WORKLOAD_FILES=()
# shellcheck source=recipes/sqlite3.sh
. "$RECIPE"

if [ "$V_LINKER" = rust ] && [ "$RECIPE_KIND" != rust ]; then
    rw_die "$PROGRAM is a C/C++ program: variants are [ARCH-]LINKER-OPT-PIE"
fi
if [ "$V_LINKER" != rust ] && [ "$RECIPE_KIND" = rust ]; then
    rw_die "$PROGRAM is built by cargo: its only variant is rust"
fi

rw_toolchain "$V_ARCH"
"$RW_DIR/setup.sh" --check "$V_ARCH" "$V_LINKER"
[ "$V_LINKER" = rust ] || rw_flags
# Debian's cross gcc looks for the linker -fuse-ld names among its own programs only, where
# lld and mold are not: a directory of ld.lld and ld.mold links, given with -B, lets it find
# them (the flag then names the cache directory, which keys only these variants' builds).
if [ "$V_ARCH" != x86_64 ] && { [ "$V_LINKER" = lld ] || [ "$V_LINKER" = mold ]; }; then
    mkdir -p "$RW_CACHE/ld"
    # Only this variant's linker: the other one may not be installed.
    case "$V_LINKER" in
        lld) ln -sf "$(command -v ld.lld)" "$RW_CACHE/ld/ld.lld" ;;
        mold) ln -sf "$(command -v mold)" "$RW_CACHE/ld/ld.mold" ;;
    esac
    LDFLAGS+=("-B$RW_CACHE/ld")
fi

# The workload: generated inputs, shared by every variant of the program.
WORK_KEY=$(rw_hash "$RW_DIR/lib.sh" "$RECIPE" "${WORKLOAD_FILES[@]/#/$RW_DIR/workloads/}")
WORK="$RW_CACHE/work/$PROGRAM-$WORK_KEY"
if [ ! -e "$WORK/.done" ]; then
    make_workload() {
        [ -e "$WORK/.done" ] && return 0
        rm -rf "$WORK"
        mkdir -p "$WORK"
        workload "$WORK"
        touch "$WORK/.done"
    }
    rw_locked "$WORK" make_workload
fi

# Object files depend on the compiler flags only, so the three linkers share them.
if [ "$RECIPE_KIND" != rust ]; then
    OBJ_KEY=$(rw_hash "$RW_DIR/lib.sh" "$RECIPE" "$V_ARCH" "${CFLAGS[*]}" "$("$CC" --version | head -n 1)")
    OBJ="$RW_CACHE/obj/$PROGRAM-$V_ARCH-$V_OPT-$V_PIE-$OBJ_KEY"
    compile_all() {
        [ -e "$OBJ/.done" ] && return 0
        echo "realworld: compiling $PROGRAM for $V_ARCH -$V_OPT $V_PIE" >&2
        rm -rf "$OBJ"
        mkdir -p "$OBJ"
        recipe_compile "$OBJ"
        touch "$OBJ/.done"
    }
    [ -e "$OBJ/.done" ] || rw_locked "$OBJ" compile_all
fi

# The output layout's version: bump it when build_all changes what it produces.
LAYOUT=1
KEY=$(rw_hash "$RW_DIR/lib.sh" "$LAYOUT" "$RECIPE" "$VARIANT" "$(rw_tool_versions)" \
    "${CFLAGS[*]:-}" "${LDFLAGS[*]:-}")
OUT="$RW_CACHE/build/$PROGRAM-$VARIANT-$KEY"

build_all() {
    [ -e "$OUT/binary" ] && return 0
    echo "realworld: building $PROGRAM $VARIANT" >&2
    rm -rf "$OUT"
    mkdir -p "$OUT/build" "$OUT/board"
    if [ "$RECIPE_KIND" = rust ]; then
        recipe_build "$OUT/build" "$OUT/build/$BINARY"
    else
        recipe_link "$OBJ" "$OUT/build/$BINARY"
    fi
    local board="$OUT/board/$BINARY" guest
    "$STRIP" -o "$board" "$OUT/build/$BINARY"
    # The board path: on x86_64 the program runs where it lies; a cross build goes to
    # /usr/bin on the board.
    if [ "$V_ARCH" = x86_64 ]; then guest=$board; else guest=/usr/bin/$BINARY; fi
    mkdir -p "$OUT/sysroot$(dirname "$guest")"
    cp "$OUT/build/$BINARY" "$OUT/sysroot$guest"
    # The shared libraries it needs, at their board paths in the sysroot (symlinks to this
    # machine's copies, so they always match what the program loads here), and listed in the
    # manifest for the boards (guest path, host file).
    local libs=()
    local libdir
    if [ "$V_ARCH" = x86_64 ]; then libdir=/lib/$GNU; else libdir=/usr/$GNU/lib; fi
    local interp
    interp=$(readelf -l "$board" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
    local needed
    for needed in $(readelf -d "$board" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        # The loader, when named as a library, is the interpreter already listed below.
        [ -n "$interp" ] && [ "$needed" = "$(basename "$interp")" ] && continue
        local host="$libdir/$needed"
        [ -e "$host" ] || host=$(find "$libdir" /usr/lib/"$GNU" -maxdepth 1 -name "$needed" 2>/dev/null | head -n 1)
        [ -n "$host" ] && [ -e "$host" ] || rw_die "$BINARY needs $needed, not found in $libdir"
        libs+=("/lib/$GNU/$needed $(readlink -f "$host")")
    done
    if [ -n "$interp" ]; then
        local hi="$interp"
        [ "$V_ARCH" = x86_64 ] || hi="/usr/$GNU/lib/$(basename "$interp")"
        libs+=("$interp $(readlink -f "$hi")")
    fi
    local l
    for l in "${libs[@]}"; do
        local g=${l%% *} h=${l#* }
        mkdir -p "$OUT/sysroot$(dirname "$g")"
        ln -sf "$h" "$OUT/sysroot$g"
        # On a merged-/usr machine the kernel names the file by its real path.
        if [ "$V_ARCH" = x86_64 ] && [ "$h" != "$g" ]; then
            mkdir -p "$OUT/sysroot$(dirname "$h")"
            ln -sf "$h" "$OUT/sysroot$h"
        fi
    done
    {
        echo "program=$PROGRAM"
        echo "variant=$VARIANT"
        echo "arch=$V_ARCH"
        echo "version=$SOURCE_VERSION"
        echo "board=$board"
        echo "guest=$guest"
        echo "unstripped=$OUT/sysroot$guest"
        echo "sysroot=$OUT/sysroot"
        for l in "${libs[@]}"; do echo "lib=$l"; done
        echo "cflags=${CFLAGS[*]:-}"
        echo "ldflags=${LDFLAGS[*]:-}"
    } >"$OUT/binary.new"
    mv "$OUT/binary.new" "$OUT/binary"
}

# The manifest: the build's facts plus the current workload (a workload change does not
# rebuild the program).
write_manifest() {
    [ -e "$OUT/binary" ] || build_all
    # This machine's detached debug info (libc6-dbg) belongs in an x86_64 debug sysroot too,
    # as in a board's: its C library is then symbolized by hostside and perf alike.
    if [ "$V_ARCH" = x86_64 ] && [ -d /usr/lib/debug/.build-id ] && [ ! -e "$OUT/sysroot/usr/lib/debug" ]; then
        mkdir -p "$OUT/sysroot/usr/lib"
        ln -s /usr/lib/debug "$OUT/sysroot/usr/lib/debug"
    fi
    local a
    {
        cat "$OUT/binary"
        echo "workdir=$WORK"
        for a in "${WORKLOAD_ARGS[@]}"; do echo "arg=$a"; done
        # The emulated boards' smaller workload, and the files of workdir it reads.
        for a in "${BOARD_WORKLOAD_ARGS[@]}"; do echo "board_arg=$a"; done
        for a in "${BOARD_WORKLOAD_FILES[@]}"; do echo "board_input=$a"; done
    } >"$OUT/manifest.new"
    if cmp -s "$OUT/manifest.new" "$OUT/manifest"; then
        rm -f "$OUT/manifest.new"
    else
        mv "$OUT/manifest.new" "$OUT/manifest"
    fi
}
rw_locked "$OUT" write_manifest
echo "$OUT"
