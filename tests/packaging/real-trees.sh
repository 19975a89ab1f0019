#!/usr/bin/env bash
# Runs the real build systems on the Yocto layer (yocto-layer/) and the Buildroot package
# (buildroot-pkg/) of the checkout this script lives in: parsing, fetching, unpacking and
# vendoring only, nothing is compiled. Not part of the default test suite (tests/packaging/
# check.sh is); run it by hand after changing either tree:
#
#   tests/packaging/real-trees.sh --oe-core DIR --bitbake DIR --buildroot DIR \
#       [--work DIR] [--only yocto|buildroot] [--cargo 'CARGO COMMAND']
#
#   --oe-core, --bitbake  checkouts of openembedded-core and of the bitbake that goes with it
#                         (master + master, scarthgap + 2.8, ...); needed for the Yocto part
#   --buildroot           a checkout of Buildroot; needed for the Buildroot part
#   --work                where build directories, downloads (kept as a cache) and one log per
#                         bitbake/make invocation go (logs/); reuse it, reruns are much faster.
#                         Default: ${XDG_CACHE_HOME:-~/.cache}/crossprof/real-trees
#   --only                one part only
#   --cargo               the cargo Buildroot's download step vendors with (default: cargo).
#                         Buildroot would use the cargo of its own host-rustc; the vendored
#                         tarball (and so its hash) depends on cargo's version, so give one of
#                         the same minor version, e.g. --cargo 'cargo +nightly'.
#
# Yocto, for MACHINE=qemuarm64 and qemuarm, each in two build directories (WORK/yocto/
# build-<machine>-{release,workingcopy}) sharing WORK/yocto/downloads:
#   - bitbake -p: no WARNING/ERROR line may name crossprof (the count of the others is shown);
#   - bitbake -e crossprof: the crate:// entries of SRC_URI are the crates.io packages of the
#     Cargo.lock of the commit being built, none twice;
#   - "release": local.conf sets only CROSSPROF_GIT_URI to this checkout; "workingcopy": the
#     lines of yocto-layer/README.md between <!-- local.conf: working copy --> and <!-- end -->,
#     after the generator command of the sh block before them (run in the build directory),
#     /path/to/crossprof replaced by this checkout. In each: bitbake crossprof crossprof-native
#     -c fetch, then -c unpack; S holds Cargo.lock at the expected commit, and every crates.io
#     package of it is unpacked where the cargo class points cargo (CARGO_VENDORING_DIRECTORY)
#     with its Cargo.lock checksum; cargo metadata --offline --locked resolves against them;
#   - do_update_crates as `bitbake -c update_crates crossprof` runs it (the expanded function
#     from bitbake -e, writing to a scratch file, nativepython3 = the host's python3 >= 3.11,
#     so python3-native is not built) writes the same crate URLs and checksums as the crate
#     list in use.
# Buildroot, for qemu_aarch64_virt_defconfig and qemu_arm_vexpress_defconfig (WORK/buildroot/
# <defconfig>), with BR2_PACKAGE_CROSSPROF, _HEAP and BR2_PACKAGE_HOST_CROSSPROF:
#   - printvars (HOST_CROSSPROF_LICENSE must carry the vendored-dependencies note once),
#     show-depends, check-package-external;
#   - a local release site (python3 -m http.server on 127.0.0.1) serving the release tarball
#     made as scripts/release.sh makes it (git archive --prefix=crossprof-<version>/ of the
#     recipe's release commit) at the path of CROSSPROF_SITE; then crossprof-source with
#     BR2_DOWNLOAD_FORCE_CHECK_HASHES=y (the hash check), host-crossprof-source, -extract and
#     -legal-info of both, with the sha256 of the vendored tarball Buildroot stored. When the
#     hash check fails, the download is repeated without the hash files, so that the other
#     steps still run and the stored file can be reported.
#
# What differs from a plain build, and why:
#   - local.conf: CONNECTIVITY_CHECK_URIS = "" and INHERIT:remove = "uninative" (both reach
#     yoctoproject.org; nothing here needs them), BB_DONT_CACHE for crossprof (bitbake -p
#     shows its parse warnings on every run, not only when the recipe changed);
#   - make: CROSSPROF_DOWNLOAD_DEPENDENCIES= HOST_CROSSPROF_DOWNLOAD_DEPENDENCIES= (no
#     host-rustc build; the vendoring uses --cargo), CROSSPROF_SITE=<the local site>, and
#     with a host tar older than 1.35 TAR=<a wrapper writing tar 1.35's headers>
#     BR2_TAR_HOST_DEPENDENCY= (no host-tar build). Extract and legal-info need no
#     host-rustc: they depend on the download and on EXTRACT_DEPENDENCIES (host-tar) only.
#
# Runs as root or as any user. bitbake refuses root: as root, bitbake runs as the system user
# crossprof-bb (created if missing; CROSSPROF_BB_USER=name picks another existing user).
# WORK, the checkouts and this repository must be readable by it. bitbake runs with
# HOME=WORK/yocto/home, whose .gitconfig trusts every repository (git refuses repositories
# owned by another user). The first run in a new WORK parses all recipes about twice per
# build directory (some 15-20 minutes with 2 cores); later runs take minutes.
#
# Needs (Debian 12 packages; it installs nothing, and stops with one line naming what is
# missing): for Yocto, oe-core's host tools: chrpath cpio diffstat gawk (besides the usual
# build-essential, git, python3 >= 3.11, wget, file, zstd, lz4, xz-utils, bzip2, patch,
# unzip), locales with en_US.UTF-8 generated (sed -i 's/^# en_US.UTF-8/en_US.UTF-8/'
# /etc/locale.gen && locale-gen), util-linux (runuser); for Buildroot: rsync bc cpio unzip
# wget perl file and python3-magic python3-flake8 shellcheck (check-package), and cargo
# (rustup) with network access to crates.io. Network: only static.crates.io/index.crates.io
# (crates) are used; the sources come from this checkout.
set -euo pipefail
started=$(date +%s)
repo=$(cd "$(dirname "$0")/../.." && pwd)
usage="usage: tests/packaging/real-trees.sh --oe-core DIR --bitbake DIR --buildroot DIR [--work DIR] [--only yocto|buildroot] [--cargo CMD]"

oe=
bbdir=
br=
work=
only=
cargo_cmd=cargo
while [ $# -gt 0 ]; do
    case "$1" in
    --oe-core) oe=${2:?$usage}; shift 2 ;;
    --bitbake) bbdir=${2:?$usage}; shift 2 ;;
    --buildroot) br=${2:?$usage}; shift 2 ;;
    --work) work=${2:?$usage}; shift 2 ;;
    --only) only=${2:?$usage}; shift 2 ;;
    --cargo) cargo_cmd=${2:?$usage}; shift 2 ;;
    -h | --help) echo "$usage"; exit 0 ;;
    *) echo "$usage" >&2; exit 2 ;;
    esac
done
case "$only" in "" | yocto | buildroot) ;; *) echo "$usage" >&2; exit 2 ;; esac
do_yocto=$([ "$only" != buildroot ] && echo 1 || echo 0)
do_br=$([ "$only" != yocto ] && echo 1 || echo 0)
if [ "$do_yocto" = 1 ] && { [ -z "$oe" ] || [ -z "$bbdir" ]; }; then
    echo "real-trees: the Yocto part needs --oe-core and --bitbake ($usage)" >&2
    exit 2
fi
if [ "$do_br" = 1 ] && [ -z "$br" ]; then
    echo "real-trees: the Buildroot part needs --buildroot ($usage)" >&2
    exit 2
fi
for d in "$oe" "$bbdir" "$br"; do
    if [ -n "$d" ] && [ ! -d "$d" ]; then echo "real-trees: no directory $d" >&2; exit 2; fi
done
[ -z "$oe" ] || oe=$(cd "$oe" && pwd)
[ -z "$bbdir" ] || bbdir=$(cd "$bbdir" && pwd)
[ -z "$br" ] || br=$(cd "$br" && pwd)
work=${work:-${XDG_CACHE_HOME:-$HOME/.cache}/crossprof/real-trees}
mkdir -p "$work/logs"
work=$(cd "$work" && pwd)
logs=$work/logs
# One run at a time per WORK.
exec 9>"$work/.lock"
if ! flock -n 9; then echo "real-trees: another run uses $work" >&2; exit 2; fi

passed=0
failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
info() { echo "  $*"; }
# The last lines of a log, carriage-return progress lines split.
tail_log() {
    echo "  --- $1 (last ${2:-25} lines):"
    tr '\r' '\n' <"$1" | grep -v '^[[:space:]]*$' | tail -n "${2:-25}" | sed 's/^/  | /'
}
elapsed() { local s=$(($(date +%s) - $1)); printf '%dm%02ds' $((s / 60)) $((s % 60)); }
timings=()

# --- helpers in Python (parsing bitbake -e output, Cargo.lock, tarballs) -------------------
helper=$work/real-trees-helper.py
cat >"$helper" <<'PY'
import gzip, hashlib, json, os, re, subprocess, sys, urllib.parse

def die(msg):
    print(msg)
    sys.exit(1)

def bbvars(log):
    """The variables of a bitbake -e dump: VAR="value" or export VAR="value" lines."""
    out = {}
    for line in open(log, errors="replace"):
        m = re.match(r'^(?:export )?([A-Za-z0-9_:.\-+]+)="(.*)"$', line.rstrip("\n"))
        if m:
            out[m.group(1)] = m.group(2).replace('\\"', '"').replace("\\$", "$")
    return out

def lock_registry(path):
    import tomllib
    with open(path, "rb") as f:
        lock = tomllib.load(f)
    return [p for p in lock.get("package", []) if "crates.io" in p.get("source", "")]

def crates_of_srcuri(value):
    return [u for u in value.split() if u.startswith("crate://")]

def cmd_hosttools(oe):
    """Host tools oe-core requires: the literal HOSTTOOLS of bitbake.conf, SANITY_REQUIRED_UTILITIES."""
    tools = []
    for path, var in ((os.path.join(oe, "meta/conf/bitbake.conf"), "HOSTTOOLS"),
                      (os.path.join(oe, "meta/classes-global/sanity.bbclass"), "SANITY_REQUIRED_UTILITIES"),
                      (os.path.join(oe, "meta/classes/sanity.bbclass"), "SANITY_REQUIRED_UTILITIES")):
        if not os.path.exists(path):
            continue
        text = open(path).read().replace("\\\n", " ")
        for m in re.finditer(r'^%s\s*(?:\+=|\?=|=)\s*"([^"]*)"' % var, text, re.M):
            if "${" in m.group(1):
                continue
            tools += m.group(1).split()
    print("\n".join(sorted(set(tools))))

def cmd_vars(log, *names):
    v = bbvars(log)
    for n in names:
        print("%s\t%s" % (n, v.get(n, "")))

def cmd_srcuri(log, lock):
    """crate:// entries of SRC_URI against the crates.io packages of a Cargo.lock."""
    uris = crates_of_srcuri(bbvars(log).get("SRC_URI", ""))
    have = ["%s/%s" % tuple(u.split(";")[0].split("/")[-2:]) for u in uris]
    want = ["%s/%s" % (p["name"], p["version"]) for p in lock_registry(lock)]
    dups = sorted({c for c in have if have.count(c) > 1})
    missing = sorted(set(want) - set(have))
    extra = sorted(set(have) - set(want))
    print("%d crate:// entries in SRC_URI, %d crates.io packages in Cargo.lock, %d listed twice"
          % (len(have), len(want), len(dups)))
    for label, items in (("twice", dups), ("not in SRC_URI", missing), ("not in Cargo.lock", extra)):
        if items:
            print("%s (%d): %s%s" % (label, len(items), " ".join(items[:12]), " ..." if len(items) > 12 else ""))
    sys.exit(0 if len(have) == len(want) and not dups and not missing and not extra else 1)

def cmd_inc_in_use(log):
    """The file whose SRC_URI operation adds the crate:// URLs (from the variable history)."""
    lines = open(log, errors="replace").read().splitlines()
    in_src = False
    last_file = None
    for line in lines:
        if line.startswith("# $SRC_URI "):
            in_src = True
            continue
        if in_src:
            if not line.startswith("#"):
                break
            m = re.match(r"^#\s+\S+\s+(/\S+):\d+", line)
            if m:
                last_file = m.group(1)
            elif "crate://" in line and last_file:
                print(last_file)
                return
    die("no crate:// operation in the history of SRC_URI")

def cmd_update_crates_script(log, target, out):
    """The expanded do_update_crates of a bitbake -e dump, writing to TARGET, as a bash script."""
    text = open(log, errors="replace").read()
    m = re.search(r"^do_update_crates\(\) \{\n(.*?)^\}\n", text, re.M | re.S)
    if not m:
        die("no do_update_crates() in the bitbake -e output")
    body, n = re.subn(r'^(\s*)TARGET_FILE=".*"$', lambda mm: '%sTARGET_FILE="%s"' % (mm.group(1), target),
                      m.group(1), count=1, flags=re.M)
    if n != 1:
        die("do_update_crates has no TARGET_FILE=\"...\" line")
    with open(out, "w") as f:
        f.write("set -e\n")
        for fn in ("bbnote", "bbplain", "bbdebug"):
            f.write('%s() { echo "%s: $*"; }\n' % (fn, fn[2:].upper()))
        f.write('bbwarn() { echo "WARNING: $*"; }\nbbfatal() { echo "ERROR: $*"; exit 1; }\n')
        f.write("do_update_crates() {\n%s}\ndo_update_crates\n" % body)

def inc_entries(path):
    urls, sums = [], []
    for line in open(path):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        urls += re.findall(r"crate://\S+", s)
        m = re.match(r'^SRC_URI\[([^\]]+)\.sha256sum\]\s*=\s*"([0-9a-f]+)"', s)
        if m:
            sums.append((m.group(1), m.group(2)))
    return urls, sums

def cmd_compare_inc(gen, inuse):
    gu, gs = inc_entries(gen)
    iu, is_ = inc_entries(inuse)
    dups = sorted({u for u in gu if gu.count(u) > 1})
    print("update_crates wrote %d crate:// URLs (%d listed twice%s) and %d checksums; the list in use has %d and %d"
          % (len(gu), len(dups), (": " + " ".join(d.split("crates.io/")[-1] for d in dups[:8])
                                   + (" ..." if len(dups) > 8 else "")) if dups else "",
             len(gs), len(iu), len(is_)))
    same = gu == iu and gs == is_
    if not same:
        for label, a, b in (("URLs only written by update_crates", gu, iu), ("URLs only in the list in use", iu, gu)):
            d = sorted(set(a) - set(b))
            if d:
                print("%s (%d): %s%s" % (label, len(d), " ".join(x.split("crates.io/")[-1] for x in d[:10]),
                                         " ..." if len(d) > 10 else ""))
        d = sorted(set(gs) ^ set(is_))
        if d:
            print("checksum lines that differ: %d, e.g. %s" % (len(d), d[0][0]))
        if not (set(gu) ^ set(iu)) and not d:
            print("same entries, different order or count")
    sys.exit(0 if same and not dups else 1)

def checksums_in(vendor):
    sums = {}
    if os.path.isdir(vendor):
        for d in os.listdir(vendor):
            p = os.path.join(vendor, d, ".cargo-checksum.json")
            if os.path.exists(p):
                try:
                    sums[json.load(open(p)).get("package")] = d
                except ValueError:
                    pass
    return sums

def cmd_check_vendor(lock, vendor):
    """Every crates.io package of LOCK is in VENDOR with its checksum (.cargo-checksum.json)."""
    pkgs = lock_registry(lock)
    sums = checksums_in(vendor)
    missing = ["%s-%s" % (p["name"], p["version"]) for p in pkgs if p.get("checksum") not in sums]
    print("%d of %d crates.io packages of Cargo.lock unpacked with their checksum (%d crate directories)"
          % (len(pkgs) - len(missing), len(pkgs), len(sums)))
    if missing:
        print("missing (%d): %s%s" % (len(missing), " ".join(missing[:12]), " ..." if len(missing) > 12 else ""))
    sys.exit(0 if pkgs and not missing else 1)

def cmd_wc_block(readme, repo):
    """The working-copy local.conf lines of the layer README and the generator command before them."""
    lines = open(readme).read().splitlines()
    try:
        i = lines.index("<!-- local.conf: working copy -->")
        j = lines.index("<!-- end -->", i)
    except ValueError:
        sys.exit(3)
    sub = lambda s: s.replace("/path/to/crossprof", repo)
    shell = ("sh", "bash", "shell", "console")
    def blocks(seg):
        out, cur, info = [], None, None
        for l in seg:
            if l.strip().startswith("```"):
                if cur is None:
                    cur, info = [], l.strip()[3:].strip()
                else:
                    out.append((info, cur))
                    cur = None
            elif cur is not None:
                cur.append(l)
        return out
    start = i
    while start > 0 and not lines[start - 1].startswith("#"):
        start -= 1
    before = [b for b in blocks(lines[start:i]) if b[0] in shell]
    inside = blocks(lines[i + 1:j])
    cmds = before[-1][1] if before else []
    for info, body in inside:
        if info in shell:
            cmds += body
    for c in cmds:
        c = c.strip()
        if c and not c.startswith("#"):
            print("CMD\t" + sub(c[2:] if c.startswith("$ ") else c))
    for info, body in inside:
        if info not in shell:
            for l in body:
                if l.strip() and not l.strip().startswith("#"):
                    print("CONF\t" + sub(l))

def tar_format(data, v135):
    """GNU tar >= 1.35 leaves devmajor/devminor empty for non-device entries, 1.34 writes zeros."""
    out = bytearray(data)
    off = 0
    while off + 512 <= len(out):
        h = out[off:off + 512]
        if h == bytes(512):
            break
        size = int(h[124:136].strip(b"\0 ") or b"0", 8)
        if h[156:157] not in (b"3", b"4", b"x", b"g"):
            want = bytes(16) if v135 else b"0000000\x000000000\x00"
            if h[329:345] != want:
                h[329:345] = want
                h[148:156] = b" " * 8
                h[148:156] = b"%06o\x00 " % sum(h)
                out[off:off + 512] = h
        off += 512 + ((size + 511) // 512) * 512
    return bytes(out)

def cmd_tar135():
    sys.stdout.buffer.write(tar_format(sys.stdin.buffer.read(), True))

def cmd_tar_variants(path):
    raw = gzip.decompress(open(path, "rb").read())
    for name, v135 in (("1.35", True), ("1.34", False)):
        gz = subprocess.run(["gzip", "-6", "-n"], input=tar_format(raw, v135), capture_output=True,
                            check=True).stdout
        print("%s\t%s" % (name, hashlib.sha256(gz).hexdigest()))

def cmd_site(site, tarball):
    """Where a release host would serve TARBALL for CROSSPROF_SITE: the directory of the path."""
    u = urllib.parse.urlsplit(site)
    path = u.path.rstrip("/")
    if re.search(r"\.(tar\.\w+|tgz|zip)$", os.path.basename(path)):
        path = os.path.dirname(path)
    print("DIR\t" + path.lstrip("/"))
    print("PATH\t" + u.path + (("?" + u.query) if u.query else ""))

cmd = sys.argv[1].replace("-", "_")
globals()["cmd_" + cmd](*sys.argv[2:])
PY
py() { python3 "$helper" "$@"; }
# git on checkouts that may belong to another user (git refuses those otherwise).
gitc() { git -c safe.directory='*' "$@"; }
# VAR<TAB>value lines into the associative array named $1.
read_vars() {
    local -n arr=$1
    local k v
    # shellcheck disable=SC2034  # arr refers to the caller's array
    while IFS=$'\t' read -r k v; do arr["$k"]=$v; done
}

echo "real-trees: repository $repo ($(gitc -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')), work $work"

# --- prerequisites: one line with what is missing -------------------------------------------
bb_user=
base_path=$PATH
if [ "$do_yocto" = 1 ] && [ "$(id -u)" = 0 ]; then
    bb_user=${CROSSPROF_BB_USER:-crossprof-bb}
    # A clean system PATH: root's may hold directories the user cannot enter.
    base_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
fi
as_bb() { if [ -n "$bb_user" ]; then runuser -u "$bb_user" -- "$@"; else "$@"; fi; }
deb_of() {
    case "$1" in
    ar | as | ld | nm | objcopy | objdump | ranlib | readelf | strings | strip) echo binutils ;;
    bunzip2) echo bzip2 ;; lz4c) echo lz4 ;; pzstd | unzstd) echo zstd ;; xz) echo xz-utils ;;
    rpcgen) echo libc-dev-bin ;; iconv | getconf | ldd) echo libc-bin ;; nc) echo netcat-openbsd ;;
    g++) echo g++ ;; cpp) echo cpp ;; awk) echo gawk ;; cmp | diff) echo diffutils ;;
    find | xargs) echo findutils ;; which) echo debianutils ;; *) echo "$1" ;;
    esac
}
missing=()
if [ "$do_yocto" = 1 ]; then
    if [ -n "$bb_user" ] && ! command -v runuser >/dev/null; then missing+=("runuser (util-linux)"); fi
    # shellcheck disable=SC2207  # tool names have no spaces
    tools=($(py hosttools "$oe"))
    # shellcheck disable=SC2016  # a script for bash -c, expanded there
    probe=$(env -i PATH="$base_path" bash -c 'for t; do command -v "$t" >/dev/null || echo "$t"; done' _ "${tools[@]}")
    for t in $probe; do missing+=("$t ($(deb_of "$t"))"); done
    if ! locale -a 2>/dev/null | grep -qix 'en_US.utf8\|en_US.UTF-8'; then
        missing+=("the en_US.UTF-8 locale (locales, then locale-gen)")
    fi
    if ! env -i PATH="$base_path" python3 -c 'import sys, tomllib; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
        missing+=("python3 >= 3.11 on $base_path (python3)")
    fi
fi
if [ "$do_br" = 1 ]; then
    for t in perl tar wget cpio unzip rsync bc cmp find xargs awk file patch make gcc g++ gzip bzip2 git shellcheck; do
        command -v "$t" >/dev/null || missing+=("$t ($(deb_of "$t"))")
    done
    # check-package runs under the first python3 on PATH; /usr/bin/python3 is the Debian one.
    br_python=
    for p in "$(command -v python3 || true)" /usr/bin/python3; do
        if [ -n "$p" ] && "$p" -c 'import magic, flake8' 2>/dev/null; then br_python=$p; break; fi
    done
    [ -n "$br_python" ] || missing+=("python3 modules magic and flake8 (python3-magic python3-flake8)")
fi
python3 -c 'import tomllib' 2>/dev/null || missing+=("python3 >= 3.11 (python3)")
read -r -a cargo_words <<<"$cargo_cmd"
cargo_bin=$(command -v "${cargo_words[0]}" || true)
[ -n "$cargo_bin" ] || missing+=("cargo (rustup)")
if [ ${#missing[@]} -gt 0 ]; then
    echo "real-trees: missing on this machine: $(printf '%s, ' "${missing[@]}" | sed 's/, $//')" >&2
    exit 2
fi
cargo_run() { "$cargo_bin" "${cargo_words[@]:1}" "$@"; }
cargo_version=$(cargo_run --version | cut -d' ' -f2)

# ================================ Yocto ======================================================
yocto() {
    local t0 ydir home shim
    t0=$(date +%s)
    ydir=$work/yocto
    home=$ydir/home
    shim=$ydir/bin
    mkdir -p "$ydir" "$home" "$shim"
    if [ -n "$bb_user" ]; then
        if ! id "$bb_user" >/dev/null 2>&1; then
            useradd --system --create-home --home-dir "/var/lib/$bb_user" --shell /bin/bash "$bb_user"
        fi
        chown "$bb_user:" "$ydir"
        local d
        for d in "$ydir" "$oe/meta/conf" "$bbdir/bin" "$repo/yocto-layer/conf" "$repo/.git"; do
            if ! runuser -u "$bb_user" -- test -r "$d" -a -x "$d"; then
                echo "real-trees: $bb_user cannot read $d (make it and its parents readable)" >&2
                exit 2
            fi
        done
        runuser -u "$bb_user" -- test -w "$ydir" || { echo "real-trees: $bb_user cannot write $ydir" >&2; exit 2; }
    fi
    # git refuses repositories owned by another user; this HOME is used for bitbake alone.
    printf '[safe]\n\tdirectory = *\n' >"$home/.gitconfig"
    # nativepython3 for do_update_crates: the host's python3 (>= 3.11, for tomllib).
    printf '#!/bin/sh\nexec python3 "$@"\n' >"$shim/nativepython3"
    chmod 755 "$shim/nativepython3"
    [ -z "$bb_user" ] || chown -R "$bb_user:" "$home" "$shim"

    local bb_env=(HOME="$home" PATH="$bbdir/bin:$oe/scripts:$base_path" LANG=en_US.UTF-8 LC_ALL=en_US.UTF-8)
    local v
    for v in http_proxy https_proxy HTTP_PROXY HTTPS_PROXY no_proxy NO_PROXY; do
        if [ -n "${!v:-}" ]; then bb_env+=("$v=${!v}"); fi
    done
    # in_bb DIR CMD...: CMD in DIR as the bitbake user, with a clean environment.
    in_bb() {
        local dir=$1
        shift
        # shellcheck disable=SC2016  # expanded by that bash
        as_bb env -i "${bb_env[@]}" bash -c 'cd "$1" && shift && exec "$@"' _ "$dir" "$@"
    }

    local oe_label bb_version
    oe_label="$(gitc -C "$oe" rev-parse --abbrev-ref HEAD 2>/dev/null || echo '?') $(gitc -C "$oe" rev-parse --short HEAD 2>/dev/null || echo '?')"
    bb_version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$bbdir/lib/bb/__init__.py")
    echo "== Yocto: oe-core $oe_label, bitbake $bb_version ($(gitc -C "$bbdir" rev-parse --short HEAD 2>/dev/null || echo '?'))"

    # The working-copy lines from the layer README, or the fallback.
    local wc_cmds=() wc_conf=() kind line
    if out=$(py wc-block "$repo/yocto-layer/README.md" "$repo"); then
        while IFS=$'\t' read -r kind line; do
            if [ "$kind" = CMD ]; then wc_cmds+=("$line"); else wc_conf+=("$line"); fi
        done <<<"$out"
        info "working copy: ${#wc_conf[@]} local.conf lines and ${#wc_cmds[@]} command(s) from yocto-layer/README.md"
    else
        # shellcheck disable=SC2016  # a bitbake expression, not a shell one
        wc_conf=("CROSSPROF_GIT_URI = \"git://$repo;protocol=file;branch=main\"" 'CROSSPROF_SRCREV = "${AUTOREV}"')
        info "working copy: no marked block in yocto-layer/README.md, using CROSSPROF_GIT_URI + AUTOREV"
    fi

    local template=$oe/meta/conf/templates/default
    [ -d "$template" ] || template=$oe/meta/conf
    # setup_build DIR MACHINE LINES...: conf/ of a build directory, rewritten only when it changes.
    setup_build() {
        local dir=$1 machine=$2
        shift 2
        mkdir -p "$dir/conf"
        [ -z "$bb_user" ] || chown "$bb_user:" "$dir" "$dir/conf"
        {
            if [ -f "$template/local.conf.sample" ]; then cat "$template/local.conf.sample"; else echo 'CONF_VERSION = "2"'; fi
            echo
            echo "# --- tests/packaging/real-trees.sh ---"
            echo "MACHINE = \"$machine\""
            echo "DL_DIR = \"$ydir/downloads\""
            echo "# The connectivity check fetches yoctoproject.org, which a machine that reaches only"
            echo "# the crate registry cannot; the fetch steps themselves show what is reachable."
            echo 'CONNECTIVITY_CHECK_URIS = ""'
            echo "# uninative downloads a prebuilt glibc shim from yoctoproject.org when a build starts;"
            echo "# it serves native binaries, and nothing is compiled here."
            echo 'INHERIT:remove = "uninative"'
            echo "# Parse the crossprof recipe on every run, so that bitbake -p shows its warnings again."
            echo 'BB_DONT_CACHE:pn-crossprof = "1"'
            printf '%s\n' "$@"
        } >"$dir/conf/local.conf.new"
        {
            if [ -f "$template/bblayers.conf.sample" ]; then
                sed "s|##OEROOT##|$oe|g" "$template/bblayers.conf.sample"
            else
                # shellcheck disable=SC2016  # a bitbake expression
                printf 'LCONF_VERSION = "7"\nBBPATH = "${TOPDIR}"\nBBFILES ?= ""\nBBLAYERS ?= "%s/meta"\n' "$oe"
            fi
            echo "BBLAYERS += \"$repo/yocto-layer\""
        } >"$dir/conf/bblayers.conf.new"
        local f
        for f in local.conf bblayers.conf; do
            if cmp -s "$dir/conf/$f.new" "$dir/conf/$f"; then rm "$dir/conf/$f.new"; else mv "$dir/conf/$f.new" "$dir/conf/$f"; fi
            [ -z "$bb_user" ] || chown "$bb_user:" "$dir/conf/$f"
        done
    }

    local machine scenario dir tag log rc
    for machine in qemuarm64 qemuarm; do
        for scenario in release workingcopy; do
            dir=$ydir/build-$machine-$scenario
            tag="yocto $machine $scenario"
            if [ "$scenario" = release ]; then
                setup_build "$dir" "$machine" "CROSSPROF_GIT_URI = \"git://$repo;protocol=file;branch=main\""
            else
                setup_build "$dir" "$machine" "${wc_conf[@]}"
                local c
                for c in "${wc_cmds[@]}"; do
                    log=$logs/$machine-$scenario-generator.log
                    if in_bb "$dir" bash -euc "$c" >"$log" 2>&1; then
                        info "ran in the build directory: $c"
                    else
                        bad "[$tag] README command failed: $c"
                        tail_log "$log"
                    fi
                done
            fi

            # 3. parse everything (once per machine, in the release build directory).
            if [ "$scenario" = release ]; then
                log=$logs/$machine-parse.log
                local p0
                p0=$(date +%s)
                rc=0
                in_bb "$dir" bitbake -p >"$log" 2>&1 || rc=$?
                local msgs ours others
                msgs=$(tr '\r' '\n' <"$log" | grep -E '^(WARNING|ERROR):' || true)
                ours=$(grep -i crossprof <<<"$msgs" || true)
                others=$(grep -vic crossprof <<<"$msgs" || true)
                [ -n "$msgs" ] || others=0
                info "$(tr '\r' '\n' <"$log" | grep '^Parsing of' | tail -1) [$(elapsed "$p0")]"
                if [ "$rc" = 0 ] && [ -z "$ours" ]; then
                    ok "[yocto $machine] bitbake -p: no warning or error about crossprof ($others other warnings/errors)"
                else
                    [ -z "$ours" ] || printf '%s\n' "$ours" | sed 's/^/  | /'
                    bad "[yocto $machine] bitbake -p (exit $rc): $(grep -c . <<<"$ours") lines about crossprof, $others others"
                    [ "$rc" = 0 ] || tail_log "$log"
                fi
            fi

            # 4. the crate list against the Cargo.lock of the commit being built.
            log=$logs/$machine-$scenario-env.log
            if ! in_bb "$dir" bitbake -e crossprof >"$log" 2>&1; then
                bad "[$tag] bitbake -e crossprof"
                tail_log "$log"
                continue
            fi
            local -A ev=()
            read_vars ev < <(py vars "$log" SRC_URI SRCREV S WORKDIR CARGO_HOME CARGO_VENDORING_DIRECTORY)
            local git_uri git_path branch rev lockf
            git_uri=$(tr ' ' '\n' <<<"${ev[SRC_URI]}" | grep -m1 '^git://' || true)
            git_path=${git_uri#git://}
            git_path=${git_path%%;*}
            branch=$(sed -n 's/.*;branch=\([^;]*\).*/\1/p' <<<"$git_uri")
            [ -d "$git_path" ] || git_path=$repo
            if [[ "${ev[SRCREV]}" =~ ^[0-9a-f]{40}$ ]]; then
                rev=${ev[SRCREV]}
            else
                rev=$(gitc -C "$git_path" rev-parse "refs/heads/${branch:-main}" 2>/dev/null || true)
            fi
            info "$tag: source $git_uri, SRCREV ${ev[SRCREV]} = ${rev:-?}"
            lockf=$ydir/Cargo.lock.$machine-$scenario
            if [ -z "$rev" ] || ! gitc -C "$git_path" show "$rev:Cargo.lock" >"$lockf" 2>/dev/null; then
                bad "[$tag] no Cargo.lock at ${rev:-the SRCREV of the recipe} in $git_path"
            elif out=$(py srcuri "$log" "$lockf"); then
                ok "[$tag] SRC_URI crates = Cargo.lock at ${rev:0:12}: ${out%%$'\n'*}"
            else
                printf '%s\n' "$out" | tail -n +2 | sed 's/^/  | /'
                bad "[$tag] SRC_URI crates vs Cargo.lock at ${rev:0:12}: ${out%%$'\n'*}"
            fi

            # 5. fetch and unpack, target and native.
            local task ok_unpack=1
            for task in fetch unpack; do
                log=$logs/$machine-$scenario-$task.log
                rc=0
                in_bb "$dir" bitbake crossprof crossprof-native -c "$task" >"$log" 2>&1 || rc=$?
                if [ "$rc" = 0 ]; then
                    ok "[$tag] bitbake crossprof crossprof-native -c $task"
                else
                    bad "[$tag] bitbake crossprof crossprof-native -c $task (exit $rc)"
                    tail_log "$log"
                    ok_unpack=0
                    break
                fi
            done
            if [ "$ok_unpack" = 1 ]; then
                local pn
                for pn in crossprof crossprof-native; do
                    local -A uv=()
                    if [ "$pn" = crossprof ]; then
                        read_vars uv < <(py vars "$logs/$machine-$scenario-env.log" S CARGO_HOME CARGO_VENDORING_DIRECTORY)
                    else
                        log=$logs/$machine-$scenario-env-native.log
                        if ! in_bb "$dir" bitbake -e crossprof-native >"$log" 2>&1; then
                            bad "[$tag] bitbake -e crossprof-native"
                            tail_log "$log"
                            continue
                        fi
                        read_vars uv < <(py vars "$log" S CARGO_HOME CARGO_VENDORING_DIRECTORY)
                    fi
                    local s=${uv[S]} vend=${uv[CARGO_VENDORING_DIRECTORY]:-${uv[CARGO_HOME]}/bitbake}
                    local head
                    head=$(gitc -C "$s" rev-parse HEAD 2>/dev/null || echo none)
                    if [ ! -f "$s/Cargo.lock" ]; then
                        bad "[$tag] $pn: no Cargo.lock in S ($s)"
                        continue
                    fi
                    if [ -n "$rev" ] && [ "$head" != "$rev" ]; then
                        bad "[$tag] $pn: S is at ${head:0:12}, expected ${rev:0:12}"
                    fi
                    if out=$(py check-vendor "$s/Cargo.lock" "$vend"); then
                        ok "[$tag] $pn: S has Cargo.lock (${head:0:12}); ${out%%$'\n'*} in ${vend#"$dir"/}"
                    else
                        printf '%s\n' "$out" | tail -n +2 | sed 's/^/  | /'
                        bad "[$tag] $pn: ${out%%$'\n'*} in $vend"
                    fi
                    # What cargo_common_do_configure writes: crates.io replaced by that directory.
                    local ch=$ydir/cargo-home-check
                    rm -rf "$ch"
                    mkdir -p "$ch"
                    printf '[source.bitbake]\ndirectory = "%s"\n[source.crates-io]\nreplace-with = "bitbake"\nlocal-registry = "/nonexistent"\n' "$vend" >"$ch/config.toml"
                    log=$logs/$machine-$scenario-$pn-cargo-metadata.log
                    if CARGO_HOME=$ch cargo_run metadata --offline --locked --format-version 1 \
                            --manifest-path "$s/Cargo.toml" >/dev/null 2>"$log"; then
                        ok "[$tag] $pn: cargo metadata --offline --locked resolves every dependency from the unpacked crates"
                    else
                        bad "[$tag] $pn: cargo metadata --offline --locked against the unpacked crates"
                        tail_log "$log" 10
                    fi
                done

                # 6. do_update_crates as bitbake runs it, into a scratch file.
                local inuse gen script
                gen=$ydir/update-crates.$machine-$scenario.inc
                script=$ydir/update-crates.$machine-$scenario.sh
                log=$logs/$machine-$scenario-update-crates.log
                rm -f "$gen"
                if ! inuse=$(py inc-in-use "$logs/$machine-$scenario-env.log"); then
                    bad "[$tag] update_crates: $inuse"
                elif ! out=$(py update-crates-script "$logs/$machine-$scenario-env.log" "$gen" "$script"); then
                    bad "[$tag] update_crates: $out"
                else
                    [ -z "$bb_user" ] || chown "$bb_user:" "$script"
                    if ! in_bb "$dir" env PATH="$shim:$base_path" bash "$script" >"$log" 2>&1 || [ ! -s "$gen" ]; then
                        bad "[$tag] do_update_crates (host python3 as nativepython3)"
                        tail_log "$log"
                    elif out=$(py compare-inc "$gen" "$inuse"); then
                        ok "[$tag] do_update_crates: ${out%%$'\n'*}, identical to ${inuse#"$repo"/}"
                    else
                        printf '%s\n' "$out" | tail -n +2 | sed 's/^/  | /'
                        bad "[$tag] do_update_crates vs ${inuse#"$repo"/}: ${out%%$'\n'*}"
                    fi
                fi
            fi
        done
    done
    timings+=("yocto (oe-core $oe_label): $(elapsed "$t0")")
}

# ================================ Buildroot ==================================================
http_pid=
stop_http() { if [ -n "$http_pid" ]; then kill "$http_pid" 2>/dev/null || true; wait "$http_pid" 2>/dev/null || true; http_pid=; fi; }
trap stop_http EXIT

buildroot() {
    local t0 bdir brbin
    t0=$(date +%s)
    bdir=$work/buildroot
    brbin=$bdir/bin
    mkdir -p "$bdir/dl" "$brbin"
    echo "== Buildroot $(gitc -C "$br" describe --always 2>/dev/null || echo '?'), cargo $cargo_version ($cargo_cmd)"
    # The vendoring at download time runs `cargo` from PATH: this one.
    printf '#!/bin/sh\nexec %q' "$cargo_bin" >"$brbin/cargo"
    # (printf with no arguments would still print one empty word.)
    if [ ${#cargo_words[@]} -gt 1 ]; then printf ' %q' "${cargo_words[@]:1}" >>"$brbin/cargo"; fi
    printf ' "$@"\n' >>"$brbin/cargo"
    ln -sf "$br_python" "$brbin/python3"
    chmod 755 "$brbin/cargo"
    local path="$brbin:$PATH"

    # Buildroot needs GNU tar >= 1.35 (1.35 leaves the devmajor/devminor fields of files empty,
    # which changes every tarball's hash) and otherwise builds host-tar, a compile this check
    # must not do. With an older tar, TAR is a wrapper that runs it and writes those two fields
    # as 1.35 does, so the file in DL_DIR (and its hash) is what Buildroot stores with its own
    # tar; BR2_TAR_HOST_DEPENDENCY= drops host-tar.
    local tar_over=() tar_v
    tar_v=$(tar --version | sed -n '1s/.* \([0-9][0-9.]*\)$/\1/p')
    if [ "$(printf '%s\n1.35\n' "$tar_v" | sort -V | head -1)" != 1.35 ]; then
        # shellcheck disable=SC2016  # the wrapper's own expansions
        printf '#!/usr/bin/env bash\nset -euo pipefail\nif [ "${1:-}" = cf ] && [ "${2:-}" = - ]; then\n    %q "$@" | python3 %q tar135\nelse\n    exec %q "$@"\nfi\n' \
            "$(command -v tar)" "$helper" "$(command -v tar)" >"$brbin/tar-as-1.35"
        chmod 755 "$brbin/tar-as-1.35"
        tar_over=(TAR="$brbin/tar-as-1.35" BR2_TAR_HOST_DEPENDENCY=)
        info "host tar $tar_v < 1.35: Buildroot's tarballs are written as tar 1.35 writes them (emulated, see the script)"
    fi
    # crossprof's download depends on host-rustc (DOWNLOAD_DEPENDENCIES), for the cargo that
    # vendors the crates: that would build or fetch a Rust toolchain. Empty, the vendoring
    # post-process uses the cargo on PATH ($brbin/cargo). DL_DIR is shared by both defconfigs.
    local common=(DL_DIR="$bdir/dl" CROSSPROF_DOWNLOAD_DEPENDENCIES= HOST_CROSSPROF_DOWNLOAD_DEPENDENCIES= "${tar_over[@]}")

    local srcrev recipe version=
    local recipes=("$repo"/yocto-layer/recipes-devtools/crossprof/crossprof_*.bb)
    recipe=${recipes[0]}
    srcrev=$(sed -n 's/^CROSSPROF_SRCREV ?= "\([0-9a-f]\{40\}\)"/\1/p; s/^SRCREV = "\([0-9a-f]\{40\}\)"/\1/p' "$recipe" | head -1)
    local checked_style=0 defconfig
    for defconfig in qemu_aarch64_virt_defconfig qemu_arm_vexpress_defconfig; do
        local o=$bdir/${defconfig%_defconfig} tag="buildroot ${defconfig%_defconfig}" log rc
        local mk=(make -C "$br" O="$o")
        log=$logs/br-${defconfig%_defconfig}-config.log
        if ! { PATH=$path "${mk[@]}" BR2_EXTERNAL="$repo/buildroot-pkg" "$defconfig" &&
            printf 'BR2_PACKAGE_CROSSPROF=y\nBR2_PACKAGE_CROSSPROF_HEAP=y\nBR2_PACKAGE_HOST_CROSSPROF=y\n' >>"$o/.config" &&
            PATH=$path "${mk[@]}" olddefconfig; } >"$log" 2>&1; then
            bad "[$tag] make $defconfig + olddefconfig"
            tail_log "$log"
            continue
        fi
        local opt missing_opts=()
        for opt in BR2_PACKAGE_CROSSPROF BR2_PACKAGE_CROSSPROF_HEAP BR2_PACKAGE_HOST_CROSSPROF; do
            grep -qx "$opt=y" "$o/.config" || missing_opts+=("$opt")
        done
        if [ ${#missing_opts[@]} -eq 0 ]; then
            ok "[$tag] $defconfig with crossprof, its heap interposer and host-crossprof enabled"
        else
            bad "[$tag] olddefconfig dropped ${missing_opts[*]} (a dependency of package/crossprof/Config.in* is not met)"
            continue
        fi

        # 1. printvars
        log=$logs/br-${defconfig%_defconfig}-printvars.log
        local -A bv=()
        if ! PATH=$path "${mk[@]}" -s printvars VARS='CROSSPROF_SOURCE CROSSPROF_SITE CROSSPROF_LICENSE HOST_CROSSPROF_LICENSE CROSSPROF_VERSION HOST_CROSSPROF_SOURCE BR2_PACKAGE_PROVIDES_HOST_RUSTC RUST_BIN_VERSION RUST_VERSION' \
                >"$log" 2>&1; then
            bad "[$tag] make printvars"
            tail_log "$log"
            continue
        fi
        read_vars bv < <(sed -n 's/^\([A-Z0-9_]*\)=/\1\t/p' "$log")
        local var
        for var in CROSSPROF_SOURCE CROSSPROF_SITE CROSSPROF_LICENSE HOST_CROSSPROF_LICENSE CROSSPROF_VERSION; do
            info "$var=${bv[$var]:-}"
        done
        local note="vendored dependencies licenses probably not listed" n
        n=$(grep -o "$note" <<<"${bv[HOST_CROSSPROF_LICENSE]:-}" | wc -l)
        if [ "$n" -le 1 ]; then
            ok "[$tag] HOST_CROSSPROF_LICENSE carries the vendored-dependencies note $n time(s)"
        else
            bad "[$tag] HOST_CROSSPROF_LICENSE carries \"$note\" $n times"
        fi
        version=${bv[CROSSPROF_VERSION]}
        local br_rust=${bv[RUST_BIN_VERSION]:-}
        [ "${bv[BR2_PACKAGE_PROVIDES_HOST_RUSTC]:-}" != host-rust ] || br_rust=${bv[RUST_VERSION]:-}

        # 2. show-depends, check-package
        log=$logs/br-${defconfig%_defconfig}-show-depends.log
        if PATH=$path "${mk[@]}" -s crossprof-show-depends host-crossprof-show-depends >"$log" 2>&1; then
            ok "[$tag] show-depends: crossprof: $(sed -n 1p "$log"); host-crossprof: $(sed -n 2p "$log")"
        else
            bad "[$tag] show-depends"
            tail_log "$log"
        fi
        if [ "$checked_style" = 0 ]; then
            checked_style=1
            log=$logs/br-check-package.log
            local target=check-package-external
            grep -q '^check-package-external:' "$br/Makefile" || target=
            rc=0
            if [ -n "$target" ]; then
                PATH=$path "${mk[@]}" "$target" >"$log" 2>&1 || rc=$?
            else
                (cd "$repo/buildroot-pkg" && git ls-files | sed "s|^|$repo/buildroot-pkg/|" |
                    xargs "$br_python" "$br/utils/check-package" --br2-external) >"$log" 2>&1 || rc=$?
            fi
            local findings
            findings=$(sed -n 's/^\([0-9]*\) warnings generated$/\1/p' "$log" | tail -1)
            if [ "$rc" = 0 ] && [ "${findings:-x}" = 0 ]; then
                ok "[buildroot] ${target:-utils/check-package} on buildroot-pkg: $(grep 'lines processed' "$log" | tail -1), 0 warnings"
            else
                bad "[buildroot] ${target:-utils/check-package} on buildroot-pkg (exit $rc, ${findings:-?} warnings)"
                tail_log "$log" 40
            fi
        fi

        # 3. the release, from a local site
        local tarball="crossprof-$version.tar.gz" site_root=$bdir/site
        if [ -z "$srcrev" ]; then
            bad "[$tag] no release commit (CROSSPROF_SRCREV ?= / SRCREV =) in ${recipe#"$repo"/}"
            continue
        fi
        local -A sl=()
        read_vars sl < <(py site "${bv[CROSSPROF_SITE]}" "$tarball")
        if [ -z "$http_pid" ]; then
            rm -rf "$site_root"
            mkdir -p "$site_root/${sl[DIR]}"
            # As scripts/release.sh makes the file a release publishes (README.md, "Releases").
            gitc -C "$repo" archive --format=tar.gz --prefix="crossprof-$version/" \
                -o "$site_root/${sl[DIR]}/$tarball" "$srcrev"
            local tag_commit
            tag_commit=$(gitc -C "$repo" rev-parse -q --verify "refs/tags/v$version^{commit}" || echo "no tag v$version")
            info "release tarball: $tarball = git archive of $srcrev (the recipe's release commit; v$version: $tag_commit)"
            python3 -u -m http.server --bind 127.0.0.1 --directory "$site_root" 0 >"$logs/br-http.log" 2>&1 &
            http_pid=$!
            for _ in $(seq 50); do
                grep -q 'port [0-9]' "$logs/br-http.log" && break
                sleep 0.1
            done
        fi
        local port
        port=$(sed -n 's/.* port \([0-9]*\) .*/\1/p' "$logs/br-http.log" | head -1)
        local site="http://127.0.0.1:$port${sl[PATH]}"
        local dl=(CROSSPROF_SITE="$site" "${common[@]}")
        info "CROSSPROF_SITE=$site (on the command line)"
        local stored=$bdir/dl/crossprof/${bv[CROSSPROF_SOURCE]}
        if [ "${cargo_version%.*}" != "${br_rust%.*}" ]; then
            info "note: vendoring with cargo $cargo_version, Buildroot's host-rustc is $br_rust: the vendored tarball may differ for that reason alone (--cargo)"
        fi

        # Strict download: the hash check as a user with BR2_DOWNLOAD_FORCE_CHECK_HASHES sees it.
        log=$logs/br-${defconfig%_defconfig}-source.log
        rc=0
        PATH=$path "${mk[@]}" "${dl[@]}" BR2_DOWNLOAD_FORCE_CHECK_HASHES=y crossprof-source >"$log" 2>&1 || rc=$?
        local hashmsg
        hashmsg=$(grep -E "^ERROR: |: OK \(sha256|^WARNING: no hash|No hash found" "$log" | grep -v 'Incomplete download\|while checking' | awk '!seen[$0]++' | tr '\n' ' ' || true)
        local requested
        requested=$(sed -n 's/.*"GET \([^ ]*\) HTTP[^"]*" \([0-9]*\) .*/\1 -> \2/p' "$logs/br-http.log" | tail -1)
        if [ "$rc" = 0 ]; then
            ok "[$tag] make crossprof-source with BR2_DOWNLOAD_FORCE_CHECK_HASHES=y: the hash check passed${hashmsg:+ ($hashmsg)}"
        else
            bad "[$tag] make crossprof-source with BR2_DOWNLOAD_FORCE_CHECK_HASHES=y: ${hashmsg:-exit $rc} (site request: ${requested:-none})"
            [ -n "$hashmsg" ] || tail_log "$log"
            # Without the hash files, to keep the file Buildroot made and go on with the rest.
            log=$logs/br-${defconfig%_defconfig}-source-nohash.log
            if PATH=$path "${mk[@]}" "${dl[@]}" CROSSPROF_HASH_FILES= HOST_CROSSPROF_HASH_FILES= crossprof-source >"$log" 2>&1; then
                info "downloaded again without crossprof.hash, to go on with the steps below"
            else
                bad "[$tag] make crossprof-source (even without the hash file)"
                tail_log "$log"
                continue
            fi
        fi
        if [ -f "$stored" ]; then
            local -A tv=()
            read_vars tv < <(py tar-variants "$stored")
            local sha listed=() fmt
            sha=$(sha256sum "$stored" | cut -d' ' -f1)
            for fmt in 1.35 1.34; do
                if grep -q "${tv[$fmt]}" "$repo/buildroot-pkg/package/crossprof/crossprof.hash"; then listed+=("its tar $fmt form"); fi
            done
            info "DL_DIR/crossprof/${bv[CROSSPROF_SOURCE]}: sha256 $sha (as tar 1.35 writes it: ${tv[1.35]:0:16}..., as tar 1.34: ${tv[1.34]:0:16}...); crossprof.hash lists: ${listed[*]:-neither}"
            tar -tzf "$stored" >"$bdir/stored.list"
            if grep -q "^crossprof-$version/VENDOR/" "$bdir/stored.list" &&
                grep -qx "crossprof-$version/.cargo/config.toml" "$bdir/stored.list"; then
                ok "[$tag] the stored tarball holds crossprof-$version/VENDOR/ and .cargo/config.toml"
            else
                bad "[$tag] the stored tarball lacks crossprof-$version/VENDOR/ or .cargo/config.toml"
            fi
        fi
        log=$logs/br-${defconfig%_defconfig}-host-source.log
        if PATH=$path "${mk[@]}" "${dl[@]}" CROSSPROF_HASH_FILES= HOST_CROSSPROF_HASH_FILES= host-crossprof-source >"$log" 2>&1; then
            ok "[$tag] make host-crossprof-source (the same file: $(grep -c 'Downloading' "$log" || true) downloads)"
        else
            bad "[$tag] make host-crossprof-source"
            tail_log "$log"
        fi
        # Extract and legal-info with the hash files (the license files are checked): they do
        # not download again, the .stamp_downloaded of both packages exists.
        local step
        rm -rf "$o/legal-info"  # the per-package targets append to its manifests
        for step in extract legal-info; do
            log=$logs/br-${defconfig%_defconfig}-$step.log
            if PATH=$path "${mk[@]}" "${dl[@]}" "crossprof-$step" "host-crossprof-$step" >"$log" 2>&1; then
                ok "[$tag] make crossprof-$step host-crossprof-$step"
            else
                bad "[$tag] make crossprof-$step host-crossprof-$step"
                tail_log "$log"
            fi
        done
        local pkgdir
        for pkgdir in "crossprof-$version" "host-crossprof-$version"; do
            local src=$o/build/$pkgdir
            [ -d "$src" ] || continue
            log=$logs/br-${defconfig%_defconfig}-$pkgdir-cargo-metadata.log
            rm -rf "$bdir/empty-cargo-home"
            mkdir -p "$bdir/empty-cargo-home"
            if out=$(py check-vendor "$src/Cargo.lock" "$src/VENDOR") &&
                (cd "$src" && CARGO_HOME=$bdir/empty-cargo-home cargo_run metadata --offline --locked \
                    --format-version 1 >/dev/null 2>"$log"); then
                ok "[$tag] build/$pkgdir: ${out%%$'\n'*} in VENDOR/; cargo metadata --offline --locked resolves"
            else
                printf '%s\n' "$out" | sed 's/^/  | /'
                bad "[$tag] build/$pkgdir: vendored crates incomplete or cargo metadata --offline failed"
                [ ! -s "$log" ] || tail_log "$log" 10
            fi
        done
        if [ -f "$o/legal-info/manifest.csv" ]; then
            # package, version, license, license files
            local m
            for m in manifest host-manifest; do
                grep -h '^"crossprof"' "$o/legal-info/$m.csv" 2>/dev/null |
                    awk -F'","' -v m="$m" '{ print "  legal-info " m ".csv: " substr($1, 2) ", " $2 ", " $3 ", " $4 }' || true
            done
        fi
    done
    stop_http
    timings+=("buildroot: $(elapsed "$t0")")
}

[ "$do_yocto" = 0 ] || yocto
[ "$do_br" = 0 ] || buildroot
for t in "${timings[@]}"; do echo "time: $t"; done
echo "time: total $(elapsed "$started"); logs in $logs"
echo "real-trees: $passed passed, $failed failed"
[ "$failed" = 0 ]
