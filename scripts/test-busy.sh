#!/bin/sh
# test-busy.sh [HOGS [RUNS [RECORD [TARGET]]]] — run `make TARGET` (default
# test) RUNS times (default 3) from the repository root beside HOGS (default
# 2) CPU-bound processes, as a laptop or a shared CI runner that is doing
# other work: the suite's verdicts must not depend on how the kernel
# schedules its threads. HOGS 0 with TARGET integration-test is the quiet
# machine's repeat of the integration suite. Each
# run is a line of RECORD (default experiments/results/test-busy.txt): the
# date, the commit, the machine, the hogs, the load average before and
# after, the CPU the hypervisor stole, the wall time and the verdict. A
# failing run's output is kept in a log named on stderr. Exits 1 if any
# run failed.
set -eu
cd "$(dirname "$0")/.."
hogs=${1:-2}
runs=${2:-3}
record=${3:-experiments/results/test-busy.txt}
target=${4:-test}
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
# The record itself does not make the tree a changed one: each run appends to it.
[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null | grep -vxF " M $record" || true)" ] || commit="$commit+changes"
cpus=$(nproc)
cpu_model=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -n 1)
steal() { awk '/^cpu / { print $9 }' /proc/stat; }
total() { awk '/^cpu / { s = 0; for (i = 2; i <= 9; i++) s += $i; print s }' /proc/stat; }

pids=""
stop_hogs() { [ -z "$pids" ] || kill $pids 2>/dev/null || true; pids=""; }
# A signal ends the script, not just the run it interrupts.
trap stop_hogs EXIT
trap 'stop_hogs; exit 130' INT
trap 'stop_hogs; exit 143' TERM
i=0
while [ "$i" -lt "$hogs" ]; do
    sha256sum /dev/zero >/dev/null 2>&1 &
    pids="$pids $!"
    i=$((i + 1))
done

failed=0
n=1
mkdir -p "$(dirname "$record")"
while [ "$n" -le "$runs" ]; do
    log=$(mktemp "${TMPDIR:-/tmp}/cserve-test-busy.XXXXXX")
    load_before=$(cut -d' ' -f1-3 /proc/loadavg)
    s0=$(steal) c0=$(total) t0=$(date +%s)
    rc=0
    make "$target" >"$log" 2>&1 || rc=$?
    t1=$(date +%s) s1=$(steal) c1=$(total)
    load_after=$(cut -d' ' -f1-3 /proc/loadavg)
    stolen=$(awk -v s="$((s1 - s0))" -v c="$((c1 - c0))" 'BEGIN { printf "%.1f", c ? 100 * s / c : 0 }')
    verdict=passed
    if [ "$rc" != 0 ]; then
        verdict="FAILED (exit $rc)"
        failed=$((failed + 1))
        grep -E "FAIL|Error|failed|error:" "$log" | tail -n 20 >&2 || true
        echo "test-busy: run $n of $runs failed; log: $log" >&2
    else
        rm -f "$log"
    fi
    printf '%s\tcommit %s\t%s vCPUs (%s)\t%s CPU-bound processes beside it\tload before %s, after %s\tsteal %s %%\tmake %s: %d s\t%s\n' \
        "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$commit" "$cpus" "$cpu_model" "$hogs" \
        "$load_before" "$load_after" "$stolen" "$target" $((t1 - t0)) "$verdict" | tee -a "$record"
    n=$((n + 1))
done
echo "test-busy: $((runs - failed)) of $runs runs of make $target passed beside $hogs CPU-bound processes"
[ "$failed" = 0 ]
