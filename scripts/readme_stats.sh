#!/bin/sh
# The example stats table in docs/instruments.md:
# cserve with the default app and handoff under wrk -t1 -c64; the stats window
# opens after 2 s of warm-up and is reported (SIGUSR1) while wrk still runs.
#
#   scripts/readme_stats.sh            run it, record it, rewrite the doc's block
#   scripts/readme_stats.sh --readme   only rewrite the doc's block from the record
#
# The record (the table, wrk's rate, the machine and the commit) goes to
# experiments/results/readme_stats/stats.txt; the block between its
# GENERATED markers is written from that file (experiments/readme_stats.py),
# never by hand.
set -eu
cd "$(dirname "$0")/.."
out=experiments/results/readme_stats
if [ "${1:-}" != "--readme" ]; then
    make -s all # the binary measured is the tree's (the record names its commit)
    mkdir -p "$out"
    port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    err=$(mktemp) wrkout=$(mktemp) pid="" wrk=""
    cleanup() {
        for p in $pid $wrk; do kill "$p" 2>/dev/null || true; done
        rm -f "$err" "$wrkout"
    }
    trap cleanup EXIT
    ./cserve --handoff=ring --bind 127.0.0.1:$port --stats --stats-window 2 2>"$err" &
    pid=$!
    sleep 0.5
    wrk -t1 -c64 -d9s http://127.0.0.1:$port/ >"$wrkout" &
    wrk=$!
    sleep 8
    kill -USR1 $pid
    wait $wrk
    kill -INT $pid
    wait $pid
    pid="" wrk=""
    grep -q Requests/sec "$wrkout" || { echo "readme_stats: wrk reported no rate" >&2; cat "$wrkout" >&2; exit 1; }
    rev=$(git rev-parse --short HEAD)
    # (its own outputs, the doc and the record, do not count)
    [ -z "$(git status --porcelain --untracked-files=no -- . ':!docs/instruments.md' ':!experiments/results')" ] ||
        rev="$rev-dirty"
    {
        printf 'date: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
        printf 'commit: %s\n' "$rev"
        printf 'machine: %s, %s CPUs, kernel %s\n' "$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1)" \
            "$(nproc)" "$(uname -r)"
        printf 'cserve: %s\n' "$(./cserve --version)"
        printf 'wrk: %s\n' "$(grep Requests/sec "$wrkout" | tr -s ' ')"
        # the SIGUSR1 table (the first one), not the one printed at exit
        awk '/^cserve stats/{n++} n==1' "$err" | grep -v 'info:'
    } >"$out/stats.txt"
    cat "$out/stats.txt"
fi
/usr/bin/python3 -m experiments.readme_stats --readme "$out/stats.txt"
