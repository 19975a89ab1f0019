#!/usr/bin/env bash
# Runs inside a private network namespace (`unshare -n`, started by tests/tests/debuginfod.rs):
# Debian's debuginfod serving SERVED, then misbehaving servers, each followed by a hostside
# report of REC with DEBUGINFOD_URLS pointing at it. Reports and timings go to OUT/.
# Inputs (environment): HOSTSIDE, REC, SERVED, ID (the program's build-id), OUT, OTHER_ELF.
set -euo pipefail
here="$(dirname "$0")"
ip link set lo up
report() { # NAME URL CACHE: one report; its start and end times in OUT/NAME.times
    local start=$EPOCHREALTIME
    DEBUGINFOD_URLS="$2" DEBUGINFOD_CACHE_PATH="$3" DEBUGINFOD_TIMEOUT=2 \
        timeout 300 "$HOSTSIDE" report --json --top 1000 "$REC" >"$OUT/$1.json" 2>"$OUT/$1.err"
    echo "$start $EPOCHREALTIME" >"$OUT/$1.times"
}
wait_ready() { # FIFO: the fake server printed "ready"
    local line
    read -r -t 20 line <"$1"
    [ "$line" = ready ]
}

# Debian's server over a directory (-F), its database in OUT; ready once elfutils' own client
# can fetch the program.
debuginfod -F "$SERVED" -p 8002 -d "$OUT/debuginfod.sqlite" >"$OUT/debuginfod.log" 2>&1 &
server=$!
for _ in $(seq 1 150); do
    if DEBUGINFOD_URLS=http://127.0.0.1:8002 DEBUGINFOD_CACHE_PATH="$OUT/find-cache" \
        debuginfod-find executable "$ID" >/dev/null 2>&1; then
        break
    fi
    sleep 0.2
done
report served http://127.0.0.1:8002 "$OUT/cache-served"
# Again from the cache alone: the server is gone.
kill "$server"
wait "$server" || true
report cached http://127.0.0.1:8002 "$OUT/cache-served"
report stopped http://127.0.0.1:8002 "$OUT/cache-stopped"

for mode in silent garbage file; do
    mkfifo "$OUT/$mode.ready"
    python3 "$here/fake_server.py" "$mode" 8003 "$OTHER_ELF" >"$OUT/$mode.ready" &
    fake=$!
    wait_ready "$OUT/$mode.ready"
    report "$mode" http://127.0.0.1:8003 "$OUT/cache-$mode"
    kill "$fake"
    wait "$fake" || true
done
