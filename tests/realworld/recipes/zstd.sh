# The zstd command-line compressor from Debian's libzstd source package: the library and
# programs/ compiled together as the upstream Makefile does (multithreading on; no legacy formats,
# no gzip/xz/lz4), compressing a generated text file at a high level. A compressor: tight loops in match
# finders, with a worker thread.
RECIPE_KIND=c
SOURCE_PACKAGE=libzstd
SOURCE_VERSION=1.5.4+dfsg2-5
BINARY=zstd
WORKLOAD_FILES=(text.awk)
WORKLOAD_ARGS=(-q -f -13 -T1 input.txt -o /dev/null)
DEFINES=(-DZSTD_MULTITHREAD -pthread -DZSTD_LEGACY_SUPPORT=0 -DXXH_NAMESPACE=ZSTD_)

recipe_compile() {
    local src
    src=$(rw_debian_source "$SOURCE_PACKAGE" "$SOURCE_VERSION")
    DEFINES+=("-I$src/lib" "-I$src/lib/common")
    # The hand-written x86_64 Huffman decoder (with its own CFI) is built where it applies,
    # as upstream does.
    local asm=()
    [ "$V_ARCH" = x86_64 ] && asm=("$src/lib/decompress/huf_decompress_amd64.S")
    [ "$V_ARCH" = x86_64 ] || DEFINES+=(-DZSTD_DISABLE_ASM)
    rw_compile "$1" "$CC" "$src"/lib/common/*.c "$src"/lib/compress/*.c "$src"/lib/decompress/*.c \
        "${asm[@]}" "$src"/lib/dictBuilder/*.c "$src"/programs/*.c
}

recipe_link() {
    "$CC" "${CFLAGS[@]}" "${LDFLAGS[@]}" -pthread "$1"/*.o -o "$2" || rw_die "linking zstd failed"
}

workload() {
    awk -v lines=130000 -f "$RW_DIR/workloads/text.awk" >"$1/input.txt"
}
