#!/usr/bin/env bash
# Installs the real consumers the export and HTML tests read hostside's files with: Go's pprof
# (Debian's golang-go), headless Chromium (Debian's chromium), and from npm the speedscope
# package (its file-format schema and its own static build), ajv (to validate against that
# schema) and puppeteer-core (to drive Chromium through the DevTools protocol). Idempotent: apt
# only installs what is missing, and the npm packages live in a cache directory keyed by a hash
# of package.json, so a second run does nothing. Prints the npm directory on standard output.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
need=()
for p in golang-go chromium; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
# npm comes with NodeSource's nodejs, or as Debian's own package.
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
    echo "browser/setup: installing ${need[*]}" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
key="$(sha256sum "$here/package.json" | cut -c1-16)"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/crossprof/npm-$key"
if [ ! -f "$dir/.complete" ]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    cp "$here/package.json" "$dir/"
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error >&2)
    touch "$dir/.complete"
fi
echo "$dir"
