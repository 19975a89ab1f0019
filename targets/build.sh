#!/usr/bin/env bash
# The one place that says how each shipped binary is built for each target triple. Builds one
# thing for one triple and prints the path of the result on stdout.
#
#   targets/build.sh TRIPLE             # the static rec
#   targets/build.sh TRIPLE heap-musl   # libcrossprof_heap.so for a musl userland
#   targets/build.sh TRIPLE heap-gnu    # libcrossprof_heap.so for a glibc userland
#
# | triple                         | how                                                      |
# |--------------------------------|----------------------------------------------------------|
# | x86_64-unknown-linux-musl      | cargo, musl-gcc (musl-tools) for C code                  |
# | aarch64-unknown-linux-musl     | cargo zigbuild                                           |
# | i686-unknown-linux-musl        | cargo zigbuild                                           |
# | armv7-unknown-linux-musleabihf | cargo zigbuild (no prebuilt std here)                    |
# | riscv64gc-unknown-linux-musl   | cargo zigbuild (no prebuilt std here)                    |
#
# rec is built with -Zbuild-std on every triple, without std's "backtrace" feature: the
# prebuilt std carries the panic hook's backtrace symbolizer (gimli, addr2line, miniz_oxide:
# a fifth of rec), which can name nothing in a stripped binary on a board anyway; a panic
# still prints its message. With zstd's unused strategies left out (below), rec went from
# 940-1,017 KB to about 650 KB (bench/rec_size.py). The heap interposer uses the prebuilt std
# where there is one (it is built per C library, and is not bound by rec's size limit).
# zig is the target C compiler (zstd-sys compiles C) and linker for every non-x86_64 triple:
# no per-target gcc is needed. Every binary gets a GNU build-id (hostside matches board files
# to sysroot files by it; lld adds none unless asked). rec is static (musl's crt-static
# default); a cdylib needs -crt-static. Build products are cached in
# ~/.cache/crossprof/cross/<kind> (CROSSPROF_CROSS_DIR overrides), one directory per kind so
# that different RUSTFLAGS never invalidate each other, and std built by -Zbuild-std is kept
# there: a second run rebuilds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

triple=${1:?usage: targets/build.sh TRIPLE [rec|heap-musl|heap-gnu]}
kind=${2:-rec}
cross_dir="${CROSSPROF_CROSS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/crossprof/cross}"

build_id="-C link-arg=-Wl,--build-id=sha1"
build_std=()
driver=(cargo zigbuild)
case "$triple" in
    x86_64-unknown-linux-musl) driver=(cargo build) ;;
    aarch64-unknown-linux-musl | i686-unknown-linux-musl) ;;
    armv7-unknown-linux-musleabihf | riscv64gc-unknown-linux-musl)
        # No prebuilt std for these triples: build it (about 2 minutes cold, cached after).
        build_std=(-Zbuild-std=std,panic_abort)
        ;;
    *)
        echo "targets/build.sh: unknown triple $triple (see targets/README.md)" >&2
        exit 2
        ;;
esac

case "$kind" in
    rec)
        package=rec
        artifact=rec
        flags="$build_id"
        # std built here, without "backtrace" (see the top); about 1 minute per triple cold.
        build_std=(-Zbuild-std=std,panic_abort -Zbuild-std-features=)
        # rec compresses at zstd levels 1 and 7 only (crossprof-format's ZSTD_LEVEL, rec's
        # disk::FAST_LEVEL), which use the fast, lazy and lazy2 strategies at every input
        # size: the block compressors of the others are left out of the build (110 KB of
        # i686's rec). A level that asked for one would fall back to the next strategy
        # built in (zstd's ZSTD_EXCLUDE_* rule), never fail.
        export TARGET_CFLAGS="${TARGET_CFLAGS:-} -DZSTD_EXCLUDE_DFAST_BLOCK_COMPRESSOR \
            -DZSTD_EXCLUDE_GREEDY_BLOCK_COMPRESSOR -DZSTD_EXCLUDE_BTLAZY2_BLOCK_COMPRESSOR \
            -DZSTD_EXCLUDE_BTOPT_BLOCK_COMPRESSOR -DZSTD_EXCLUDE_BTULTRA_BLOCK_COMPRESSOR"
        ;;
    heap-musl | heap-gnu)
        package=crossprof-heap
        artifact=libcrossprof_heap.so
        # A shared library cannot be crt-static, musl's default. It links against the musl
        # C library it will be loaded with: zig's, on x86_64 too (the host's cc would link
        # it against glibc's libgcc_s and loader, which a musl program does not have).
        flags="$build_id -C target-feature=-crt-static"
        driver=(cargo zigbuild)
        if [ "$kind" = heap-gnu ]; then
            # The glibc triple of the same board, linked by zig against an old glibc's symbol
            # versions (the suffix), so the library loads on old and new glibc userlands alike.
            triple=${triple/-musleabihf/-gnueabihf}
            triple=${triple/-musl/-gnu}
            case "$triple" in
                riscv64*) glibc=2.27 ;; # the first glibc with RISC-V
                *) glibc=2.17 ;;
            esac
            build_std=()
            flags="-C link-arg=-Wl,--build-id=sha1"
            if ! rustup target list --installed | grep -qx "$triple" &&
                ! rustup target add "$triple" >&2; then
                build_std=(-Zbuild-std=std,panic_abort)
                export RUSTC_BOOTSTRAP=1
            fi
            driver=(cargo zigbuild)
        fi
        ;;
    *)
        echo "targets/build.sh: unknown kind $kind (rec, heap-musl or heap-gnu)" >&2
        exit 2
        ;;
esac

if [[ $kind == heap-* && $triple == armv7-* ]]; then
    # The ARMv7 interposer finds its caller's stack pointer through each hook's frame record
    # (crossprof-heap's `stack::arm_entry_registers`): it needs frame pointers.
    flags="$flags -C force-frame-pointers=yes"
fi

if [ ${#build_std[@]} -gt 0 ]; then
    # -Zbuild-std is unstable: allowed on the stable toolchain by RUSTC_BOOTSTRAP. zig brings
    # its own musl, so rustc's self-contained crt objects are left out where zig links.
    export RUSTC_BOOTSTRAP=1
    if [ "${driver[*]}" = "cargo zigbuild" ] && [[ $triple == *musl* ]]; then
        flags="$flags -C link-self-contained=no"
    fi
fi
export CARGO_TARGET_DIR="$cross_dir/$kind"
cargo_target=$triple
[ "$kind" = heap-gnu ] && cargo_target="$triple.$glibc"
RUSTFLAGS="$flags" "${driver[@]}" --locked --release -q -p "$package" "${build_std[@]}" \
    --target "$cargo_target" >&2
echo "$CARGO_TARGET_DIR/$triple/release/$artifact"
