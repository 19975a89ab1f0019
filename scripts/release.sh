#!/usr/bin/env bash
# How a crossprof release is made, and what it makes:
#
#   scripts/release.sh VERSION
#
# 1. Requires a clean tree whose workspace version (Cargo.toml) is VERSION.
# 2. Tags HEAD vVERSION (annotated), unless that tag exists already (then it uses the tag).
# 3. Writes the release tarball, the file to publish with the release:
#    dist/release/crossprof-VERSION.tar.gz = git archive --prefix=crossprof-VERSION/ vVERSION
# 4. Points both build systems at that release, in the working tree, for a commit of its own
#    (a commit cannot name itself, so this always follows the tagged commit):
#    - Yocto: the recipe crossprof_VERSION.bb with CROSSPROF_SRCREV = the tag's commit, and
#      crossprof-crates.inc from that commit's Cargo.lock;
#    - Buildroot: CROSSPROF_VERSION, and in crossprof.hash the sha256 of the tarball Buildroot
#      stores after vendoring the release's crates, for each vendoring format
#      (buildroot-pkg/scripts/vendored-tarball.sh, with the default and the nightly cargo).
#    tests/packaging/check.sh then checks all of it against the tag's commit.
# Needs git, cargo and network access to crates.io (for the vendoring).
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: scripts/release.sh VERSION}
tag="v$version"
workspace=$(python3 -c 'import tomllib; print(tomllib.load(open("Cargo.toml", "rb"))["workspace"]["package"]["version"])')
if [ "$workspace" != "$version" ]; then
    echo "release: Cargo.toml's workspace version is $workspace, not $version" >&2
    exit 2
fi
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "release: the working tree has changes; commit or stash them first" >&2
    exit 2
fi
if ! git rev-parse -q --verify "refs/tags/$tag" >/dev/null; then
    git tag -a "$tag" -m "crossprof $version"
fi
commit=$(git rev-parse "$tag^{commit}")

mkdir -p dist/release
tarball="dist/release/crossprof-$version.tar.gz"
git archive --format=tar.gz --prefix="crossprof-$version/" -o "$tarball" "$tag"
echo "release: $tarball (sha256 $(sha256sum "$tarball" | cut -d' ' -f1)), from $tag = $commit"

# Yocto: one recipe, named for the version, building the tag's commit with its crates.
recipe_dir=yocto-layer/recipes-devtools/crossprof
for old in "$recipe_dir"/crossprof_*.bb; do
    [ "$old" = "$recipe_dir/crossprof_$version.bb" ] || git mv "$old" "$recipe_dir/crossprof_$version.bb"
done
sed -i "s/^CROSSPROF_SRCREV ?= \"[0-9a-f]*\"/CROSSPROF_SRCREV ?= \"$commit\"/" "$recipe_dir/crossprof_$version.bb"
python3 yocto-layer/scripts/gen-crates-inc.py --rev "$tag"

# Buildroot: the version, and the hash of the vendored tarball beside the license files'.
mk=buildroot-pkg/package/crossprof/crossprof.mk
hash_file=buildroot-pkg/package/crossprof/crossprof.hash
sed -i "s/^CROSSPROF_VERSION = .*/CROSSPROF_VERSION = $version/" "$mk"
# One hash line per vendoring format that Buildroot releases use (see vendored-tarball.sh):
# the default cargo and the nightly one, when it is installed, cover the two current ones.
vendored=$(mktemp -d)
trap 'rm -rf "$vendored"' EXIT
lines=()
for cargo in cargo "cargo +nightly"; do
    [ "$cargo" = cargo ] || rustup run nightly cargo --version >/dev/null 2>&1 || continue
    lines+=("$(CARGO="$cargo" buildroot-pkg/scripts/vendored-tarball.sh "$tarball" "$vendored")")
done
{
    echo "# Locally calculated after vendoring, by scripts/release.sh: one line per Buildroot"
    echo "# vendoring format (-cargo5: Buildroot 2026.05.x; -cargo6: Buildroot master)"
    printf '%s\n' "${lines[@]}" | sort -u -k3
    echo "# Locally calculated"
    for f in LICENSE-MIT LICENSE-APACHE; do
        echo "sha256  $(git show "$tag:$f" | sha256sum | cut -d' ' -f1)  $f"
    done
} >"$hash_file"
for format in cargo5 cargo6; do
    grep -q -- "-$format.tar.gz\$" "$hash_file" ||
        echo "release: no cargo here vendors in format -$format; add that line by hand" >&2
done
echo "release: recipe, crate list and Buildroot hash now name $tag; commit them:"
echo "  git commit -am 'release $tag: the Yocto recipe and the Buildroot package build it'"
echo "then publish $tarball and push the tag."
