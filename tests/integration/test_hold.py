"""The loop's hold (handoffs/README.md, "Holding"), in the server: while every
pool thread has work queued the loop sleeps deaf to its sockets and takes
what came meanwhile in one pass. Checked by its effect (the loop's waits per
request, with and without --loop-hold 0) and by what it must not cost:
another connection is read within the hold's ceiling, not when the queue is
done; an app that waits on I/O is not held, and keeps every one of its
threads in the app at once. A pool that streams its responses is not held
either. The loop's timer slack, which makes its short sleeps precise, is its
own: the app's threads keep the kernel's default."""
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time

import pytest

from httpclient import Reader

APP = "hold_apps:application"
WRK = shutil.which("wrk")


def stats(srv, path):
    assert srv.stop() == 0
    with open(path) as f:
        (w,) = json.load(f)["workers"]
    return {t["role"]: t for t in w["threads"]}


def pipelined(srv, batches, depth, path):
    """batches times: depth requests in one write on one connection, then
    all their responses, each checked."""
    one = f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    with srv.connect() as s:
        rd = Reader(s)
        for _ in range(batches):
            s.sendall(one * depth)
            for _ in range(depth):
                r = rd.read_response()
                assert r.status == 200 and r.body == b"worked"


def test_the_loop_holds_while_the_pool_has_work_queued(server_factory, tmp_path):
    """32 requests of 300 us each queued on the one pool thread: the loop
    holds (loop_holds) and waits well under once per request; with
    --loop-hold 0 it never holds and waits several times as often (it dozes
    on a timer that a quarter of each job ends, or is woken)."""
    batches, depth = 12, 32
    n = batches * depth
    got = {}
    for hold in (None, "0"):
        path = tmp_path / f"hold-{hold}.json"
        srv = server_factory("--stats-json", str(path), *(["--loop-hold", hold] if hold else []), app=APP)
        pipelined(srv, batches, depth, "/work?us=300")
        st = stats(srv, path)["loop"]
        got[hold] = (st["counters"]["handoff"]["loop_holds"], st["counters"]["epoll_waits"] / n)
    print(f"\n  over {n} requests (holds, the loop's waits per request): default {got[None]}, "
          f"--loop-hold 0 {got['0']}")
    assert got[None][0] > 0 and got["0"][0] == 0
    assert got[None][1] < 0.5
    assert got["0"][1] >= 2 * got[None][1]


def test_a_hold_does_not_keep_another_connection_waiting(server_factory, tmp_path):
    """16 connections each pipeline 32 requests of 500 us to the one pool
    thread: a quarter of a second of work queued. Meanwhile a malformed
    request on another connection gets the loop's 400 within tens of
    milliseconds, as the hold's ceiling (2 ms) allows, not once the queue
    is done; and the loop did hold."""
    path = tmp_path / "stats.json"
    srv = server_factory("--stats-json", str(path), app=APP)
    one = b"GET /work?us=500 HTTP/1.1\r\nHost: x\r\n\r\n"
    conns = [srv.connect(timeout=30) for _ in range(16)]
    t0 = time.monotonic()
    for s in conns:
        s.sendall(one * 32)
    waits = []
    time.sleep(0.02)  # the pool's pace is known after its first jobs
    for _ in range(3):
        with srv.connect() as bad:
            t = time.monotonic()
            bad.sendall(b"NOT A REQUEST\r\n\r\n")
            r = Reader(bad).read_response()
            waits.append(time.monotonic() - t)
            assert r.status == 400
        time.sleep(0.02)
    for s in conns:
        rd = Reader(s)
        for _ in range(32):
            assert rd.read_response().body == b"worked"
        s.close()
    queue_s = time.monotonic() - t0
    holds = stats(srv, path)["loop"]["counters"]["handoff"]["loop_holds"]
    print(f"\n  the 400s took {[round(w * 1e3, 1) for w in waits]} ms; the queue {queue_s * 1e3:.0f} ms; "
          f"{holds} holds")
    assert holds > 0
    assert queue_s > 0.2
    assert max(waits) < 0.06, waits


def test_a_thread_waiting_for_the_loop_is_not_held(server_factory, tmp_path):
    """8 connections each pipeline 8 streamed responses to the one pool
    thread (8 parts, 300 us of Python before each): the work queued would
    allow the longest hold (--loop-hold 20000). But each part the thread
    yields is a message the loop must answer before the thread's next part
    can go (the response's two buffers), so the loop does not hold while
    its pool talks to it: a part keeps the thread waiting tens of
    microseconds on average, not a hold's milliseconds (with holds, each
    up to 20 ms, and with holds only while a message was unanswered, a
    part waited over a millisecond on average)."""
    path = tmp_path / "stats.json"
    srv = server_factory("--stats-json", str(path), "--loop-hold", "20000", app=APP)
    one = b"GET /stream?parts=8&us=300 HTTP/1.1\r\nHost: x\r\n\r\n"
    conns = [srv.connect(timeout=30) for _ in range(8)]
    for s in conns:
        s.sendall(one * 8)
    for s in conns:
        rd = Reader(s)
        for _ in range(8):
            assert rd.read_response().body == b"streamed" * 8
        s.close()
    with srv.connect() as s:
        s.sendall(b"GET /blocked HTTP/1.1\r\nHost: x\r\n\r\n")
        mean_us = int(Reader(s).read_response().body)
    holds = stats(srv, path)["loop"]["counters"]["handoff"]["loop_holds"]
    print(f"\n  a part waited {mean_us} us on average for the loop; {holds} holds")
    assert mean_us < 1000, mean_us


@pytest.mark.skipif(WRK is None, reason="wrk is not installed (scripts/setup.sh test installs it)")
def test_an_app_that_waits_is_not_held_and_keeps_all_its_threads_busy(server_factory, tmp_path):
    """16 pool threads, an app that waits 2 ms with the GIL released, 48
    connections of a closed-loop client (three requests a thread: every
    thread has work queued): the threads are on their CPU a small part of
    their pace, so the loop does not hold (holding would keep their next
    requests from them), and all 16 are in the app at once."""
    path = tmp_path / "wait.json"
    srv = server_factory("--stats-json", str(path), "--blocking-threads", "16", app=APP)
    out = subprocess.run([WRK, "-t1", "-c48", "-d2s", f"http://127.0.0.1:{srv.port}/wait?ms=2"],
                         capture_output=True, text=True, timeout=60).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    with srv.connect() as s:
        s.sendall(b"GET /most HTTP/1.1\r\nHost: x\r\n\r\n")
        most = int(Reader(s).read_response().body)
    loop = stats(srv, path)["loop"]["counters"]["handoff"]
    print(f"\n  requests/s {rate:.0f}, most in the app at once {most}, holds {loop['loop_holds']}, "
          f"dozes {loop['loop_dozes']}")
    assert most == 16
    assert loop["loop_holds"] == 0


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
