"""The tuning options and the stats signals against a running server: the
waiting knobs (--spin, --loop-spin, --loop-doze; --loop-hold: test_hold.py)
as the server takes them, and "off" meaning off whatever the scheduler
does; --log-level by what it lets through; SIGUSR1/SIGUSR2 relayed by the
--workers supervisor. What each waiting knob changes on the live
scheduler (spins, eventfd wakes, dozes) is tests/perf/test_perf_knobs.py,
in make perf-check."""
import json
import re
import signal
import subprocess

import pytest

from conftest import BIN, ROOT
from pipelined import pipelined, thread_stats
from httpclient import Reader, get, req
from loadgen import wait_until

APP = "wsgi_apps:application"


def sequential(srv, n):
    """n requests one after another on one connection."""
    with srv.connect() as s:
        rd = Reader(s)
        for _ in range(n):
            s.sendall(req("GET", "/hello"))
            assert rd.read_response().body == b"hello"


def check_config(*args):
    p = subprocess.run([BIN, "--check-config", *args], cwd=str(ROOT), capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout + p.stderr


def test_the_waiting_knobs_reach_the_ring():
    """--spin, --loop-spin and --loop-doze as the server takes them, and
    their defaults (what the ring does with each, on the live scheduler:
    tests/perf/test_perf_knobs.py; the doze's rule on fixed paces:
    handoffs/tests/batch_test.c)."""
    defaults = check_config()
    for line in ("spin: adaptive", "loop-spin: adaptive", "loop-doze: 50 us (default)"):
        assert re.search(rf"^{re.escape(line)}", defaults, re.M), defaults
    given = check_config("--spin", "0", "--loop-spin", "20000", "--loop-doze", "0")
    for line in ("spin: 0 iterations (command line)", "loop-spin: 20000 us (command line)",
                 "loop-doze: 0 us (never) (command line)"):
        assert re.search(rf"^{re.escape(line)}", given, re.M), given


def test_spin_0_never_spins(server_factory, tmp_path):
    """--spin 0: the pool thread parks as soon as its queue is empty
    (README: "0 parks at once"): 200 requests and not one spin."""
    path = tmp_path / "spin-0.json"
    srv = server_factory("--stats-json", str(path), "--spin", "0", app=APP)
    sequential(srv, 200)
    assert thread_stats(srv, path)["pool"]["counters"]["handoff"]["spins"] == 0


def test_loop_doze_0_never_dozes(server_factory, tmp_path):
    """--loop-doze 0, the hold off: 12 batches of 32 pipelined requests
    of 50 us (a queue a default server dozes on: make perf-check) and not
    one doze; every request answered."""
    path = tmp_path / "doze-0.json"
    srv = server_factory("--stats-json", str(path), "--loop-hold", "0", "--loop-doze", "0", app=APP)
    pipelined(srv, 12, 32, "/work?us=50")
    assert thread_stats(srv, path)["loop"]["counters"]["handoff"]["loop_dozes"] == 0


def test_log_level(server_factory, tmp_path):
    """--log-level warning drops info lines (the start-up banner) but keeps
    warnings; debug adds the per-request error lines (a 400 is logged)."""
    quiet = server_factory("--log-level", "warning", app=APP)
    loud = server_factory("--log-level", "debug", app=APP)
    for srv in (quiet, loud):
        with srv.connect() as s:
            s.sendall(b"GET /hello HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n")
            assert Reader(s).read_response().status == 400
    assert wait_until(lambda: ": 400 Bad Request" in loud.log_text(), 30), loud.log_text()
    assert "info: cserve" in loud.log_text()
    assert quiet.stop() == 0
    text = quiet.log_text()
    assert "info:" not in text and ": 400 " not in text, text
    for level in ("error", "warning"):
        mark = tmp_path / f"in-app-{level}"
        srv = server_factory("--log-level", level, "--graceful-timeout", "1", app=APP)
        with srv.connect(timeout=10) as s:
            s.sendall(req("GET", f"/sleep?s=30&mark={mark}"))
            assert wait_until(mark.exists, 30), "the request never reached the app"
            assert srv.stop() == 0
        said = "warning: graceful timeout" in srv.log_text()  # the request outlived the timeout
        assert said == (level == "warning"), srv.log_text()


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
