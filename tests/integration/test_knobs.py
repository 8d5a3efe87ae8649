"""The tuning options and the stats signals against a running server, each
checked by its effect, not only by being accepted: --spin 0, --loop-spin,
--loop-doze (--loop-hold: test_hold.py), --log-level, and SIGUSR1/SIGUSR2
relayed by the --workers supervisor."""
import json
import re
import signal
import time

import pytest

from httpclient import Reader, get, req
from loadgen import wait_until

APP = "wsgi_apps:application"


def sequential(srv, n):
    """n requests one after another on one connection: each finds both
    threads idle, so every handoff meets a side that may have parked."""
    with srv.connect() as s:
        rd = Reader(s)
        for _ in range(n):
            s.sendall(req("GET", "/hello"))
            assert rd.read_response().body == b"hello"
            time.sleep(0.0005)


def stats(srv, path):
    assert srv.stop() == 0
    with open(path) as f:
        st = json.load(f)
    (w,) = st["workers"]
    return {t["role"]: t for t in w["threads"]}


def test_spin_0_parks_every_job(server_factory, tmp_path):
    """--spin 0: the ring's pool thread parks as soon as its queue is empty
    (README: "0 parks at once"): no spins, and a park per request. With the
    default budget it spins instead."""
    n = 200
    out = {}
    for spin in ("0", None):
        path = tmp_path / f"spin-{spin}.json"
        args = ["--stats-json", str(path)] + (["--spin", spin] if spin else [])
        srv = server_factory(*args, app=APP)
        sequential(srv, n)
        out[spin] = stats(srv, path)["pool"]["counters"]["handoff"]
    print(f"\n  --spin 0: {out['0']}\n  default: {out[None]}")
    assert out["0"]["spins"] == 0
    assert out["0"]["parks"] >= n
    assert out[None]["spins"] > 0


def test_loop_spin_catches_completions_without_a_wake(server_factory, tmp_path):
    """--loop-spin 20000: with a request at the app the loop polls for its
    completion for up to 20 ms before it sleeps (long: the machine is shared), so the pool rarely has to
    wake it (loop_wakes: eventfd writes to a parked loop). Without it the
    loop sleeps in epoll_wait while the app runs and nearly every completion
    wakes it."""
    n = 200
    wakes = {}
    for ls in ("20000", None):
        path = tmp_path / f"loopspin-{ls}.json"
        # the pool spins 20 ms after each job (never parks between these
        # requests), so only the loop's own sleep is measured
        args = ["--stats-json", str(path), "--spin", "20000us"] + (["--loop-spin", ls] if ls else [])
        srv = server_factory(*args, app=APP)
        sequential(srv, n)
        wakes[ls] = stats(srv, path)["pool"]["counters"]["handoff"]["loop_wakes"]
    print(f"\n  loop wakes over {n} requests (measured here: 0 vs 200, three runs): --loop-spin 20000: {wakes['20000']}, default: {wakes[None]}")
    assert wakes[None] >= n // 2
    assert wakes["20000"] <= n // 4


def pipelined_batches(srv, batches, depth, path):
    """batches times: depth requests for path in one write on one
    connection, then all their responses: the pool thread has a queue of
    depth jobs each time."""
    one = f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    with srv.connect() as s:
        rd = Reader(s)
        for _ in range(batches):
            s.sendall(one * depth)
            for _ in range(depth):
                assert rd.read_response().body == b"worked"


def test_loop_doze_spares_a_busy_pool_its_wakeups(server_factory, tmp_path):
    """By default, while the pool thread works through a queue at a steady
    pace (~50 us a job here), the loop waits for each completion on a timer
    (loop_dozes) instead of asking to be woken, so the pool rarely writes the
    eventfd (loop_wakes). --loop-doze 0: no dozes, and the loop, parked while
    the pool works, is woken several times as often. How often exactly
    depends on the scheduler: on a loaded machine a woken loop may find
    several completions waiting (a loaded CI machine has seen fewer than
    half the completions wake it), so the bound is a multiple of the
    default's. The hold, which would take these waits first (test_hold.py),
    is off in both runs."""
    batches, depth = 12, 32
    n = batches * depth
    got = {}
    for doze in (None, "0"):
        path = tmp_path / f"doze-{doze}.json"
        args = ["--stats-json", str(path), "--loop-hold", "0"] + (["--loop-doze", doze] if doze else [])
        srv = server_factory(*args, app=APP)
        pipelined_batches(srv, batches, depth, "/work?us=50")
        st = stats(srv, path)
        got[doze] = (st["loop"]["counters"]["handoff"]["loop_dozes"],
                     st["pool"]["counters"]["handoff"]["loop_wakes"])
    print(f"\n  over {n} requests (dozes, pool's eventfd writes): default {got[None]}, --loop-doze 0 {got['0']}")
    assert got[None][0] > 0
    assert got[None][1] <= n // 4
    assert got["0"][0] == 0
    assert got["0"][1] > n // 4
    assert got["0"][1] >= 3 * max(got[None][1], 1)


def test_log_level(server_factory):
    """--log-level warning drops info lines (the start-up banner) but keeps
    warnings; debug adds the per-request error lines (a 400 is logged)."""
    quiet = server_factory("--log-level", "warning", app=APP)
    loud = server_factory("--log-level", "debug", app=APP)
    for srv in (quiet, loud):
        with srv.connect() as s:
            s.sendall(b"GET /hello HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n")
            assert Reader(s).read_response().status == 400
    assert wait_until(lambda: ": 400 Bad Request" in loud.log_text(), 5), loud.log_text()
    assert "info: cserve" in loud.log_text()
    assert quiet.stop() == 0
    text = quiet.log_text()
    assert "info:" not in text and ": 400 " not in text, text
    err = server_factory("--log-level", "error", "--graceful-timeout", "1", app=APP)
    with err.connect(timeout=10) as s:
        s.sendall(req("GET", "/sleep?s=3"))
        time.sleep(0.3)
        assert err.stop() == 0
    assert "warning:" not in err.log_text(), err.log_text()  # the graceful-timeout warning
    warn = server_factory("--log-level", "warning", "--graceful-timeout", "1", app=APP)
    with warn.connect(timeout=10) as s:
        s.sendall(req("GET", "/sleep?s=3"))
        time.sleep(0.3)
        assert warn.stop() == 0
    assert "warning: graceful timeout" in warn.log_text(), warn.log_text()


def _two_worker_server(server_factory, tmp_path):
    path = tmp_path / "stats.json"
    srv = server_factory("--workers", "2", "--stats", "--stats-json", str(path), app=APP)
    pids, sent = set(), 0
    while len(pids) < 2 and sent < 2000:
        pids.add(int(get(srv.port, "/pid").body))
        sent += 1
    assert len(pids) == 2, pids
    return srv, path, pids, sent


def _report(srv, pids):
    """SIGUSR1; returns the loop's request count summed over both workers'
    tables (one per worker pid)."""
    mark = len(srv.log_text())
    srv.proc.send_signal(signal.SIGUSR1)

    def loop_lines():  # both tables written through their loop line
        return len(re.findall(LOOP_LINE, srv.log_text()[mark:], re.M)) == 2
    assert wait_until(loop_lines, 10), srv.log_text()[mark:]
    text = srv.log_text()[mark:]
    assert {int(p) for _, p in _tables(text)} == pids, text
    return sum(int(m) for m in re.findall(LOOP_LINE, text, re.M))


LOOP_LINE = r"^\s*cserve-loop\s+\S+\s+\S+\s+(\d+)"


def test_sigusr1_sigusr2_reach_every_worker(server_factory, tmp_path):
    """With --workers 2 the supervisor relays SIGUSR1 (report) and SIGUSR2
    (new window) to each worker: on SIGUSR1 two tables, one per worker pid,
    counting every request; after SIGUSR2 both count only the requests
    since; at exit FILE holds both workers."""
    srv, path, pids, sent = _two_worker_server(server_factory, tmp_path)
    assert _report(srv, pids) == sent
    mark = len(srv.log_text())
    srv.proc.send_signal(signal.SIGUSR2)
    assert wait_until(lambda: srv.log_text()[mark:].count("stats: new measurement window") == 2, 10)
    for _ in range(30):
        get(srv.port, "/hello")
    assert _report(srv, pids) == 30
    assert srv.stop() == 0
    with open(path) as f:
        st = json.load(f)
    assert sorted(w["pid"] for w in st["workers"]) == sorted(pids)
    assert _loop_requests(st) == 30


def test_sigusr1_writes_every_workers_json(server_factory, tmp_path):
    srv, path, pids, sent = _two_worker_server(server_factory, tmp_path)
    _report(srv, pids)

    def merged():  # the supervisor writes the file once both workers' parts are in
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None
    assert wait_until(lambda: (st := merged()) is not None
                      and sorted(w["pid"] for w in st["workers"]) == sorted(pids), 10), merged()
    st = merged()
    assert _loop_requests(st) == sent


def _tables(text):
    return re.findall(r"cserve stats: worker (\d) \(pid (\d+)\)", text)


def _loop_requests(st):
    return sum(t["requests"] for w in st["workers"] for t in w["threads"] if t["role"] == "loop")
