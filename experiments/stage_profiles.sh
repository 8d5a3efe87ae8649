#!/bin/sh
# Where the bound stages' time per request goes, for the bench goals that
# fail on this machine (experiments/README.md, "make bench"): on-CPU
# profiles (scripts/profile.sh), interleaved ROUNDS times.
#
#   experiments/stage_profiles.sh [ROUNDS]     (default 3; ~1 min a round)
#
#   loop-cost  hello, wrk -t1 -c256, pipelining depth 16: the ring against
#              native-hello (`--app native-hello`, no pool), the loop thread
#   flask      Flask (apps/flask_hello.py), wrk -t1 -c16: the ring's pool
#              thread against Granian's threads (1 worker, 1 blocking thread)
#
# Writes experiments/results/stage-profiles/: each profile's report
# (PART-SERVER-ROUND.{md,json}, with its command, rate, machine and commit;
# stats-*.json, cserve's own counters for the same window, profile.sh's
# window.json) and summary.md
# (experiments/stage_profiles.py).
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-3}
out=experiments/results/stage-profiles
PY=/usr/bin/python3
make -s all
rm -rf "$out"
mkdir -p "$out"

keep() { # keep PROFILE_DIR NAME
    cp "$1/report.md" "$out/$2.md"
    cp "$1/report.json" "$out/$2.json"
    [ -s "$1/window.json" ] && cp "$1/window.json" "$out/stats-$2.json"
    true
}

granian_profile() { # granian_profile NAME: Flask under Granian, every thread of its worker
    port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    $PY -m granian --interface wsgi --workers 1 --blocking-threads 1 --runtime-threads 1 --no-ws \
        --log-level warning --host 127.0.0.1 --port "$port" --working-dir apps flask_hello:app \
        >/tmp/cserve-stage-granian.log 2>&1 &
    gpid=$!
    i=0
    until $PY -c "import socket; socket.create_connection(('127.0.0.1',$port),0.2)" 2>/dev/null; do
        i=$((i + 1)); [ $i -gt 150 ] && { cat /tmp/cserve-stage-granian.log >&2; kill $gpid; exit 1; }
        sleep 0.1
    done
    # the port answers once the main process binds it; the worker may come after
    worker="" i=0
    while [ -z "$worker" ] && [ $i -lt 100 ]; do
        worker=$(pgrep -P $gpid | head -1) || true
        [ -n "$worker" ] || sleep 0.1
        i=$((i + 1))
    done
    [ -n "$worker" ] || { echo "stage_profiles: no Granian worker process" >&2; kill $gpid; exit 1; }
    dir=/tmp/cserve-stage-granian
    scripts/profile.sh -d 4 -c 16 -T 40 -o $dir -p "$worker" -u "http://127.0.0.1:$port/" >/dev/null
    # its threads share one name (python3): one row per thread
    $PY -m experiments.lib.perf_reduce $dir/perf.txt --wrk $dir/wrk.txt --seconds 4 --by tid --top 40 \
        --json $dir/report.json >/dev/null
    kill $gpid; wait $gpid 2>/dev/null || true
    keep $dir "$1"
}

for i in $(seq "$rounds"); do
    for mode in ring native; do
        args="--handoff ring --blocking-threads 1 --chdir apps hello:application"
        [ $mode = native ] && args="--app native-hello"
        # shellcheck disable=SC2086
        scripts/profile.sh -d 4 -c 256 -P 16 -T 40 -o "/tmp/cserve-stage-$mode" -- $args >/dev/null
        keep "/tmp/cserve-stage-$mode" "loop-cost-$mode-$i"
    done
    scripts/profile.sh -d 4 -c 16 -T 40 -o /tmp/cserve-stage-flask -- --handoff ring --blocking-threads 1 \
        --chdir apps flask_hello:app >/dev/null
    keep /tmp/cserve-stage-flask "flask-ring-$i"
    granian_profile "flask-granian-$i"
done
$PY -m experiments.stage_profiles "$out" "$rounds"
