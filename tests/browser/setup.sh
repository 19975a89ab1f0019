#!/usr/bin/env bash
# Installs the real consumers the export and HTML tests read hostside's files with: Go's pprof
# (Debian's golang-go), headless Chromium (Debian's chromium), and from npm the speedscope
# package (its file-format schema and its own static build), ajv (to validate against that
# schema) and puppeteer-core (to drive Chromium through the DevTools protocol). Idempotent: apt
# only installs what is missing, and the npm packages live in a cache directory keyed by a hash
# of package.json, so a second run does nothing. Prints the npm directory on standard output.
# With --check (what the tests run) it installs nothing and fails when setup has not run.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=../../scripts/lib/apt.sh
. "$here/../../scripts/lib/apt.sh"
key="$(sha256sum "$here/package.json" | cut -c1-16)"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/crossprof/npm-$key"
pkgs=(golang-go chromium)
# npm comes with NodeSource's nodejs, or as Debian's own package.
command -v npm >/dev/null 2>&1 || pkgs+=(npm)
if [ "${1:-}" = --check ]; then
    # What the tests run: change nothing, say what setup has not done.
    APT_WHO=browser apt_require "${pkgs[@]}"
    [ -f "$dir/.complete" ] || { echo "browser: npm packages missing in $dir: run scripts/test-setup.sh" >&2; exit 1; }
    echo "$dir"
    exit 0
fi
APT_WHO=browser apt_ensure "${pkgs[@]}"
if [ ! -f "$dir/.complete" ]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    cp "$here/package.json" "$dir/"
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error >&2)
    touch "$dir/.complete"
fi
echo "$dir"
