#!/usr/bin/env bash
# Fails when a Rust source file is over 600 lines (issue 13: modules a newcomer can hold in
# mind). Generated code is exempt when it says so in its first five lines (`@generated`, the
# marker rustfmt and cargo use). Reads the files git tracks or would track (not ignored ones),
# so build output under the tree is never counted; outside a git checkout, every *.rs file
# below the top level except target directories.
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=600
list() {
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git ls-files -z --cached --others --exclude-standard -- '*.rs'
    else
        find . -name target -prune -o -name '*.rs' -print0
    fi
}
status=0
while IFS= read -r -d '' f; do
    [ -f "$f" ] || continue
    head -n 5 "$f" | grep -q '@generated' && continue
    n=$(wc -l <"$f")
    if [ "$n" -gt "$LIMIT" ]; then
        echo "$f: $n lines, over the $LIMIT-line limit: split it into modules of one concept each" >&2
        status=1
    fi
done < <(list)
exit "$status"
