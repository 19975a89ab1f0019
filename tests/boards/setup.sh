#!/usr/bin/env bash
# Installs what the emulated-board tests need, idempotently: QEMU for ARM, the Debian cross
# compilers for the test programs (and their target C libraries), and a real Debian bookworm
# kernel per board plus Debian's C library with its debug info, downloaded as packages for
# that architecture and unpacked (never installed) into the user cache. Prints the cache
# directory on stdout.
#
#   tests/boards/setup.sh            # both boards: arm64 and armhf
#   tests/boards/setup.sh arm64      # one board
set -euo pipefail

cache="${CROSSPROF_BOARDS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crossprof/boards}"
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(arm64 armhf)

# shellcheck source=../../scripts/lib/apt.sh
. "$(dirname "$0")/../../scripts/lib/apt.sh"
APT_WHO=boards apt_ensure qemu-system-arm gcc-aarch64-linux-gnu libc6-dev-arm64-cross \
    gcc-arm-linux-gnueabihf libc6-dev-armhf-cross

# The kernel metapackage of each board's Debian architecture.
meta() {
    case "$1" in
        arm64) echo linux-image-arm64 ;;
        armhf) echo linux-image-armmp ;;
        *) echo "boards: unknown board architecture $1 (arm64 or armhf)" >&2; exit 2 ;;
    esac
}

# Sets `o` (the caller's local) to the apt-get and apt-cache options that read this machine's
# own Debian sources for architecture $1, with private lists and cache under $2 and an empty
# status, so nothing of this machine's apt state changes; and reads those lists.
arch_apt() {
    local arch=$1 work=$2
    mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
    o=(-oAPT::Architecture="$arch" -oAPT::Architectures="$arch" -oDir::State::Lists="$work/lists"
        -oDir::Cache="$work/cache" -oDir::State::status=/dev/null -oAPT::Sandbox::User=root)
    apt-get "${o[@]}" update -qq >/dev/null 2>&1 || true
}

fetch_kernel() {
    local arch=$1 dir="$cache/$1"
    # A complete kernel directory is never touched again (delete it to refresh).
    [ -s "$dir/vmlinuz" ] && [ -s "$dir/virtio_blk.ko" ] && [ -s "$dir/virtio_mmio.ko" ] && return 0
    echo "boards: fetching the Debian $arch kernel into $dir" >&2
    local work
    work=$(mktemp -d "${TMPDIR:-/tmp}/crossprof-kernel-XXXXXX")
    # shellcheck disable=SC2064
    trap "rm -rf '$work'" RETURN
    local o
    arch_apt "$arch" "$work"
    local pkg
    pkg=$(apt-cache "${o[@]}" depends "$(meta "$arch")" 2>/dev/null |
        sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n 1)
    if [ -z "$pkg" ]; then
        echo "boards: no kernel package for $arch in this machine's Debian sources" >&2
        exit 1
    fi
    (cd "$work" && apt-get "${o[@]}" download "$pkg" >/dev/null 2>&1)
    dpkg -x "$work"/"$pkg"_*.deb "$work/x"
    mkdir -p "$dir.new"
    cp "$work"/x/boot/vmlinuz-* "$dir.new/vmlinuz"
    for m in virtio_mmio virtio_blk; do
        local ko
        ko=$(find "$work/x/lib/modules" -name "$m.ko*" | head -n 1)
        case "$ko" in
            *.ko) cp "$ko" "$dir.new/$m.ko" ;;
            *.ko.xz) xz -dc "$ko" >"$dir.new/$m.ko" ;;
            *) echo "boards: $pkg has no $m module" >&2; exit 1 ;;
        esac
    done
    cp "$work"/x/boot/config-* "$dir.new/config"
    echo "$pkg" >"$dir.new/package"
    rm -rf "$dir"
    mv "$dir.new" "$dir"
}

# The kernel's build configuration (/boot/config-* of its package) beside a kernel fetched
# before setup.sh kept it, from the same package: the test of `rec --check` reads it.
fetch_kernel_config() {
    local arch=$1 dir="$cache/$1"
    [ -s "$dir/config" ] && return 0
    local work
    work=$(mktemp -d "${TMPDIR:-/tmp}/crossprof-kconfig-XXXXXX")
    # shellcheck disable=SC2064
    trap "rm -rf '$work'" RETURN
    local o pkg
    pkg=$(cat "$dir/package")
    arch_apt "$arch" "$work"
    if (cd "$work" && apt-get "${o[@]}" download "$pkg" >/dev/null 2>&1); then
        dpkg -x "$work"/"$pkg"_*.deb "$work/x"
        cp "$work"/x/boot/config-* "$dir/config.new"
        mv "$dir/config.new" "$dir/config"
    else
        # That version left the archive: fetch the current kernel, with its configuration.
        echo "boards: $pkg is no longer in the archive; fetching the current $arch kernel" >&2
        rm -rf "$dir"
        fetch_kernel "$arch"
    fi
}

# Debian's own C library for the board (libc6) and its detached debug info (libc6-dbg),
# unpacked into $cache/libc-$arch: a board that runs a distribution's C library, and the
# debug sysroot that goes with it, as Yocto's and Buildroot's debug filesystems hold it. The
# cross toolchain's copy (libc6-*-cross) has no debug info to go with it, and on armhf most of
# its functions have no unwind tables at all.
fetch_libc() {
    local arch=$1 dir="$cache/libc-$1"
    [ -e "$dir/.done" ] && return 0
    echo "boards: fetching Debian's $arch libc6 and libc6-dbg into $dir" >&2
    local work
    work=$(mktemp -d "${TMPDIR:-/tmp}/crossprof-libc-XXXXXX")
    # shellcheck disable=SC2064
    trap "rm -rf '$work'" RETURN
    local o
    arch_apt "$arch" "$work"
    (cd "$work" && apt-get "${o[@]}" download libc6 libc6-dbg >/dev/null 2>&1) || {
        echo "boards: cannot download libc6 and libc6-dbg for $arch" >&2
        exit 1
    }
    rm -rf "$dir.new"
    local deb
    for deb in "$work"/*.deb; do dpkg -x "$deb" "$dir.new"; done
    touch "$dir.new/.done"
    rm -rf "$dir"
    mv "$dir.new" "$dir"
}

# Debian's own perf for the AArch64 board (linux-perf, the same 6.1 as the board's kernel),
# unpacked into $cache/perf-$arch with only the shared libraries its ELF files need
# (DT_NEEDED, followed to the end): the board image of a team that ships Debian's perf, for
# the tests that read a perf.data recorded on the board. perf's Python and Perl scripting
# libraries come along because perf links them, not their standard libraries.
fetch_perf() {
    local arch=$1 dir="$cache/perf-$1"
    [ -e "$dir/.done" ] && return 0
    echo "boards: fetching Debian's $arch linux-perf and its libraries into $dir" >&2
    local work
    work=$(mktemp -d "${TMPDIR:-/tmp}/crossprof-perf-XXXXXX")
    # shellcheck disable=SC2064
    trap "rm -rf '$work'" RETURN
    local o
    arch_apt "$arch" "$work"
    # linux-perf and every library package below it (not perl, python3 and the rest that
    # perf's scripts need and its ELF file does not).
    local pkgs
    pkgs=$(apt-cache "${o[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
        --no-breaks --no-replaces --no-enhances linux-perf 2>/dev/null |
        grep -E '^(linux-perf|zlib1g|lib[^ ]*)$' | grep -v -- '-dev$' | sort -u)
    # shellcheck disable=SC2086
    (cd "$work" && apt-get "${o[@]}" download $pkgs >/dev/null 2>&1) || {
        echo "boards: cannot download linux-perf for $arch" >&2
        exit 1
    }
    local deb
    for deb in "$work"/*.deb; do dpkg -x "$deb" "$work/x"; done
    rm -rf "$dir.new"
    mkdir -p "$dir.new"
    # perf itself, then each library named by DT_NEEDED of what is already taken.
    local queue=(usr/bin/perf) taken=" " f lib path
    while [ ${#queue[@]} -gt 0 ]; do
        f=${queue[0]}
        queue=("${queue[@]:1}")
        case "$taken" in *" $f "*) continue ;; esac
        taken+="$f "
        mkdir -p "$dir.new/$(dirname "$f")"
        cp -L "$work/x/$f" "$dir.new/$f"
        for lib in $(LC_ALL=C readelf -d "$work/x/$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
            path=$(cd "$work/x" && find lib usr/lib -name "$lib" 2>/dev/null | head -n 1)
            if [ -z "$path" ]; then
                echo "boards: $lib (needed by $f) is in none of linux-perf's packages" >&2
                exit 1
            fi
            queue+=("$path")
        done
    done
    # The dynamic linker that every one of them names.
    path=$(cd "$work/x" && find lib usr/lib -name 'ld-linux-*.so.*' | head -n 1)
    mkdir -p "$dir.new/lib"
    cp -L "$work/x/$path" "$dir.new/lib/$(basename "$path")"
    basename "$work"/linux-perf_*.deb >"$dir.new/package"
    touch "$dir.new/.done"
    rm -rf "$dir"
    mv "$dir.new" "$dir"
}

for a in "${archs[@]}"; do
    fetch_kernel "$a"
    fetch_kernel_config "$a"
    fetch_libc "$a"
done
# perf on the AArch64 board only (issue 29): one board shows the perf.data route.
case " ${archs[*]} " in *" arm64 "*) fetch_perf arm64 ;; esac
echo "$cache"
