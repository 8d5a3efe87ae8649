"""The loop's hold (handoffs/README.md, "Holding"), in the server: while every
pool thread has work queued the loop sleeps deaf to its sockets and takes
what came meanwhile in one pass. Checked here by what the code decides,
whatever the scheduler does: the ceiling the server hands the ring (2 ms by
default, none with --loop-hold 0), no hold at all with --loop-hold 0, every
connection answered and every streamed part delivered under the longest
hold. The loop's timer slack, which makes its short sleeps precise, is its
own: the app's threads keep the kernel's default. The rule itself, on
fixed paces, queues and clock, is handoffs/tests/batch_test.c (part 8);
what holding buys and must not cost on the live scheduler (waits per
request, how soon another connection is read, an app that waits not held)
is tests/perf/test_perf_hold.py, in make perf-check."""
import os
import re
import subprocess
import threading

from conftest import BIN, ROOT
from pipelined import pipelined, thread_stats
from httpclient import Reader

APP = "hold_apps:application"


def check_config(srv_args):
    out = subprocess.run([BIN, "--check-config", *srv_args], cwd=str(ROOT), capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout + out.stderr


def test_the_hold_is_on_by_default_at_its_ceiling_and_off_at_0():
    """What the server hands the ring: the hold's ceiling, 2 ms by
    default, and never with --loop-hold 0 (what the ring does with it, on
    fixed paces and queues: batch_test part 8)."""
    assert re.search(r"^loop-hold: 2000 us \(default\)$", check_config([]), re.M)
    assert re.search(r"^loop-hold: 0 us \(never\) \(command line\)$", check_config(["--loop-hold", "0"]), re.M)
    assert re.search(r"^loop-hold: 500 us \(command line\)$", check_config(["--loop-hold", "500"]), re.M)


def test_loop_hold_0_never_holds(server_factory, tmp_path):
    """--loop-hold 0: 12 batches of 32 pipelined requests of 300 us on the
    one pool thread (the queue a default server holds on: make perf-check)
    and not one hold, whatever the scheduler does."""
    path = tmp_path / "hold-0.json"
    srv = server_factory("--stats-json", str(path), "--loop-hold", "0", app=APP)
    pipelined(srv, 12, 32, "/work?us=300")
    assert thread_stats(srv, path)["loop"]["counters"]["handoff"]["loop_holds"] == 0


def test_a_held_server_answers_every_connection(server_factory, tmp_path):
    """16 connections each pipeline 32 requests of 500 us to the one pool
    thread, with the longest hold (--loop-hold 20000), while malformed
    requests come on other connections: each gets its 400, every
    pipelined request its response, in order (how soon: make
    perf-check)."""
    srv = server_factory("--loop-hold", "20000", app=APP)
    one = b"GET /work?us=500 HTTP/1.1\r\nHost: x\r\n\r\n"
    conns = [srv.connect(timeout=60) for _ in range(16)]
    for s in conns:
        s.sendall(one * 32)
    for _ in range(3):
        with srv.connect(timeout=60) as bad:
            bad.sendall(b"NOT A REQUEST\r\n\r\n")
            assert Reader(bad).read_response().status == 400
    for s in conns:
        rd = Reader(s)
        for _ in range(32):
            assert rd.read_response().body == b"worked"
        s.close()


def test_streamed_responses_come_whole_under_the_longest_hold(server_factory):
    """8 connections each pipeline 8 streamed responses (8 parts each)
    under --loop-hold 20000: every part of every response arrives, in
    order (how long a part waits for the loop: make perf-check)."""
    srv = server_factory("--loop-hold", "20000", app=APP)
    one = b"GET /stream?parts=8&us=300 HTTP/1.1\r\nHost: x\r\n\r\n"
    conns = [srv.connect(timeout=60) for _ in range(8)]
    for s in conns:
        s.sendall(one * 8)
    for s in conns:
        rd = Reader(s)
        for _ in range(8):
            assert rd.read_response().body == b"streamed" * 8
        s.close()


def test_the_apps_threads_keep_the_kernels_timer_slack(server_factory):
    """The loop sets its own timer slack to 1 us (a hold or a doze of tens
    of microseconds would stretch by the default 50 us); the pool threads,
    which run the app's own sleeps, keep the slack a thread gets by
    default, as under any other server."""
    with open(f"/proc/{threading.get_native_id()}/timerslack_ns") as f:
        default = int(f.read())
    srv = server_factory("--blocking-threads", "2", app=APP)
    with srv.connect() as s:
        s.sendall(b"GET /slack HTTP/1.1\r\nHost: x\r\n\r\n")
        app_slack = int(Reader(s).read_response().body)
    pid = srv.proc.pid
    loop = [t for t in os.listdir(f"/proc/{pid}/task")
            if open(f"/proc/{pid}/task/{t}/comm").read().strip() == "cserve-loop"]
    (loop_slack,) = {int(open(f"/proc/{t}/timerslack_ns").read()) for t in loop}
    print(f"\n  timer slack: loop {loop_slack} ns, the app's thread {app_slack} ns, a default thread {default} ns")
    assert loop_slack == 1000
    assert app_slack == default != 1000
