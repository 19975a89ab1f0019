# The Ninja build tool from Debian's ninja-build source package, C++ compiled with the
# compiler's defaults (exceptions and RTTI on, unlike upstream's bootstrap), so its unwind
# tables are what a C++ program with exceptions has. Workload: a dry run (-n) over a
# generated manifest of many thousand edges: manifest parsing, graph building, planning.
RECIPE_KIND=c
SOURCE_PACKAGE=ninja-build
SOURCE_VERSION=1.11.1-2~deb12u1
BINARY=ninja
WORKLOAD_FILES=(ninja.awk)
WORKLOAD_ARGS=(-n -f build.ninja all)
DEFINES=(-std=c++11 -Wno-deprecated)

recipe_compile() {
    local src
    src=$(rw_debian_source "$SOURCE_PACKAGE" "$SOURCE_VERSION")
    local files=() f
    for f in build build_log clean clparser debug_flags depfile_parser deps_log disk_interface \
        dyndep dyndep_parser edit_distance eval_env graph graphviz json lexer line_printer \
        manifest_parser metrics missing_deps parser state status string_piece_util util \
        version subprocess-posix ninja; do
        files+=("$src/src/$f.cc")
    done
    rw_compile "$1" "$CXX" "${files[@]}"
}

recipe_link() {
    "$CXX" "${CFLAGS[@]}" "${LDFLAGS[@]}" "$1"/*.o -o "$2" || rw_die "linking ninja failed"
}

workload() {
    awk -v edges=100000 -f "$RW_DIR/workloads/ninja.awk" >"$1/build.ninja"
}
