"""--blocking-threads auto against the real binary, driven so that what the
sizing rule decides is certain: requests that wait on a file gate with the
GIL released (they use no CPU and never wake), more of them than threads,
grow the pool step by step up to its bound and never past it; requests that
hold the GIL keep it at one; idle, it retires back to one; each change is
logged with the figures behind it and published (/stats.json, the --stats
table); a request pipelined behind one that ran on a thread since retired
still runs, and one connection's requests never run at once on two threads;
a reload's new worker starts again at one thread; a stopping worker still
grows for the requests it took before the stop; the watchdog watches a
thread started later; the option's forms and the ones refused. How fast the
pool grows under a live load, and what it then serves, is a benchmark's:
tests/perf/test_perf_auto.py. The rule itself: tests/unit/test_sizing_rule.c."""
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request

import pytest

from conftest import BIN, ROOT, free_port
from gate import Gate, marks
from httpclient import Reader, stats_json as stats
from loadgen import wait_until
from test_metrics import Load

APP = "auto_apps:application"
GIL_OFF = "GIL disabled" in subprocess.run([BIN, "--version"], capture_output=True, text=True).stdout
# Without a GIL the pool grows only while the machine has idle cores
# (core/services/sizing_rule.c), which a test on a shared machine does not
# control: there the growth is the rule's unit test's and the benchmark's.
NEEDS_GIL = pytest.mark.skipif(GIL_OFF, reason="a free-threaded build grows only while cores are idle, which "
                                               "the test does not control (tests/unit/test_sizing_rule.c, "
                                               "tests/perf/test_perf_auto.py cover it)")
HANG_S = 30  # a deadline that only detects a hang: a step takes a window (1 s), a retirement 5 s idle


def auto_server(server_factory, *extra, bound="auto"):
    mport = free_port()
    srv = server_factory("--blocking-threads", bound, "--metrics-bind", f"127.0.0.1:{mport}", *extra, app=APP)

    def published():
        try:
            return pool(mport)
        except OSError:
            return None
    assert wait_until(published, HANG_S), "the worker never published its figures"
    return srv, mport


def pool(mport):
    """The worker's published blocking_threads (None before it publishes)."""
    w = stats(mport)["workers"]
    return w[0]["blocking_threads"] if w else None


def wait_pool(mport, check, what, timeout=HANG_S):
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        b = pool(mport)
        if not seen or seen[-1] != b["active"]:
            seen.append(b["active"])
        if check(b):
            return b
        assert time.monotonic() < deadline, f"{what}: never within {timeout} s; active seen: {seen}"
        time.sleep(0.1)


def send(port, target):
    """A new connection with one request sent on it."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(f"GET {target} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    return s


def statuses(conns):
    """Each connection's response status, and the connections closed."""
    out = []
    for s in conns:
        out.append(Reader(s).read_response().status)
        s.close()
    return out


def grown_to_two(server_factory, tmp_path, *extra):
    """An auto:2 server grown to two threads: two requests wait on gates,
    the first on thread 0, the second in the loop (nothing is queued behind
    a request that runs long: core/conn/dispatch.c), so every window says
    threads-short until the pool has two. The second then runs on thread 1
    and is let through. Thread 0 stays busy until the test opens the gate.
    Returns the server, its metrics port, the gate and the gated
    connection (in a list)."""
    srv, mport = auto_server(server_factory, *extra, bound="auto:2")
    gate, second = Gate(tmp_path / "grow-gate"), Gate(tmp_path / "grow-second")
    held = [send(srv.port, f"/?gate={gate.path}")]
    try:
        other = send(srv.port, f"/?gate={second.path}")
        wait_pool(mport, lambda b: b["active"] == 2, "grows to two while two requests wait on thread 0")
    finally:
        second.open()
    assert statuses([other]) == [200]
    return srv, mport, gate, held


def changes(log):
    return re.findall(r"info: (blocking threads \d+ -> \d+ \(auto.*)", log)


RETIRED = (r"blocking threads \d+ -> \d+ \(auto\): pool threads? \d+( to \d+)? "
           r"took no request for 5 s; parked, kept for reuse")


@NEEDS_GIL
def test_grows_to_its_bound_while_requests_wait_and_retires_when_idle(server_factory, tmp_path):
    """auto:4. Requests wait on a gate with the GIL released, two per thread
    taking requests (each new thread gets its two: the chooser gives a
    request to the least loaded): requests keep waiting for threads off the
    CPU, so the pool steps from 1 to 2 and on to 4, each step logged as a
    burst or as threads-short with its figures, and no further once at its
    bound, however long requests wait.
    With the gate open and the requests done it retires back to one."""
    srv, mport = auto_server(server_factory, "--log-level", "debug", bound="auto:4")
    b = pool(mport)
    assert b == {**b, "auto": True, "active": 1, "started": 1, "max": 4, "changes": 0}, b
    gate = Gate(tmp_path / "gate")
    conns = []
    try:
        deadline = time.monotonic() + HANG_S
        while True:
            b = pool(mport)
            while len(conns) < 2 * b["active"]:
                conns.append(send(srv.port, f"/?gate={gate.path}"))
            if b["active"] == 4:
                break
            assert time.monotonic() < deadline, f"never grew to 4: {b}\n{srv.log_text()[-3000:]}"
            time.sleep(0.1)
        # A whole window at the bound with requests waiting: the rule would
        # grow, the bound stops it.
        at_bound = re.compile(r"blocking threads auto: 4 taking requests: threads-short")
        assert wait_until(lambda: at_bound.search(srv.log_text()), HANG_S), srv.log_text()[-3000:]
        b = pool(mport)
        assert b["active"] == 4 and b["started"] == 4 and b["max"] == 4, b
    finally:
        gate.open()
    assert statuses(conns) == [200] * len(conns)
    b = wait_pool(mport, lambda b: b["active"] == 1, "retires when idle")
    log = srv.log_text()
    steps = changes(log)
    assert b["started"] == 4 and b["changes"] == len(steps), (b, steps)
    grows = [s for s in steps if "(auto, at most" in s]
    sizes = [tuple(int(n) for n in re.match(r"blocking threads (\d+) -> (\d+)", s).groups()) for s in grows]
    assert sizes[0] == (1, 2) and sizes[-1][1] == 4, steps
    assert all(a[1] == b[0] and b[0] < b[1] for a, b in zip(sizes, sizes[1:])), steps
    for s in grows:
        # A burst's (the requests waited on every look, the threads off the
        # CPU), or a window's, with the verdict's figures.
        assert BURST.fullmatch(s) or (": threads-short, " in s and "requests waiting on average" in s and re.search(
            r"over \d+\.\d s: .*a request waiting for a busy pool \d+% of the time", s)), s
    for s in steps:
        assert s in grows or re.fullmatch(RETIRED, s), s
    last = steps[-1]
    assert re.fullmatch(r"blocking threads \d+ -> 1 \(auto\): pool threads? 1( to \d+)? took no request for "
                        r"5 s; parked, kept for reuse", last), last
    assert b["last_change"] == last


BURST = re.compile(r"blocking threads (\d+) -> (\d+) \(auto, at most \d+\): a burst: \d+ requests waited for busy "
                   r"threads for \d+ ms, loop \d+% of a core, pool \d+% and \d+% waiting for a CPU")


def thread_state(pid, tid):
    """A thread's scheduler state from /proc ('R', 'S', 'T', ...)."""
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def all_stopped(pid):
    """Every thread of pid in the stopped state: a SIGSTOP has taken effect
    (a thread stops only once it next runs)."""
    return all(thread_state(pid, tid) == "T" for tid in os.listdir(f"/proc/{pid}/task"))


def gated_burst_of_eight(srv, mport, tmp_path, what):
    """Eight gated requests at a pool of one thread, arranged so that what
    the burst's span measures is certain, however busy the machine:
    - the first is on thread 0 and asleep on the gate (in flock: no CPU, no
      wake-up) before the others come, so that its start-up is not in the
      span: on a busy machine that start-up alone reads as a thread on the
      CPU, or waiting for one, for a tenth of a span;
    - the other seven come at once: the worker is stopped (SIGSTOP, every
      thread of it seen stopped) while they are sent, so its loop reads all
      seven in one pass, and the span judges seven waiting, not the few
      sent before the test, or the loop, lost its CPU.
    (Stopping wakes thread 0 to restart its flock: a span it waited for a
    CPU in does not grow, and the next, 20 ms later, does.)
    The pool, at one thread, gets its eight in one burst step: the first
    change logged."""
    gate, mark = Gate(tmp_path / "gate"), tmp_path / "mark"
    request = f"GET /?gate={gate.path} HTTP/1.1\r\nHost: t\r\n\r\n".encode()
    conns = [send(srv.port, f"/?mark={mark}&gate={gate.path}")]
    try:
        worker = stats(mport)["workers"][0]
        pid = worker["pid"]
        tid = next(t["tid"] for t in worker["threads"] if t["name"] == "cserve-pool-0")
        assert wait_until(lambda: marks(mark), HANG_S), "the first request never reached the app"
        assert wait_until(lambda: thread_state(pid, tid) == "S", HANG_S), "thread 0 never slept on the gate"
        conns += [socket.create_connection(("127.0.0.1", srv.port), timeout=60) for _ in range(7)]
        assert wait_until(lambda: stats(mport)["workers"][0]["connections_open"] == 8, HANG_S), \
            "the worker never took the seven connections"
        os.kill(pid, signal.SIGSTOP)
        try:
            assert wait_until(lambda: all_stopped(pid), HANG_S), "the worker never stopped"
            for s in conns[1:]:
                s.sendall(request)
        finally:
            os.kill(pid, signal.SIGCONT)
        wait_pool(mport, lambda b: b["active"] == 8, what)
    finally:
        gate.open()
    assert statuses(conns) == [200] * 8
    grows = [s for s in changes(srv.log_text()) if "(auto, at most" in s]
    assert grows and BURST.match(grows[0]) and BURST.match(grows[0]).groups() == ("1", "8"), grows


@NEEDS_GIL
def test_a_burst_gets_its_threads_at_once(server_factory, tmp_path):
    """Seven requests that wait on a gate with the GIL released arrive at
    once at an auto:8 pool whose one thread waits on the gate for an eighth:
    they wait behind it, on a thread off the CPU, so the pool grows in one
    step to the eight they need, a burst's within its 10 ms span, not the
    window's a second later."""
    srv, mport = auto_server(server_factory, bound="auto:8")
    gated_burst_of_eight(srv, mport, tmp_path, "a burst of eight gets eight threads")


@NEEDS_GIL
def test_a_burst_after_a_cpu_bound_one_still_grows_at_once(server_factory, tmp_path):
    """Three requests that hold the GIL (50 ms of CPU each) wait behind one
    another: the burst's span finds the thread on the CPU (or, on a busy
    machine, waiting for one) and does not grow, and holds the bursts back
    (both logged at debug). Once that window has closed, eight gated
    requests still get their eight threads in one burst step (seven
    arriving at once, as in the test above): the hold ends with its window."""
    srv, mport = auto_server(server_factory, "--log-level", "debug", bound="auto:8")
    spin = [socket.create_connection(("127.0.0.1", srv.port), timeout=60) for _ in range(3)]
    for s in spin:
        s.sendall(b"GET /?spin=0.05 HTTP/1.1\r\nHost: t\r\n\r\n")
    assert statuses(spin) == [200] * 3
    assert pool(mport)["active"] == 1, pool(mport)
    held = re.compile(r"blocking threads auto: 1 taking requests, \d+ waited for them .*: not a burst's "
                      r"\((until the window closes|again in \d+ ms)\)\n(.*\n)*.*blocking threads auto: 1 taking requests: ")
    assert wait_until(lambda: held.search(srv.log_text()), HANG_S), srv.log_text()[-3000:]
    gated_burst_of_eight(srv, mport, tmp_path, "the gated burst gets eight threads")


@pytest.mark.skipif(GIL_OFF, reason="a free-threaded build with the GIL off: a CPU-bound app rightly grows "
                                     "while cores are idle (tests/unit/test_sizing_rule.c covers that rule)")
def test_stays_at_one_when_requests_hold_the_gil(server_factory):
    """Requests that hold the GIL for 5 ms of CPU each, on 16 connections:
    requests wait, but the pool's thread is always running or waiting for a
    CPU, never off it waiting: not threads-short, whatever the machine does.
    Over four windows closed under the load (the server logs each at debug)
    the pool stays at one thread and logs no change."""
    srv, mport = auto_server(server_factory, "--log-level", "debug")
    window = re.compile(r"blocking threads auto: \d+ taking requests: ([\w-]+)")
    load = Load(srv.port, "/?spin=0.005", conns=16)
    try:
        assert wait_until(lambda: load.done > 0, HANG_S), "no response under the load"
        first = len(window.findall(srv.log_text()))
        assert wait_until(lambda: len(window.findall(srv.log_text())) >= first + 4, HANG_S), srv.log_text()[-2000:]
    finally:
        load.stop()
    regimes = window.findall(srv.log_text())[first:]
    assert pool(mport)["changes"] == 0 and not changes(srv.log_text()), (regimes, srv.log_text()[-2000:])
    assert pool(mport)["active"] == 1


@NEEDS_GIL
def test_pipelined_behind_a_retired_thread_still_runs(server_factory, tmp_path):
    """A connection's first request, on pool thread 1, answers with a 16 MiB
    file the client does not read; 31 requests pipelined behind it run on
    thread 1 at once, and 8 more wait in the connection's buffer for room.
    Thread 1, idle, is retired. Once the client reads, the waiting requests
    go to the app behind the ones done on thread 1: to a thread that takes
    requests, not to the retired one, and every response comes."""
    srv, mport, gate, held = grown_to_two(server_factory, tmp_path)
    # Thread 0 is busy with the gated requests: the connection's go to thread 1.
    mark = tmp_path / "first"
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    c.settimeout(30)
    c.connect(("127.0.0.1", srv.port))
    big, n = 16 << 20, 40
    c.sendall(b"GET /?file=%d&mark=%s HTTP/1.1\r\nHost: t\r\n\r\n" % (big, str(mark).encode()) +
              b"".join(b"GET /?n=%d HTTP/1.1\r\nHost: t\r\n\r\n" % i for i in range(1, n)))
    assert wait_until(lambda: marks(mark), HANG_S), "the first request never reached the app"
    gate.open()
    assert statuses(held) == [200]
    wait_pool(mport, lambda b: b["active"] == 1, "retires thread 1")
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    reader = Reader(c)
    r = reader.read_response()
    assert r.status == 200 and len(r.body) == big
    for i in range(1, n):
        r = reader.read_response()
        assert r.status == 200 and r.body == b"ok\n", (i, r)
    c.close()


@NEEDS_GIL
def test_a_pipeline_stays_on_one_thread_when_its_old_one_is_started_again(server_factory, tmp_path):
    """A connection's first 33 requests ran on pool thread 1 and answered
    with files the client reads slowly; thread 1, idle, is retired. As the
    client reads, the requests behind them go to thread 0, the first of them
    held on a gate; requests on other connections, waiting, start thread 1
    again and keep it busy. The connection's requests still running on
    thread 0, the next ones go there too, behind them, though thread 1 is
    less loaded: the app sees each start after the one before it ended,
    never two of one connection's requests at once."""
    srv, mport, gate, held = grown_to_two(server_factory, tmp_path)
    mark = tmp_path / "first"
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: a small window
    c.settimeout(60)
    c.connect(("127.0.0.1", srv.port))
    # Larger than the socket buffers hold (4 MiB sent, 1 MiB received at
    # most here): no response ends before the client reads it.
    first, big, files, logged = 16 << 20, 8 << 20, 33, range(33, 43)
    gate33, mark33, others = Gate(tmp_path / "gate33"), tmp_path / "mark33", Gate(tmp_path / "others")
    try:
        c.sendall(b"GET /?file=%d&mark=%s HTTP/1.1\r\nHost: t\r\n\r\n" % (first, str(mark).encode()) +
                  b"".join(b"GET /?file=%d HTTP/1.1\r\nHost: t\r\n\r\n" % big for _ in range(1, files)) +
                  b"".join(b"GET /?log=%d%s HTTP/1.1\r\nHost: t\r\n\r\n" %
                           (k, b"&mark=%s&gate=%s" % (str(mark33).encode(), gate33.path.encode()) if k == 33 else b"")
                           for k in logged))
        assert wait_until(lambda: marks(mark), HANG_S), "the first request never reached the app"
        gate.open()
        assert statuses(held) == [200]
        wait_pool(mport, lambda b: b["active"] == 1, "retires thread 1")
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        reader = Reader(c)
        r = reader.read_response()  # its end tops the pipeline up: request 33 goes to thread 0, on the gate
        assert r.status == 200 and len(r.body) == first
        assert wait_until(lambda: marks(mark33), HANG_S), "request 33 never reached the app"
        # Two requests wait behind 33 on thread 0: the pool grows to two;
        # two more then go to thread 1 and keep it busy.
        waiting = [send(srv.port, f"/?gate={others.path}") for _ in range(2)]
        wait_pool(mport, lambda b: b["active"] == 2, "starts thread 1 again")
        waiting += [send(srv.port, f"/?gate={others.path}") for _ in range(2)]
        for i in range(1, files):  # room in the pipeline: requests 34 to 42 go behind 33
            r = reader.read_response()
            assert r.status == 200 and len(r.body) == big, i
        gate33.open()
        others.open()  # two of them are on thread 0, behind 33 and before 34
        for k in logged:
            r = reader.read_response()
            assert r.status == 200 and r.body == b"ok\n", (k, r)
    finally:
        gate33.open()
        others.open()
    assert statuses(waiting) == [200] * 4
    c.close()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"GET /?order HTTP/1.1\r\nHost: t\r\n\r\n")
        seen = Reader(s).read_response().body.decode().splitlines()
    assert seen == [f"{e} {k}" for k in logged for e in ("start", "end")], seen


@NEEDS_GIL
def test_at_its_most_the_advice_names_auto_max(server_factory, tmp_path):
    """auto:2 at its most, requests waiting on both threads (off the CPU,
    on a gate): the verdict is threads-short, and its advice, in the log
    once and in /stats.json, is to raise auto's MAX, naming the form, not
    to add --blocking-threads."""
    srv, mport, gate, held = grown_to_two(server_factory, tmp_path)
    try:
        held += [send(srv.port, f"/?gate={gate.path}") for _ in range(2)]  # one to thread 1, one waits in the loop
        said = "warning: blocking threads auto: raise auto's MAX: --blocking-threads auto:4 (it is at its most, 2,"
        assert wait_until(lambda: said in srv.log_text(), HANG_S), srv.log_text()[-3000:]

        def advice():
            v = stats(mport).get("verdict", {})
            return v.get("regime") == "threads-short" and v["advice"]
        assert wait_until(advice, HANG_S), stats(mport).get("verdict")
        assert advice().startswith("raise auto's MAX: --blocking-threads auto:4 "), advice()
    finally:
        gate.open()
    assert statuses(held) == [200] * 3
    assert srv.log_text().count("raise auto's MAX") == 1, srv.log_text()[-3000:]


STARTS_WITH = r"\[cserve (\d+)\] info: blocking threads auto: starting with (\d+), the size the worker it " \
              r"replaces had learned"


def busy_at_two(srv, mport, gate):
    """An auto:2 worker at two threads, each with a gated request (so
    neither is retired): two wait on thread 0 until it grows, the third goes
    to thread 1. Returns the connections."""
    conns = [send(srv.port, f"/?gate={gate.path}") for _ in range(2)]
    wait_pool(mport, lambda b: b["active"] == 2, "grows to two")
    conns.append(send(srv.port, f"/?gate={gate.path}"))  # to thread 1, the least loaded
    return conns


@NEEDS_GIL
def test_a_reload_starts_with_the_learned_size(server_factory, tmp_path):
    """SIGHUP while an auto:2 pool has grown to two (gated requests on both
    threads): the new worker starts with the two the old one had learned,
    not one (it says so, and publishes two before any request of its own);
    the old one drains once the gate opens and exits with every thread it
    started."""
    srv, mport = auto_server(server_factory, "--graceful-timeout", "60", bound="auto:2")
    gate = Gate(tmp_path / "gate")
    conns = []
    try:
        conns += busy_at_two(srv, mport, gate)
        old = stats(mport)["workers"][0]["pid"]
        srv.proc.send_signal(signal.SIGHUP)
        assert wait_until(lambda: stats(mport)["workers"][0]["pid"] != old, HANG_S), "no new worker"
        w = stats(mport)["workers"][0]
        assert w["blocking_threads"]["active"] == 2 and w["blocking_threads"]["started"] == 2, w
    finally:
        gate.open()
    assert statuses(conns) == [200] * 3
    assert (str(w["pid"]), "2") in re.findall(STARTS_WITH, srv.log_text()), srv.log_text()[-3000:]
    # The old worker drained and joined every thread it had started.
    assert wait_until(lambda: f"[cserve {old}] info: stopped" in srv.log_text(), HANG_S), srv.log_text()[-3000:]


@NEEDS_GIL
def test_a_recycled_worker_starts_with_the_learned_size(server_factory, tmp_path):
    """--max-requests: the worker that replaces one recycled at an auto:2
    pool of two starts with two (one worker alone: it starts its successor
    itself, and hands the size over in the successor's environment)."""
    srv, mport = auto_server(server_factory, "--max-requests", "4", "--max-requests-jitter", "0",
                             bound="auto:2")
    gate = Gate(tmp_path / "gate")
    try:
        conns = busy_at_two(srv, mport, gate)
        conns.append(send(srv.port, "/"))  # the fourth: once the four are served, it is recycled
        old = stats(mport)["workers"][0]["pid"]
    finally:
        gate.open()
    assert statuses(conns) == [200] * 4
    assert wait_until(lambda: re.findall(STARTS_WITH, srv.log_text()), HANG_S), srv.log_text()[-3000:]
    [(pid, n)] = re.findall(STARTS_WITH, srv.log_text())
    assert n == "2" and pid != str(old), srv.log_text()[-3000:]


@NEEDS_GIL
def test_a_supervisor_hands_each_slot_its_learned_size(server_factory, tmp_path):
    """--workers 2: each worker tells the supervisor the size it learned;
    SIGHUP's new worker for each slot starts with it. Gated requests grow
    every worker to two (another round then keeps both threads busy);
    after the reload each new worker says it starts with two."""
    srv, mport = auto_server(server_factory, "--workers", "2", "--graceful-timeout", "60", bound="auto:2")
    gate = Gate(tmp_path / "gate")
    conns = []

    def sizes():
        return [w["blocking_threads"]["active"] for w in stats(mport)["workers"]]
    try:
        deadline = time.monotonic() + HANG_S
        while sizes() != [2, 2]:  # the kernel spreads connections between the workers: send until both grew
            assert time.monotonic() < deadline, sizes()
            conns += [send(srv.port, f"/?gate={gate.path}") for _ in range(4)]
            time.sleep(0.2)
        conns += [send(srv.port, f"/?gate={gate.path}") for _ in range(8)]  # thread 1 of each, in all likelihood
        olds = {w["pid"] for w in stats(mport)["workers"]}
        srv.proc.send_signal(signal.SIGHUP)
        assert wait_until(lambda: not olds & {w["pid"] for w in stats(mport)["workers"]}, HANG_S), "no new workers"
        news = {str(w["pid"]) for w in stats(mport)["workers"]}
    finally:
        gate.open()
    assert statuses(conns) == [200] * len(conns)
    started = dict(re.findall(STARTS_WITH, srv.log_text()))
    assert {p: started.get(p) for p in news} == {p: "2" for p in news}, srv.log_text()[-3000:]


@NEEDS_GIL
def test_grows_while_it_stops_for_the_requests_it_took(server_factory, tmp_path):
    """auto:4 with two requests queued per thread (--queue-size 2): eight
    requests wait on a gate, two on thread 0 and six parked in the loop for
    room, when SIGTERM comes. The stop takes no new request, but the pool
    still grows for the ones it took: 1 -> 2 -> 4, each new thread starts
    two of the parked ones, and every request is answered (with
    "Connection: close") within the graceful timeout, none cut off at it."""
    srv, mport = auto_server(server_factory, "--queue-size", "2", "--graceful-timeout", "60", bound="auto:4")
    gate, mark = Gate(tmp_path / "gate"), tmp_path / "mark"
    conns = []
    try:
        conns = [send(srv.port, f"/?gate={gate.path}&mark={mark}") for _ in range(8)]
        assert wait_until(lambda: marks(mark) >= 1, HANG_S), "the first request never reached the app"
        srv.proc.send_signal(signal.SIGTERM)
        assert wait_until(lambda: "stopping:" in srv.log_text(), HANG_S), srv.log_text()[-3000:]
        # One request running on each of four threads: the pool grew after the stop.
        assert wait_until(lambda: marks(mark) == 4, HANG_S), \
            f"{marks(mark)} requests in the app, not 4:\n{srv.log_text()[-3000:]}"
    finally:
        gate.open()
    for s in conns:
        r = Reader(s).read_response()
        assert r.status == 200 and r.header("connection", "").lower() == "close", r
        s.close()
    assert srv.proc.wait(timeout=HANG_S) == 0, srv.log_text()[-3000:]
    assert "graceful timeout" not in srv.log_text()


@NEEDS_GIL
def test_app_timeout_watches_a_thread_started_later(server_factory, tmp_path):
    """--app-timeout with auto: a request stuck on pool thread 1, started
    when the pool grew, is reported by the watchdog (that thread named) and
    answered 503, as on a thread the worker started with.

    Every request but the stuck one leaves the app long before the timeout:
    the growth's gated requests go as soon as the pool has two threads, and
    the request that keeps thread 0 busy (ties go to thread 0) goes as soon
    as the stuck one has started on thread 1. The timeout is well above the
    time those steps take, so thread 1 is the only one it can find."""
    srv, mport, gate, held = grown_to_two(server_factory, tmp_path, "--app-timeout", "4",
                                          "--graceful-timeout", "2")
    gate.open()
    assert statuses(held) == [200]
    busy_gate = Gate(tmp_path / "busy-gate")
    busy_mark, stuck_mark = tmp_path / "busy.mark", tmp_path / "stuck.mark"
    busy = send(srv.port, f"/?mark={busy_mark}&gate={busy_gate.path}")
    try:
        assert wait_until(lambda: marks(busy_mark) == 1, HANG_S), srv.log_text()[-3000:]
        stuck = send(srv.port, f"/?mark={stuck_mark}&sleep=60")
        assert wait_until(lambda: marks(stuck_mark) == 1, HANG_S), srv.log_text()[-3000:]
    finally:
        busy_gate.open()
    assert statuses([busy]) == [200]
    r = Reader(stuck).read_response()
    stuck.close()
    assert r.status == 503, r
    log = srv.log_text()
    assert "app watchdog: pool thread 1 has been in the app" in log, log[-3000:]
    assert "app watchdog: pool thread 0" not in log, log[-3000:]


def test_stats_show_auto(server_factory, tmp_path):
    """The --stats table's head and --stats-json say auto, the threads taking
    requests, started, and the most."""
    out = tmp_path / "stats.json"
    srv = server_factory("--blocking-threads", "auto:6", "--stats", "--stats-json", str(out), app=APP)
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/", timeout=5) as r:
        assert r.read() == b"ok\n"
    srv.stop()
    assert "blocking threads auto: 1 taking requests, 1 started, at most 6" in srv.log_text()
    w = json.loads(out.read_text())["workers"][0]
    assert w["blocking_threads"] == {"auto": True, "active": 1, "started": 1, "max": 6}
    assert [t["role"] for t in w["threads"]] == ["loop", "pool"]


@pytest.mark.parametrize("value,line", [("auto", "auto:64"), ("auto:8", "auto:8"), ("auto:1", "auto:1"),
                                        ("3", "3")])
def test_check_config_shows_the_form(value, line):
    """--check-config (and the variable) print the form given: auto, its
    bound, or a fixed count, and where it came from."""
    for how in ("option", "env"):
        env = dict(os.environ)
        args = [BIN, "--check-config", "--chdir", str(ROOT / "tests/integration/apps"), APP]
        if how == "option":
            args[1:1] = ["--blocking-threads", value]
        else:
            env["CSERVE_BLOCKING_THREADS"] = value
        p = subprocess.run(args, capture_output=True, text=True, timeout=30, env=env)
        assert p.returncode == 0, p.stderr
        source = "command line" if how == "option" else "environment: CSERVE_BLOCKING_THREADS"
        assert f"blocking-threads: {line} ({source})\n" in p.stdout, p.stdout


def test_help_states_the_default_bound_and_its_cost():
    """--help says auto's default MAX (64: an app waiting on I/O at 64
    requests in flight) and what one thread costs."""
    out = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=30).stdout
    text = " ".join(out.split())
    assert "up to MAX (default 64, at most 256); a thread costs its stack (RLIMIT_STACK, 8 MiB reserved, " \
           "~100 KiB used)" in text, out


@pytest.mark.parametrize("value", ["auto:0", "auto:", "auto:x", "autox", "auto:257", "auto:-1", "Auto"])
def test_bad_forms_are_refused(value):
    """A bound out of range or a form that is neither N nor auto[:MAX]: one
    line, exit status 2, before anything listens."""
    p = subprocess.run([BIN, "--blocking-threads", value, "--check-config"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 2 and "--blocking-threads" in p.stderr and p.stderr.count("\n") == 1, p.stderr
