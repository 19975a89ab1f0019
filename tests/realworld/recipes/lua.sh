# The Lua 5.4 interpreter from Debian's lua5.4 source package, built like upstream's
# `make linux` (LUA_USE_LINUX, the standard libraries, no readline). An interpreter: a
# register VM, a garbage collector, deep C recursion through the parser and metamethods.
RECIPE_KIND=c
SOURCE_PACKAGE=lua5.4
SOURCE_VERSION=5.4.4-3+deb12u1
BINARY=lua
WORKLOAD_FILES=(lua.lua)
WORKLOAD_ARGS=(bench.lua)
# The emulated boards run one of the ten rounds: the same mix of work, a tenth of it.
BOARD_WORKLOAD_ARGS=(bench.lua 1)
BOARD_WORKLOAD_FILES=(bench.lua)
DEFINES=(-DLUA_COMPAT_5_3 -DLUA_USE_LINUX)

recipe_compile() {
    local src files=()
    src=$(rw_debian_source "$SOURCE_PACKAGE" "$SOURCE_VERSION")
    local f
    for f in "$src"/src/*.c; do
        [ "$(basename "$f")" = luac.c ] || files+=("$f")
    done
    # Debian's patch to luaconf.h (module paths) includes a header its rules generate.
    printf '#define DEB_HOST_MULTIARCH "%s"\n' "$GNU" >"$1/lua5.4-deb-multiarch.h"
    DEFINES+=("-I$1")
    rw_compile "$1" "$CC" "${files[@]}"
}

recipe_link() {
    "$CC" "${CFLAGS[@]}" "${LDFLAGS[@]}" -Wl,-E "$1"/*.o -lm -o "$2" || rw_die "linking lua failed"
}

workload() {
    cp "$RW_DIR/workloads/lua.lua" "$1/bench.lua"
}
