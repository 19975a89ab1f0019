# Sourced by tests/realworld/build.sh: the cache layout, Debian source fetching and the
# compiler and linker flags of each variant. Recipes (recipes/*.sh) only say which files to
# compile and how to link them.

RW_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RW_CACHE="${CROSSPROF_REALWORLD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crossprof/realworld}"

rw_die() {
    echo "realworld: $*" >&2
    exit 1
}

# Runs "$@" with an exclusive lock on $1.lock (tests build the same program from several
# threads at once; the second waits and then finds the result cached).
rw_locked() {
    local key=$1
    shift
    mkdir -p "$(dirname "$key")"
    (
        flock 9
        "$@"
    ) 9>"$key.lock"
}

# The apt options of a private deb-src list for this machine's own Debian mirror, with
# private state and cache directories: this machine's apt state is never touched.
rw_apt_opts() {
    local dir="$RW_CACHE/apt"
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
    if [ ! -s "$dir/sources.list" ]; then
        # Every Debian stanza of the machine's own sources (deb822 or one-line style), as deb-src.
        {
            awk 'BEGIN { RS = ""; FS = "\n" }
                /(^|\n)Types:[^\n]*deb/ {
                    uris = ""; suites = ""; comps = ""
                    for (i = 1; i <= NF; i++) {
                        if ($i ~ /^URIs:/) { uris = $i; sub(/^URIs: */, "", uris) }
                        if ($i ~ /^Suites:/) { suites = $i; sub(/^Suites: */, "", suites) }
                        if ($i ~ /^Components:/) { comps = $i; sub(/^Components: */, "", comps) }
                    }
                    if (uris ~ /debian/) {
                        n = split(suites, s, " ")
                        for (j = 1; j <= n; j++) print "deb-src", uris, s[j], comps
                    }
                }' /etc/apt/sources.list.d/*.sources 2>/dev/null
            awk '$1 == "deb" && $2 ~ /debian/ { $1 = "deb-src"; print }' /etc/apt/sources.list 2>/dev/null
        } | sort -u >"$dir/sources.list"
        [ -s "$dir/sources.list" ] || {
            rm -f "$dir/sources.list"
            rw_die "no Debian archive in this machine's apt sources (/etc/apt/sources.list{,.d/}) to fetch source packages from"
        }
    fi
    RW_APT=(-oDir::Etc::SourceList="$dir/sources.list" -oDir::Etc::SourceParts=/dev/null
        -oDir::State::Lists="$dir/lists" -oDir::Cache="$dir/cache" -oDir::State::status=/dev/null
        -oAPT::Sandbox::User=root -oAcquire::Languages=none)
}

# Unpacks Debian source package $1 at version $2 (Debian patches applied) into
# $RW_CACHE/src/$1_$2 and prints that directory. The version is pinned by the recipe, as a
# Yocto or Buildroot recipe pins it; a version the mirror no longer has is an error that says so.
rw_debian_source() {
    local pkg=$1 ver=$2 dest="$RW_CACHE/src/$1_$2"
    if [ ! -e "$dest/.unpacked" ]; then
        rw_locked "$dest" _rw_debian_source "$pkg" "$ver" "$dest"
    fi
    echo "$dest"
}

_rw_debian_source() {
    local pkg=$1 ver=$2 dest=$3
    [ -e "$dest/.unpacked" ] && return 0
    local dl="$RW_CACHE/downloads"
    mkdir -p "$dl"
    rw_apt_opts
    local dsc="$dl/${pkg}_${ver#*:}.dsc"
    if [ ! -s "$dsc" ]; then
        echo "realworld: fetching Debian source $pkg=$ver" >&2
        apt-get "${RW_APT[@]}" update -qq >/dev/null 2>&1 || true
        (cd "$dl" && apt-get "${RW_APT[@]}" source --download-only -qq "$pkg=$ver" >/dev/null) ||
            rw_die "cannot fetch the Debian source package $pkg=$ver (is the mirror reachable? is that version still there? see tests/realworld/README.md)"
    fi
    rm -rf "$dest"
    dpkg-source --no-check -x "$dsc" "$dest" >/dev/null || rw_die "cannot unpack $dsc"
    touch "$dest/.unpacked"
}

# The tools of architecture $1 (x86_64, aarch64, armv7): sets CC, CXX, STRIP, GNU (the
# Debian multiarch triplet) and ARCH_CFLAGS.
rw_toolchain() {
    case "$1" in
        x86_64) GNU=x86_64-linux-gnu; CC=gcc; CXX=g++; STRIP=strip; ARCH_CFLAGS=() ;;
        aarch64) GNU=aarch64-linux-gnu; CC=$GNU-gcc; CXX=$GNU-g++; STRIP=$GNU-strip; ARCH_CFLAGS=() ;;
        # Debian armhf's default code is Thumb-2; said explicitly so the recipe shows it.
        armv7) GNU=arm-linux-gnueabihf; CC=$GNU-gcc; CXX=$GNU-g++; STRIP=$GNU-strip; ARCH_CFLAGS=(-mthumb) ;;
        *) rw_die "unknown architecture $1 (x86_64, aarch64, armv7)" ;;
    esac
}

# Parses a variant name, [ARCH-]LINKER-OPT-PIE (x86_64 when ARCH is left out), e.g.
# bfd-O2-pie, lld-Os-nopie, aarch64-bfd-O2-pie, or "rust" for the Rust program. Sets
# V_ARCH, V_LINKER, V_OPT, V_PIE.
rw_parse_variant() {
    local v=$1
    V_ARCH=x86_64
    case "$v" in
        x86_64-* | aarch64-* | armv7-*) V_ARCH=${v%%-*}; v=${v#*-} ;;
    esac
    if [ "$v" = rust ]; then
        V_LINKER=rust V_OPT=release V_PIE=pie
        return 0
    fi
    IFS=- read -r V_LINKER V_OPT V_PIE extra <<<"$v"
    [ -z "${extra:-}" ] || rw_die "bad variant $1: [ARCH-]LINKER-OPT-PIE, e.g. bfd-O2-pie"
    case "$V_LINKER" in bfd | lld | mold) ;; *) rw_die "variant $1: linker bfd, lld or mold" ;; esac
    case "$V_OPT" in O2 | Os) ;; *) rw_die "variant $1: optimization O2 or Os" ;; esac
    case "$V_PIE" in pie | nopie) ;; *) rw_die "variant $1: pie or nopie" ;; esac
}

# Compiler and linker flags of the parsed variant, as Yocto and Buildroot builds use them:
# optimization, -g, the distribution's hardening, and the linker chosen with -fuse-ld.
rw_flags() {
    CFLAGS=("-$V_OPT" -g -pipe -fstack-protector-strong -D_FORTIFY_SOURCE=2 "${ARCH_CFLAGS[@]}")
    LDFLAGS=("-fuse-ld=$V_LINKER" -Wl,--build-id=sha1 -Wl,-O1 -Wl,--as-needed -Wl,-z,relro -Wl,-z,now)
    if [ "$V_PIE" = pie ]; then
        CFLAGS+=(-fPIE)
        LDFLAGS+=(-pie)
    else
        CFLAGS+=(-fno-PIE)
        LDFLAGS+=(-no-pie)
    fi
}

# A short hash of the given files and strings: the cache key of a build step.
rw_hash() {
    local f
    {
        for f in "$@"; do
            if [ -f "$f" ]; then cat "$f"; else printf '%s\n' "$f"; fi
        done
    } | sha256sum | cut -c1-12
}

# The versions of the tools a variant uses, for the cache key: a compiler update rebuilds.
rw_tool_versions() {
    "$CC" --version 2>/dev/null | head -n 1
    case "$V_LINKER" in
        bfd) "${GNU}-ld.bfd" --version 2>/dev/null | head -n 1 || ld.bfd --version | head -n 1 ;;
        lld) ld.lld --version | head -n 1 ;;
        mold) mold --version | head -n 1 ;;
        rust) rustc --version ;;
    esac
}

# Compiles each source file ($3...) with compiler $2, CFLAGS and the recipe's DEFINES into
# object directory $1 (one object per file, named after it), two at a time.
rw_compile() {
    local obj=$1 cc=$2
    shift 2
    printf '%s\n' "$@" | xargs -P 2 -I{} sh -c \
        'f={}; o="$0/$(basename "${f%.*}").o"; exec "$@" -c "$f" -o "$o"' \
        "$obj" "$cc" "${CFLAGS[@]}" "${DEFINES[@]}" ||
        rw_die "compiling $PROGRAM failed"
}
