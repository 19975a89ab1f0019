# SQLite's command-line shell: the amalgamation (sqlite3.c) plus shell.c, generated from
# Debian's sqlite3 source package (Debian's patches applied), compiled as one unit the way
# embedded distributions ship it. A database engine: a deep bytecode VM, a B-tree, a parser.
RECIPE_KIND=c
SOURCE_PACKAGE=sqlite3
SOURCE_VERSION=3.40.1-2+deb12u2
BINARY=sqlite3
WORKLOAD_FILES=(sqlite3.awk)
WORKLOAD_ARGS=(":memory:" ".read bench.sql")
# The emulated boards run the same statements at a twentieth of the size (about 1.5 s there).
BOARD_WORKLOAD_ARGS=(":memory:" ".read bench-board.sql")
BOARD_WORKLOAD_FILES=(bench-board.sql)
DEFINES=(-DSQLITE_THREADSAFE=1 -DSQLITE_ENABLE_FTS5 -DSQLITE_ENABLE_RTREE -DSQLITE_ENABLE_MATH_FUNCTIONS
    -DSQLITE_ENABLE_DBSTAT_VTAB -DSQLITE_DQS=0 -DHAVE_READLINE=0)

# The amalgamation, generated once per source version (needs tclsh and the host compiler).
sqlite3_amalgamation() {
    local src
    src=$(rw_debian_source "$SOURCE_PACKAGE" "$SOURCE_VERSION")
    if [ ! -e "$src/amalgamation/.done" ]; then
        rw_locked "$src/amalgamation" bash -c '
            set -e
            cd "$1"
            [ -e amalgamation/.done ] && exit 0
            rm -rf amalgamation && mkdir amalgamation && cd amalgamation
            ../configure --disable-tcl >configure.log 2>&1 || { cat configure.log >&2; exit 1; }
            make sqlite3.c shell.c >make.log 2>&1 || { tail -n 30 make.log >&2; exit 1; }
            touch .done' _ "$src" || rw_die "generating the SQLite amalgamation failed"
    fi
    echo "$src/amalgamation"
}

recipe_compile() {
    local a
    a=$(sqlite3_amalgamation)
    DEFINES+=("-I$a")
    rw_compile "$1" "$CC" "$a/sqlite3.c" "$a/shell.c"
}

recipe_link() {
    "$CC" "${CFLAGS[@]}" "${LDFLAGS[@]}" "$1/shell.o" "$1/sqlite3.o" -lm -o "$2" ||
        rw_die "linking sqlite3 failed"
}

workload() {
    awk -f "$RW_DIR/workloads/sqlite3.awk" >"$1/bench.sql"
    awk -v scale=0.05 -f "$RW_DIR/workloads/sqlite3.awk" >"$1/bench-board.sql"
}
