#!/bin/sh
# The "How to read the instruments" table in README.md: cserve with the
# default app and handoff under wrk -t1 -c64; the stats window opens after
# 2 s of warm-up and is reported (SIGUSR1) while wrk is still running.
set -eu
cd "$(dirname "$0")/.."
./cserve --handoff=ring --bind 127.0.0.1:8000 --stats --stats-window 2 2>/tmp/cserve-readme.err &
pid=$!
sleep 0.5
wrk -t1 -c64 -d9s http://127.0.0.1:8000/ > /tmp/cserve-readme-wrk.txt &
wrk=$!
sleep 8
kill -USR1 $pid
wait $wrk
kill -INT $pid
wait $pid
grep Requests/sec /tmp/cserve-readme-wrk.txt
# the SIGUSR1 table (the first one), not the one printed at exit
awk '/^cserve stats/{n++} n==1' /tmp/cserve-readme.err | grep -v 'info:'
