#!/bin/sh
# On-CPU profile of cserve under wrk, reduced to µs of CPU per request per
# thread, by syscall and by function (experiments/lib/perf_reduce.py).
#
#   scripts/profile.sh [-d SECS] [-c CONNS] [-t WRK_THREADS] [-s LUA] [-P DEPTH] [-T TOP] [-o DIR]
#                      [-p PID -u URL] [-w WRK_CPUS] [-- CSERVE_ARGS...]
#
# Without -p it starts ./cserve (CSERVE_BIN) with CSERVE_ARGS on a free port
# and stops it afterwards; with -p PID -u URL it profiles a running server
# (any server: only cserve gets the matching stats window). Output in DIR
# (default /tmp/cserve-profile): perf.data, wrk.txt, window.json (cserve's
# stats for the window: --stats-json is written again when the server
# exits), report.txt, report.md. -P DEPTH: HTTP/1.1 pipelining, DEPTH requests per write
# (experiments/wrk/pipeline.lua). -T TOP: functions
# listed per thread (default 12). -t: wrk's threads (default 1); -s LUA: a wrk
# script for the request head (experiments/wrk/browser.lua, say; not with -P).
#
# Timeline: wrk runs WARM + SECS + 1 seconds; after WARM `perf record` starts,
# and the command it records sends SIGUSR2 (a new cserve stats window), sleeps
# SECS and sends SIGUSR1 (write the window's stats). So the perf samples and
# cserve's per-thread request counts and CPU cover the same seconds, and
# perf_reduce.py scales by exact counts. (A thread that runs in short bursts,
# like a loop that dozes, shows less CPU in cpu-clock samples than in its own
# thread clock; perf_reduce.py prints the in-process figure beside it.)
#
# Only on-CPU samples: -e cpu-clock counts only while a thread runs, so a
# thread's samples are its CPU time. A wall-clock sampler would also sample
# the threads while they block in epoll_wait/futex/recv and report waiting as
# cost (experiments/sampler_trap.py measures the difference on one run).
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECS=5 CONNS=16 OUT=/tmp/cserve-profile PID="" URL="" WRKCPUS="" WARM=2 FREQ=999 DEPTH=1 TOP=12 THREADS=1 LUA=""
while getopts d:c:o:p:u:w:F:P:T:t:s: opt; do
    case $opt in
        d) SECS=$OPTARG ;; c) CONNS=$OPTARG ;; o) OUT=$OPTARG ;;
        p) PID=$OPTARG ;; u) URL=$OPTARG ;; w) WRKCPUS=$OPTARG ;; F) FREQ=$OPTARG ;; P) DEPTH=$OPTARG ;; T) TOP=$OPTARG ;;
        t) THREADS=$OPTARG ;; s) LUA=$OPTARG ;;
        *) sed -n '2,19p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
mkdir -p "$OUT"
rm -f "$OUT/stats.json"

STARTED=""
if [ -z "$PID" ]; then
    BIN=${CSERVE_BIN:-$ROOT/cserve}
    PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "$BIN" --bind "127.0.0.1:$PORT" --stats-json "$OUT/stats.json" "$@" 2>"$OUT/server.log" &
    PID=$!
    STARTED=$PID
    URL=${URL:-http://127.0.0.1:$PORT/}
    i=0
    until /usr/bin/python3 -c "import socket; socket.create_connection(('127.0.0.1',$PORT),0.2)" 2>/dev/null; do
        i=$((i + 1)); [ $i -gt 150 ] && { echo "profile: server did not start" >&2; cat "$OUT/server.log" >&2; kill "$PID"; exit 1; }
        sleep 0.1
    done
fi
[ -n "$URL" ] || { echo "profile: -p needs -u URL" >&2; exit 2; }
cleanup() { [ -n "$STARTED" ] && kill "$STARTED" 2>/dev/null && wait "$STARTED" 2>/dev/null; true; }
trap cleanup EXIT

IS_CSERVE=0
grep -q '^cserve' "/proc/$PID/task/$PID/comm" 2>/dev/null && IS_CSERVE=1
grep -q -- '--stats-json' "/proc/$PID/cmdline" 2>/dev/null || IS_CSERVE=0

[ "$DEPTH" -gt 1 ] && [ -n "$LUA" ] && { echo "profile: -P and -s exclude each other" >&2; exit 2; }
WRK="wrk -t$THREADS -c$CONNS -d$((WARM + SECS + 1))s --latency"
[ -n "$LUA" ] && WRK="$WRK -s $LUA"
# DEPTH requests per write: the experiments' own pipelining script
[ "$DEPTH" -gt 1 ] && WRK="$WRK -s $ROOT/experiments/wrk/pipeline.lua"
WRK="$WRK $URL"
[ "$DEPTH" -gt 1 ] && WRK="$WRK -- $DEPTH"
[ -n "$WRKCPUS" ] && WRK="taskset -c $WRKCPUS $WRK"
echo "profile: pid $PID, $WRK; perf record -e cpu-clock -F $FREQ --per-thread -g for ${SECS}s after ${WARM}s" >&2
LOAD0=$(cut -d' ' -f1 /proc/loadavg)
$WRK >"$OUT/wrk.txt" &
WRKPID=$!
sleep "$WARM"
# The stats window opens and closes inside the command perf records for, so
# that it covers the samples' seconds and not perf's own start-up and
# teardown (about a second here, which the window would otherwise add to
# the requests the samples are divided by).
WINDOW="sleep $SECS"
[ $IS_CSERVE = 1 ] && WINDOW="kill -USR2 $PID; sleep $SECS; kill -USR1 $PID"
perf record -q -e cpu-clock -F "$FREQ" --per-thread -g -p "$PID" -o "$OUT/perf.data" -- sh -c "$WINDOW" 2>"$OUT/perf.log" || {
    cat "$OUT/perf.log" >&2; exit 1; }
wait "$WRKPID"
sleep 0.3
rm -f "$OUT/window.json"
[ $IS_CSERVE = 1 ] && [ -s "$OUT/stats.json" ] && cp "$OUT/stats.json" "$OUT/window.json"

SCALE="--wrk $OUT/wrk.txt --seconds $SECS --top $TOP"
[ -s "$OUT/window.json" ] && SCALE="$SCALE --stats-json $OUT/window.json"
perf script -i "$OUT/perf.data" -F comm,tid,period,event,ip,sym,dso 2>/dev/null >"$OUT/perf.txt"
# shellcheck disable=SC2086
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" /usr/bin/python3 -m experiments.lib.perf_reduce "$OUT/perf.txt" $SCALE --json "$OUT/report.json" >"$OUT/report.txt"
{
    echo "On-CPU profile (perf record -e cpu-clock -F $FREQ --per-thread -g, ${SECS} s inside a $(($WARM + SECS + 1)) s wrk run),"
    echo "reduced by experiments/lib/perf_reduce.py. Server: \`$(tr '\0' ' ' </proc/"$PID"/cmdline 2>/dev/null)\`;"
    echo "load: \`$WRK\` — $(grep -E 'Requests/sec' "$OUT/wrk.txt" | tr -s ' ');"
    echo "machine: $(nproc)x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r);"
    echo "commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo none); 1-min load average before: $LOAD0."
    # shellcheck disable=SC2086
    PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" /usr/bin/python3 -m experiments.lib.perf_reduce "$OUT/perf.txt" $SCALE --markdown
} >"$OUT/report.md"
grep -E 'requests in|Requests/sec' "$OUT/wrk.txt" >&2
cat "$OUT/report.txt"
