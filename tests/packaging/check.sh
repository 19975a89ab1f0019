#!/usr/bin/env bash
# Checks of the Yocto layer (yocto-layer/) and the Buildroot package (buildroot-pkg/) that need
# neither GitHub nor a toolchain build (tests/packaging/real-trees.sh runs the real bitbake and
# Buildroot, outside the suite):
#   1. one release: the recipe's CROSSPROF_SRCREV is a commit of this clone (the v<version> tag
#      when present), the recipe file name and CROSSPROF_VERSION are its version, and
#      crossprof-crates.inc matches its Cargo.lock;
#   2. oelint-adv (pinned, in a venv under the user cache dir) reports nothing on the layer
#      (recipes, includes and the kernel bbappend);
#   3. the Buildroot coding-style rules (tests/packaging/br_style.py), and its self-test on a
#      deliberately broken copy;
#   4. bitbake's own fetcher (PyPI's bitbake-setup) fetches and verifies every crate of the
#      list, and fails when one checksum is changed; `bitbake -c update_crates` as oe-core's
#      class walks the release gives the same list;
#   5. Buildroot fetches the file a release publishes, and crossprof.hash holds the hashes of
#      its vendored copy in each vendoring format a cargo here writes;
#   6. a build rehearsal of what both build systems do: a source tarball of the tree, `cargo vendor`
#      (the only step that uses the network), then `cargo build --offline --locked` of rec (and of
#      the heap interposer once recorder/heap exists) for aarch64-unknown-linux-musl inside a network
#      namespace with no interface but a downed loopback, with an empty CARGO_HOME.
# Steps 4 and 5 reach crates.io on a cold cache (~/.cache/crossprof/packaging/bb-downloads).
# What it needs comes from tests/packaging/setup.sh (run first; a no-op when done).
# CROSSPROF_PACKAGING_SKIP_BUILD=1 skips step 4. Caches: ~/.cache/crossprof/packaging.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
. tests/packaging/versions.sh
cache=$PACKAGING_CACHE
mkdir -p "$cache"
tests/packaging/setup.sh
passed=0
failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }

# --- 1. one release: the recipe and the package name the same commit and version -----------
# The recipe builds CROSSPROF_SRCREV, the commit of the last release's tag (scripts/release.sh);
# its file name, the package's CROSSPROF_VERSION and its crate list follow that commit, which
# may be older than the working tree.
srcrev=$(sed -n 's/^CROSSPROF_SRCREV ?= "\([0-9a-f]*\)"$/\1/p' yocto-layer/recipes-devtools/crossprof/crossprof_*.bb)
if ! git cat-file -e "${srcrev:-none}^{commit}" 2>/dev/null; then
    bad "the recipe's CROSSPROF_SRCREV '${srcrev}' is not a commit of this clone (a shallow clone? git fetch --unshallow)"
    srcrev=HEAD
fi
version=$(git show "$srcrev:Cargo.toml" | python3 -c 'import sys, tomllib; print(tomllib.loads(sys.stdin.read())["workspace"]["package"]["version"])')
recipes=(yocto-layer/recipes-devtools/crossprof/crossprof_*.bb)
if [ ${#recipes[@]} -eq 1 ] && [ "${recipes[0]}" = "yocto-layer/recipes-devtools/crossprof/crossprof_${version}.bb" ]; then
    ok "yocto recipe is crossprof_${version}.bb, the version of its commit ${srcrev:0:12}"
else
    bad "yocto recipe ${recipes[*]} should be crossprof_${version}.bb, the version of ${srcrev:0:12} (scripts/release.sh)"
fi
mk_version=$(sed -n 's/^CROSSPROF_VERSION = //p' buildroot-pkg/package/crossprof/crossprof.mk)
if [ "$mk_version" = "$version" ]; then
    ok "buildroot CROSSPROF_VERSION = $version"
else
    bad "buildroot CROSSPROF_VERSION is '$mk_version', the release commit says $version"
fi
if tag_commit=$(git rev-parse -q --verify "refs/tags/v$version^{commit}"); then
    if [ "$tag_commit" = "$(git rev-parse "$srcrev")" ]; then
        ok "tag v$version is the recipe's commit"
    else
        bad "tag v$version is $tag_commit, the recipe builds $srcrev"
    fi
fi
if python3 yocto-layer/scripts/gen-crates-inc.py --check; then
    ok "crossprof-crates.inc matches the Cargo.lock of ${srcrev:0:12}"
else
    bad "crossprof-crates.inc is stale"
fi

# --- 2. oelint-adv ----------------------------------------------------------------------------
venv="$cache/oelint-venv"
# homepageping is suppressed because it makes a network request; the crates.inc carries its
# own inline suppression for inconspaces (see yocto-layer/scripts/gen-crates-inc.py).
# OELINT_SKIP_CONFIG: no ~/.oelint.cfg may change the result.
if out=$(cd yocto-layer && OELINT_SKIP_CONFIG=1 "$venv/bin/oelint-adv" --quiet --release wrynose \
        --hide info --suppress oelint.vars.homepageping --nobackup --noinfo \
        conf/layer.conf recipes-*/*/*.bb recipes-*/*/*.inc recipes-*/*/*.bbappend 2>&1) && [ -z "$out" ]; then
    ok "oelint-adv $OELINT_VERSION: 0 findings"
else
    echo "$out"
    bad "oelint-adv: $(printf '%s\n' "$out" | grep -c . ) findings"
fi

# --- 3. Buildroot coding style --------------------------------------------------------------
if python3 tests/packaging/br_style.py; then ok "buildroot style"; else bad "buildroot style"; fi
if python3 tests/packaging/br_style.py --self-test; then
    ok "buildroot style rejects a broken copy"
else
    bad "buildroot style self-test"
fi

# --- 4. the crate list as bitbake fetches it and as oe-core's class regenerates it ------------
bb_python="$PACKAGING_CACHE/bitbake-venv/bin/python"
if out=$("$bb_python" tests/packaging/bb_fetch_crates.py --dl-dir "$cache/bb-downloads" 2>&1 | grep -v '^--\|^Resolving\|^Connecting\|^HTTP\|^Length\|^Saving\|saved \[\|^$'); then
    ok "${out#bb_fetch_crates: }"
else
    echo "$out"
    bad "bitbake's fetcher on crossprof-crates.inc"
fi
# A test of the test: one checksum changed must fail in bitbake's own verification. A copy of
# that one crate in a scratch download directory keeps the cache intact, and no network is used.
scratch=$(mktemp -d)
first=$(sed -n 's/^SRC_URI\[\(.*\)\.sha256sum\] = .*/\1/p' yocto-layer/recipes-devtools/crossprof/crossprof-crates.inc | head -1)
cp "$cache/bb-downloads/$first.crate" "$cache/bb-downloads/$first.crate.done" "$scratch/" 2>/dev/null || true
python3 - "$first" yocto-layer/recipes-devtools/crossprof/crossprof-crates.inc "$scratch/broken.inc" <<'PY'
import re, sys
name, src, dst = sys.argv[1:]
flip = lambda m: m.group(1) + ("1" if m.group(2) == "0" else "0")
text = re.sub(rf'^(SRC_URI\[{re.escape(name)}\.sha256sum\] = ")(.)', flip, open(src).read(), flags=re.M)
open(dst, "w").write(text)
PY
if cmp -s "$scratch/broken.inc" yocto-layer/recipes-devtools/crossprof/crossprof-crates.inc; then
    bad "test of the test: could not change the checksum of $first"
elif out=$("$bb_python" tests/packaging/bb_fetch_crates.py --dl-dir "$scratch" --inc "$scratch/broken.inc" \
        --only "$first" --offline 2>&1); then
    bad "the fetcher check passed with a wrong checksum for $first"
elif grep -q "bitbake: Checksum mismatch" <<<"$out"; then
    ok "the fetcher check fails on a wrong checksum ($first), in bitbake's own verification"
else
    echo "$out"
    bad "the fetcher check failed on a wrong checksum, but not in bitbake's verification"
fi
rm -rf "$scratch"
# `bitbake -c update_crates` on the release: unpack it, run the recipe's do_update_crates:prepend
# (taken from the recipe) and walk what it leaves, as the class does.
scratch=$(mktemp -d)
mkdir -p "$scratch/S" "$scratch/WORKDIR"
git archive "$srcrev" | tar -x -C "$scratch/S"
lock_dir=$(sed -n 's/^CARGO_LOCK_SRC_DIR = "\(.*\)"$/\1/p' yocto-layer/recipes-devtools/crossprof/crossprof_*.bb)
lock_dir=${lock_dir//\$\{WORKDIR\}/$scratch/WORKDIR}
prepend=$(sed -n '/^do_update_crates:prepend() {$/,/^}$/p' yocto-layer/recipes-devtools/crossprof/crossprof_*.bb | sed '1d;$d')
prepend=${prepend//\$\{S\}/$scratch/S}
prepend=${prepend//\$\{CARGO_LOCK_SRC_DIR\}/${lock_dir:-$scratch/S}}
bash -euc "$prepend"
if out=$(python3 tests/packaging/update_crates_like_oe.py "${lock_dir:-$scratch/S}" 2>&1); then
    ok "bitbake -c update_crates, as oe-core's class walks: ${out#update_crates would }"
else
    echo "$out"
    bad "update_crates would not write the committed crate list"
fi
rm -rf "$scratch"

# --- 5. Buildroot: the release tarball the package fetches, and its hashes -------------------
# CROSSPROF_SITE must name the file a release publishes (scripts/release.sh: git archive of the
# tag), and crossprof.hash must hold, for each vendoring format, the hash Buildroot computes
# after vendoring it: checked for every format a cargo on this machine writes (the default
# one, and nightly when installed), and both formats must be listed.
br_site=$(sed -n 's/^CROSSPROF_SITE = //p' buildroot-pkg/package/crossprof/crossprof.mk)
br_site=${br_site//\$(CROSSPROF_VERSION)/$mk_version}
if [[ "$br_site" == */"crossprof-$version.tar.gz?buildroot-path=filename" ]]; then
    ok "buildroot fetches crossprof-$version.tar.gz, the file a release publishes"
else
    bad "buildroot's CROSSPROF_SITE '$br_site' does not fetch crossprof-$version.tar.gz"
fi
hash_file=buildroot-pkg/package/crossprof/crossprof.hash
for format in cargo5 cargo6; do
    grep -q "^sha256  [0-9a-f]\{64\}  crossprof-$version-$format.tar.gz$" "$hash_file" ||
        bad "crossprof.hash has no line for crossprof-$version-$format.tar.gz"
done
scratch=$(mktemp -d)
git archive --format=tar.gz --prefix="crossprof-$version/" -o "$scratch/crossprof-$version.tar.gz" "$srcrev"
for cargo in cargo "cargo +nightly"; do
    [ "$cargo" = cargo ] || rustup run nightly cargo --version >/dev/null 2>&1 || continue
    rc=0
    line=$(CARGO="$cargo" buildroot-pkg/scripts/vendored-tarball.sh \
        "$scratch/crossprof-$version.tar.gz" "$scratch" 2>"$scratch/err") || rc=$?
    if [ "$rc" != 0 ]; then
        cat "$scratch/err"
        bad "vendoring crossprof-$version.tar.gz with $cargo as Buildroot does (exit $rc)"
    elif grep -qxF "$line" "$hash_file"; then
        ok "crossprof.hash: ${line##* } vendored by $cargo hashes as listed"
    else
        bad "crossprof.hash lacks '$line' (vendored by $cargo)"
    fi
done
rm -rf "$scratch"

# --- 6. offline vendored build rehearsal ----------------------------------------------------
if [ "${CROSSPROF_PACKAGING_SKIP_BUILD:-0}" = 1 ]; then
    echo "skip: build rehearsal (CROSSPROF_PACKAGING_SKIP_BUILD=1)"
else
    t0=$(date +%s)
    # A fixed place, so that the cached target dir stays valid: cargo keys its fingerprints on
    # the source paths, and tar keeps the files' mtimes.
    work="$cache/rehearsal"
    rm -rf "$work"
    mkdir -p "$work"
    # The source tarball: every file git would commit (tracked, plus untracked and not ignored),
    # which in a clean clone is exactly `git archive HEAD`.
    # CROSSPROF_PACKAGING_REV=HEAD (or any commit) archives that commit instead.
    if [ -n "${CROSSPROF_PACKAGING_REV:-}" ]; then
        git archive --format=tar.gz --prefix="crossprof-$version/" -o "$work/crossprof-$version.tar.gz" \
            "$CROSSPROF_PACKAGING_REV"
    else
        git ls-files -z --cached --others --exclude-standard \
            | xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh \
            | tar --null -T - -czf "$work/crossprof-$version.tar.gz" --transform "s,^,crossprof-$version/,"
    fi
    tar -xzf "$work/crossprof-$version.tar.gz" -C "$work"
    src="$work/crossprof-$version"
    # Vendoring, as Buildroot's cargo post-process does (VENDOR/ + .cargo/config.toml); the
    # vendored crates are cached per Cargo.lock content, so a warm run needs no network at all.
    lock_sum=$(sha256sum "$src/Cargo.lock" | cut -c1-16)
    vendor="$cache/vendor-$lock_sum"
    if [ ! -f "$vendor/.complete" ]; then
        rm -rf "$vendor"
        (cd "$src" && cargo vendor --locked --quiet "$vendor" >/dev/null)
        touch "$vendor/.complete"
    fi
    ln -s "$vendor" "$src/VENDOR"
    mkdir -p "$src/.cargo"
    printf '[source.crates-io]\nreplace-with = "vendored-sources"\n\n[source.vendored-sources]\ndirectory = "VENDOR"\n' \
        > "$src/.cargo/config.toml"
    t_vendor=$(date +%s)
    # The build, with the network really gone: a new network namespace (as root, or as a user
    # with user namespaces) has a downed loopback and nothing else. Where that is impossible,
    # fall back to a proxy that points nowhere plus CARGO_NET_OFFLINE, and say so.
    run_offline() {
        if unshare -n true 2>/dev/null; then
            isolation="unshare -n"; unshare -n "$@"
        elif unshare -rn true 2>/dev/null; then
            isolation="unshare -rn"; unshare -rn "$@"
        else
            isolation="bogus proxy only"
            env https_proxy=http://127.0.0.1:9 http_proxy=http://127.0.0.1:9 "$@"
        fi
    }
    export CARGO_TARGET_DIR="$cache/target"
    triple_env=$(echo "$TRIPLE" | tr 'a-z-' 'A-Z_')
    build_env=(
        env CARGO_HOME="$work/cargo-home" CARGO_NET_OFFLINE=true
        "CARGO_TARGET_${triple_env}_LINKER=rust-lld"
        "CC_${TRIPLE//-/_}=aarch64-linux-gnu-gcc" "AR_${TRIPLE//-/_}=aarch64-linux-gnu-ar"
    )
    mkdir -p "$work/cargo-home"
    probe=$(run_offline sh -c 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | tr "\n" " "; (exec 3<>/dev/tcp/1.1.1.1/443) 2>/dev/null && echo reachable || echo unreachable' 2>/dev/null || true)
    rustflags="-C link-arg=--build-id=sha1"
    log="$work/build.log"
    built=1
    (cd "$src" && run_offline "${build_env[@]}" "CARGO_TARGET_${triple_env}_RUSTFLAGS=$rustflags" \
        cargo build --offline --locked --profile distro -p rec --target "$TRIPLE") >"$log" 2>&1 || built=0
    has_heap=$(python3 -c 'import sys, tomllib; print(int("recorder/heap" in tomllib.load(open(sys.argv[1], "rb"))["workspace"]["members"]))' "$src/Cargo.toml")
    heap_msg="interposer: recorder/heap is not a workspace member yet, not built"
    if [ $built = 1 ] && [ "$has_heap" = 1 ]; then
        # The cdylib gets its own cargo run (on a musl board it would need -crt-static).
        heap_env=$(echo "$HEAP_TRIPLE" | tr 'a-z-' 'A-Z_')
        (cd "$src" && run_offline "${build_env[@]}" \
            "CARGO_TARGET_${heap_env}_LINKER=aarch64-linux-gnu-gcc" \
            "CARGO_TARGET_${heap_env}_RUSTFLAGS=-C link-arg=-Wl,--build-id=sha1" \
            cargo build --offline --locked --profile distro -p crossprof-heap --target "$HEAP_TRIPLE") >>"$log" 2>&1 || built=0
        heap_msg="interposer: built for $HEAP_TRIPLE"
    fi
    t_end=$(date +%s)
    isolation=$(unshare -n true 2>/dev/null && echo "unshare -n" || (unshare -rn true 2>/dev/null && echo "unshare -rn") || echo "bogus proxy only")
    echo "rehearsal: network during the build: $isolation; interfaces: ${probe% unreachable*}; tcp to the internet: ${probe##* }"
    if [ $built = 0 ]; then
        tail -30 "$log"
        bad "offline build of rec for $TRIPLE (or of the interposer)"
    else
        rec="$CARGO_TARGET_DIR/$TRIPLE/distro/rec"
        desc=$(file -b "$rec")
        if [[ "$desc" == *"ARM aarch64"* ]] && ! readelf -lW "$rec" | grep -q INTERP \
            && readelf -nW "$rec" | grep -q "Build ID" && readelf -SW "$rec" | grep -q "\.debug_info"; then
            ok "offline vendored build: rec is a static aarch64 ELF with a build-id and DWARF ($(stat -c %s "$rec") bytes unstripped)"
        else
            bad "rec is not a static aarch64 ELF with build-id and DWARF: $desc"
        fi
        if [ "$has_heap" = 1 ]; then
            so="$CARGO_TARGET_DIR/$HEAP_TRIPLE/distro/libcrossprof_heap.so"
            if [ -f "$so" ] && file -b "$so" | grep -q "ARM aarch64.*shared object\|shared object.*ARM aarch64" \
                && readelf -nW "$so" | grep -q "Build ID"; then
                ok "offline vendored build: libcrossprof_heap.so is an aarch64 shared object with a build-id"
            else
                bad "libcrossprof_heap.so missing or not an aarch64 shared object with build-id"
            fi
        fi
        echo "rehearsal: $heap_msg"
    fi
    if [ "${probe##* }" != unreachable ] && [ "$isolation" != "bogus proxy only" ]; then
        bad "the build namespace could reach the network"
    fi
    echo "rehearsal: vendor $((t_vendor - t0)) s, offline build $((t_end - t_vendor)) s"
fi

echo "packaging: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
