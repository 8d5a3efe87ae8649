#!/bin/sh
# time-make-test.sh [RECORD] — run `make test` from the repository root, time
# it, and when it passes record the time: RECORD (default
# experiments/results/test-time.txt) gets one line per run (the date, the
# commit, the machine, the load average before and after, the wall time),
# and the test-time block in tests/README.md is rewritten from the newest
# line. A failing `make test` records nothing and
# exits with its status; its output is kept in a log named on stderr.
set -eu
cd "$(dirname "$0")/.."
record=${1:-experiments/results/test-time.txt}
log=$(mktemp "${TMPDIR:-/tmp}/cserve-make-test.XXXXXX")
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || commit="$commit+changes"
cpus=$(nproc)
cpu_model=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -n 1)
mem_gib=$(awk '/^MemTotal:/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s)
rc=0
make test >"$log" 2>&1 || rc=$?
t1=$(date +%s)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
if [ "$rc" != 0 ]; then
    tail -n 40 "$log" >&2
    echo "time-make-test: make test failed (exit $rc) after $((t1 - t0)) s; nothing recorded; log: $log" >&2
    exit "$rc"
fi
secs=$((t1 - t0))
mkdir -p "$(dirname "$record")"
printf '%s\tcommit %s\t%s vCPUs (%s), %s GiB\tload before %s, after %s\tmake test: %d s (%d min %02d s)\n' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$commit" "$cpus" "$cpu_model" "$mem_gib" \
    "$load_before" "$load_after" "$secs" $((secs / 60)) $((secs % 60)) >>"$record"
# the block is made from the record by experiments/test_time.py (the registry
# of generated blocks: experiments/lib/generated.py)
[ "$record" = experiments/results/test-time.txt ] && /usr/bin/python3 -m experiments.test_time --readme
tail -n 1 "$record"
rm -f "$log"
