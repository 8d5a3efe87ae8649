"""The in-process instruments (--stats, --stats-json, --stats-window, SIGUSR1,
SIGUSR2), against the real binary: the JSON carries the promised fields, the
counts are exact, the handoff counters balance, and the outside view
(/proc per-thread CPU, experiments.lib.threadcpu) agrees with the inside one."""
import json
import os
import signal
import time

import pytest

from conftest import start_server
from loadgen import wait_until
from procfs import thread_names
from experiments.lib import threadcpu  # run from the checkout (python3 -m pytest): the harness's package

REQ = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n"
RESP_LEN = None  # learned from the first response


def send_n(srv, n, batch=50):
    """Send exactly n requests over one keep-alive connection (pipelined in
    batches), reading every response. Returns the bytes of one response."""
    global RESP_LEN
    s = srv.connect()
    try:
        s.sendall(REQ)
        one = b""
        while b"\r\n\r\n" not in one:
            one += s.recv(65536)
        head, _, body = one.partition(b"\r\n\r\n")
        cl = int([ln.split(b":")[1] for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")][0])
        while len(body) < cl:
            body += s.recv(65536)
        RESP_LEN = len(head) + 4 + cl
        left = n - 1
        while left:
            k = min(batch, left)
            s.sendall(REQ * k)
            # Date may change length? It does not (fixed-width IMF-fixdate), so k * RESP_LEN is exact.
            want, got = k * RESP_LEN, 0
            while got < want:
                d = s.recv(65536)
                assert d, "server closed mid-run"
                got += len(d)
            left -= k
    finally:
        s.close()


def wait_file(path, since_ns=0, timeout=30.0):
    """The report once it is rewritten (written beside and renamed over
    path, so it is whole when it is there)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.stat(path).st_mtime_ns > since_ns and os.path.getsize(path) > 0:
                with open(path) as f:
                    return json.load(f)
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"{path} not (re)written within {timeout}s")


def drained(srv, path, n):
    """SIGUSR1 until the report counts n requests at the loop and, if there is
    a pool, n done by its threads: the last completion is drained (a poll
    with a deadline that only detects a hang). Returns that report."""
    deadline = time.monotonic() + 30
    while True:
        m = os.stat(path).st_mtime_ns if os.path.exists(path) else 0
        srv.proc.send_signal(signal.SIGUSR1)
        st = wait_file(path, since_ns=m, timeout=30)
        roles = threads_by_role(st)
        pool = sum(t["requests"] for t in roles.get("pool", []))
        if roles["loop"][0]["requests"] == n and (not roles.get("pool") or pool == n):
            return st
        assert time.monotonic() < deadline, f"never drained to {n}: {roles}"
        time.sleep(0.05)


def threads_by_role(st):
    assert len(st["workers"]) == 1
    out = {}
    for th in st["workers"][0]["threads"]:
        out.setdefault(th["role"], []).append(th)
    return out


def run_and_stop(server_factory, tmp_path, n, *args, handoff="ring"):
    path = tmp_path / "stats.json"
    srv = server_factory("--stats-json", str(path), *args, handoff=handoff)
    send_n(srv, n)
    drained(srv, path, n)
    assert srv.stop() == 0
    with open(path) as f:
        return json.load(f), srv


# ----------------------------------------------------------------- schema

def test_json_fields(server_factory, tmp_path, handoff):
    st, srv = run_and_stop(server_factory, tmp_path, 2000, handoff=handoff)
    for k in ("version", "handoff", "inline", "app", "workers"):
        assert k in st, k
    assert st["handoff"] == handoff and st["inline"] is False
    w = st["workers"][0]
    assert w["worker"] == 0 and w["pid"] == srv.proc.pid and w["window_s"] > 0
    roles = threads_by_role(st)
    (loop,), (pool,) = roles["loop"], roles["pool"]
    assert loop["name"] == "cserve-loop" and pool["name"] == "cserve-pool-0"
    for th in (loop, pool):
        for k in ("name", "role", "tid", "cpu_s", "utilisation", "requests", "us_per_request", "counters"):
            assert k in th, (th["name"], k)
        assert 0 <= th["utilisation"] <= 1
        assert th["cpu_s"] >= 0 and th["us_per_request"] > 0
        assert abs(th["us_per_request"] - th["cpu_s"] / th["requests"] * 1e6) <= 0.01 * th["us_per_request"] + 0.01
    for k in ("passes", "epoll_waits", "events", "events_per_wait", "wait_s", "pass_s", "accepts",
              "reads", "read_eagain", "writes", "closes", "handoff"):
        assert k in loop["counters"], k
    for k in ("submitted", "full", "submit_syscalls", "wakes_sent", "drained", "drain_syscalls",
              "eagain", "sleep_syscalls", "loop_parks", "loop_dozes"):
        assert k in loop["counters"]["handoff"], k
    for k in ("app_calls", "gil_releases", "handoff"):
        assert k in pool["counters"], k
    for k in ("taken", "take_syscalls", "parks", "spins", "yields", "completed", "complete_syscalls", "loop_wakes"):
        assert k in pool["counters"]["handoff"], k


# ----------------------------------------------------------------- exact counts

def test_requests_exact(server_factory, tmp_path, handoff):
    n = 2000
    st, _ = run_and_stop(server_factory, tmp_path, n, handoff=handoff)
    roles = threads_by_role(st)
    assert roles["loop"][0]["requests"] == n
    assert roles["pool"][0]["requests"] == n
    assert roles["pool"][0]["counters"]["app_calls"] == n


def test_handoff_counters_balance(server_factory, tmp_path, handoff):
    n = 2000
    st, _ = run_and_stop(server_factory, tmp_path, n, handoff=handoff)
    roles = threads_by_role(st)
    lh, ph = roles["loop"][0]["counters"]["handoff"], roles["pool"][0]["counters"]["handoff"]
    assert lh["submitted"] == lh["drained"] == n
    assert ph["taken"] == ph["completed"] == n
    if handoff == "ring":
        assert lh["submit_syscalls"] <= lh["submitted"]
        assert ph["complete_syscalls"] <= ph["completed"]
        assert lh["wakes_sent"] <= ph["parks"] + 1  # a wake only for a park
    if handoff == "dgram":
        # one send per submit and per completion: the datagram design
        assert lh["submit_syscalls"] >= n and ph["complete_syscalls"] >= n


def test_inline_and_native_have_no_pool(server_factory, tmp_path):
    for args in (("--inline",), ("--app", "native-hello")):
        path = tmp_path / f"s{len(args)}.json"
        srv = server_factory("--stats-json", str(path), *args)
        send_n(srv, 500)
        assert srv.stop() == 0
        st = json.load(open(path))
        roles = threads_by_role(st)
        assert "pool" not in roles, args
        assert roles["loop"][0]["requests"] == 500


# ----------------------------------------------------------------- signals

def test_sigusr1_rewrites_while_running(server_factory, tmp_path):
    path = tmp_path / "stats.json"
    srv = server_factory("--stats-json", str(path))
    send_n(srv, 300)
    st1 = drained(srv, path, 300)  # each SIGUSR1 rewrites the file
    assert threads_by_role(st1)["loop"][0]["requests"] == 300
    send_n(srv, 200)
    st2 = drained(srv, path, 500)
    assert threads_by_role(st2)["loop"][0]["requests"] == 500
    assert srv.proc.poll() is None, "SIGUSR1 must not stop the server"
    assert srv.stop() == 0


def test_sigusr2_resets_window(server_factory, tmp_path):
    path = tmp_path / "stats.json"
    srv = server_factory("--stats-json", str(path))
    send_n(srv, 700)
    drained(srv, path, 700)
    windows = srv.log_text().count("stats: new measurement window")
    srv.proc.send_signal(signal.SIGUSR2)
    assert wait_until(lambda: srv.log_text().count("stats: new measurement window") > windows, 30), \
        "SIGUSR2 opened no new window"
    send_n(srv, 300)
    drained(srv, path, 300)
    assert srv.stop() == 0
    roles = threads_by_role(json.load(open(path)))
    assert roles["loop"][0]["requests"] == 300
    assert roles["pool"][0]["requests"] == 300
    assert roles["loop"][0]["counters"]["handoff"]["submitted"] == 300


def _usr1(srv, path):
    """The report SIGUSR1 writes."""
    m = os.stat(path).st_mtime_ns if os.path.exists(path) else 0
    srv.proc.send_signal(signal.SIGUSR1)
    return wait_file(path, since_ns=m)


def test_stats_window_excludes_warmup(server_factory, tmp_path):
    """--stats-window S opens the window S seconds after the worker starts:
    warm-up requests answered before it opens are outside it. SIGUSR1's
    report (which does not move the window) tells where the window is: it
    counts all 400 warm-up requests until the window opens, none after,
    and never none before spawn + S. (A start so slow that the window
    opened during the warm-up is retried with a longer S.)"""
    for window in (2.0, 6.0, 20.0):
        path = tmp_path / f"stats-{window}.json"
        srv = server_factory("--stats-json", str(path), "--stats-window", str(window))
        send_n(srv, 400)
        seen = threads_by_role(_usr1(srv, path))["loop"][0]["requests"]
        if seen in (0, 400):
            break
        srv.stop()
    else:
        pytest.fail(f"the window opened during the 400 warm-up requests, even with S = {window} s")

    def opened():
        st = _usr1(srv, path)
        return threads_by_role(st)["loop"][0]["requests"] == 0 and (st, time.monotonic())
    got = wait_until(opened, window + 30, interval=0.1)
    assert got, "the window never opened (the warm-up is still counted)"
    t_open = got[1]
    assert t_open >= srv.t_spawn + window, "the window opened before spawn + S"
    send_n(srv, 250)
    t_stop = time.monotonic()
    assert srv.stop() == 0
    t_exited = time.monotonic()
    st = json.load(open(path))
    assert threads_by_role(st)["loop"][0]["requests"] == 250
    # The window ran from its opening (after spawn + S, before t_open) to
    # the stop (after t_stop, before the exit); the loop's coarse clock
    # may lag a jiffy or two.
    assert t_stop - t_open - 0.05 <= st["workers"][0]["window_s"] <= t_exited - (srv.t_spawn + window) + 0.05


def test_stats_table_on_stderr(server_factory):
    srv = server_factory("--stats")
    send_n(srv, 100)
    assert srv.stop() == 0
    log = srv.log_text()
    assert "cserve-loop" in log and "cserve-pool-0" in log, log[-2000:]


def test_thread_names_in_proc(server_factory):
    srv = server_factory("--blocking-threads", "2")
    send_n(srv, 10)
    names = thread_names(srv.proc.pid)
    assert "cserve-loop" in names and "cserve-pool-0" in names and "cserve-pool-1" in names, names


# ----------------------------------------------------------------- cross-check

def test_threadcpu_agrees_with_cpu_s(server_factory, tmp_path):
    """The loop thread's CPU seen from /proc (schedstat, ns resolution;
    stat is 10 ms ticks) and its in-process cpu_s agree over the same
    window. Both edges fall while the loop is idle, so that what either
    side counts does not depend on when a signal is handled: the window
    opens (SIGUSR2, seen in the log), /proc is read, 40000 pipelined
    requests are served and answered, /proc is read again, and SIGUSR1
    reports the window. What the loop does between an edge and its /proc
    reading (a signal, a log line, a report) is microseconds against the
    requests' tenths of a second; the bound is 2 %."""
    path = tmp_path / "stats.json"
    srv = server_factory("--stats-json", str(path))
    n = 40000
    loop_tid = threads_by_role(drained(srv, path, 0))["loop"][0]["tid"]

    def loop_cpu():
        snap = threadcpu.snapshot([srv.proc.pid], source="schedstat")
        return snap[(srv.proc.pid, loop_tid)][1]

    windows = srv.log_text().count("stats: new measurement window")
    srv.proc.send_signal(signal.SIGUSR2)
    assert wait_until(lambda: srv.log_text().count("stats: new measurement window") > windows, 30), \
        "SIGUSR2 opened no new window"
    before = loop_cpu()
    send_n(srv, n, batch=100)
    after = loop_cpu()
    st = drained(srv, path, n)
    assert srv.stop() == 0
    loop = threads_by_role(st)["loop"][0]
    outside = after - before
    assert loop["tid"] == loop_tid and loop["requests"] == n
    assert outside > 0, (before, after)
    print(f"\n  loop CPU: /proc {outside:.4f}s, in-process {loop['cpu_s']:.4f}s, "
          f"{abs(outside - loop['cpu_s']) / loop['cpu_s'] * 100:.2f} % apart")
    assert abs(outside - loop["cpu_s"]) <= 0.02 * loop["cpu_s"], (outside, loop["cpu_s"])


# ----------------------------------------------------- SIGUSR1 with --workers

def _loop_requests(st):
    return sum(th["requests"] for w in st["workers"] for th in w["threads"] if th["role"] == "loop")


def _wait_json(path, since_ns=0, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.stat(path).st_mtime_ns > since_ns:
                with open(path) as f:
                    return json.load(f)  # written whole and renamed into place
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"{path} not (re)written within {timeout}s")


def _usr1_until(srv, path, cond):
    """SIGUSR1, each time once the last report is written, until cond(report)."""
    deadline = time.monotonic() + 30
    while True:
        m = os.stat(path).st_mtime_ns if os.path.exists(path) else 0
        srv.proc.send_signal(signal.SIGUSR1)
        st = _wait_json(path, since_ns=m, timeout=30)
        if cond(st):
            return st
        assert time.monotonic() < deadline, st
        time.sleep(0.05)


def _hello_n(srv, n):
    from httpclient import request
    for _ in range(n):  # a connection each: SO_REUSEPORT spreads them over the workers
        resp = request(srv.port, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout=30)
        assert (resp.version, resp.status) == ("HTTP/1.1", 200), resp


def test_sigusr1_with_workers_merges_every_worker(server_factory, tmp_path):
    """SIGUSR1 with --workers 2: one --stats-json file with both workers in it
    (the supervisor merges their parts; each writing the whole file would
    overwrite the other's), counts that add up, and no part left behind."""
    path = tmp_path / "stats.json"
    srv = server_factory("--workers", "2", "--stats-json", str(path))
    _hello_n(srv, 60)
    st = _usr1_until(srv, path, lambda st: _loop_requests(st) >= 60)
    assert len(st["workers"]) == 2, st.keys()
    assert _loop_requests(st) == 60
    _hello_n(srv, 40)
    st = _usr1_until(srv, path, lambda st: _loop_requests(st) >= 100)
    assert len(st["workers"]) == 2 and _loop_requests(st) == 100
    assert srv.proc.poll() is None, "SIGUSR1 must not stop the server"
    assert srv.stop() == 0
    st = json.load(open(path))
    assert len(st["workers"]) == 2 and _loop_requests(st) == 100
    assert not list(tmp_path.glob("stats.json.*")), list(tmp_path.iterdir())  # no part left behind


# ----------------------------------------------- the ring's spin counters and gauges

def _handoff_by_role(st):
    (w,) = st["workers"]
    return {th["role"]: th["counters"]["handoff"] for th in w["threads"]}


def test_ring_spin_counters_and_gauges_are_reported(server_factory, tmp_path):
    """The ring's spin counters and gauges (handoffs/handoff.h) are in the
    report, and a gauge (the adaptive spin budget) is reported as its value,
    not as its change over the window."""
    path = tmp_path / "stats.json"
    srv = server_factory("--stats-json", str(path), "--blocking-threads", "1", handoff="ring")
    _hello_n(srv, 60)  # one at a time: the pool thread waits between them
    a = _handoff_by_role(_usr1_until(srv, path, lambda st: _handoff_by_role(st)["pool"]["taken"] == 60))
    for key in ("loop_spins", "loop_spin_hits", "loop_spin_budget_ns"):
        assert isinstance(a["loop"][key], int), (key, a["loop"])
    for key in ("spin_hits", "spin_budget_ns"):
        assert isinstance(a["pool"][key], int), (key, a["pool"])
    assert a["pool"]["spin_hits"] <= a["pool"]["taken"]
    budget = a["pool"]["spin_budget_ns"]
    assert budget > 0, "the adaptive budget (the default) learnt nothing from 60 waits"
    # A new window with no traffic: counters start again from 0, but the
    # budget (unchanged: the pool thread took nothing) is still what it is.
    m = os.stat(path).st_mtime_ns
    windows = srv.log_text().count("stats: new measurement window")
    srv.proc.send_signal(signal.SIGUSR2)
    # SIGUSR1 only once the new window is open: sent while SIGUSR2 is still
    # pending, it would be read first (the lower signal number) and report
    # the old window
    assert wait_until(lambda: srv.log_text().count("stats: new measurement window") > windows, 30), \
        "SIGUSR2 opened no new window"
    srv.proc.send_signal(signal.SIGUSR1)
    b = _handoff_by_role(_wait_json(path, since_ns=m))
    assert b["pool"]["taken"] == 0 and b["pool"]["spin_hits"] == 0
    assert b["pool"]["spin_budget_ns"] == budget, (budget, b["pool"])
    assert srv.stop() == 0
