"""--metrics-bind against the real binary: /metrics in the Prometheus text
format (read by prometheus_client's own parser), /stats.json, the dashboard
in a headless browser, the verdict as the load changes, bad input on the
metrics listener, and the metrics thread serving through a reload."""
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from deploy_support import http_get
from httpclient import Reader
from conftest import BIN, ROOT, free_port, start_server

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import loadgen  # noqa: E402

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:  # pragma: no cover - depends on the machine
    text_string_to_metric_families = None

needs_prom = pytest.mark.skipif(
    text_string_to_metric_families is None,
    reason="prometheus_client is not installed (scripts/setup.sh installs it: "
           "/usr/bin/python3 -m pip install --break-system-packages prometheus_client)")

APPS_DIR = ROOT / "apps"
REGIMES = ["loop-bound", "gil-bound", "threads-short", "machine-bound", "not-loaded"]

# Every family /metrics must carry (the handoff ones with a pool).
FAMILIES = {
    "cserve_info", "cserve_worker_pid", "cserve_thread_cpu_seconds", "cserve_thread_requests",
    "cserve_loop_requests", "cserve_loop_passes", "cserve_loop_epoll_waits", "cserve_loop_events",
    "cserve_loop_wait_seconds", "cserve_loop_pass_seconds", "cserve_loop_accepts", "cserve_loop_reads",
    "cserve_loop_read_eagain", "cserve_loop_writes", "cserve_loop_closes",
    "cserve_pool_gil_releases", "cserve_pool_messages",
    "cserve_handoff_loop_submitted", "cserve_handoff_loop_full", "cserve_handoff_loop_submit_syscalls",
    "cserve_handoff_loop_wakes_sent", "cserve_handoff_loop_drained", "cserve_handoff_loop_drain_syscalls",
    "cserve_handoff_loop_eagain", "cserve_handoff_loop_sleep_syscalls", "cserve_handoff_loop_loop_parks",
    "cserve_handoff_loop_loop_spins", "cserve_handoff_loop_loop_spin_hits", "cserve_handoff_loop_loop_dozes",
    "cserve_handoff_worker_taken", "cserve_handoff_worker_take_syscalls", "cserve_handoff_worker_parks",
    "cserve_handoff_worker_spins", "cserve_handoff_worker_yields", "cserve_handoff_worker_completed",
    "cserve_handoff_worker_complete_syscalls", "cserve_handoff_worker_loop_wakes",
    "cserve_handoff_worker_spin_hits", "cserve_handoff_loop_spin_budget_nanoseconds",
    "cserve_handoff_worker_spin_budget_nanoseconds", "cserve_queue_depth", "cserve_requests",
    "cserve_request_duration_seconds", "cserve_received_bytes", "cserve_sent_bytes",
    "cserve_connections_open", "cserve_regime", "cserve_verdict_window_seconds",
    "cserve_verdict_loop_utilisation", "cserve_verdict_pool_utilisation", "cserve_verdict_pool_ready_ratio",
    "cserve_verdict_queued_ratio",
    "cserve_verdict_machine_busy_ratio",
}
# Per-worker gauges whose sum over workers means nothing (no "all" series).
NO_TOTAL = {"cserve_worker_pid", "cserve_handoff_loop_spin_budget_nanoseconds",
            "cserve_handoff_worker_spin_budget_nanoseconds"}


def get(port, path, timeout=5.0):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return r.status, r.headers, r.read()


def families(port):
    _, headers, body = get(port, "/metrics")
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return {f.name: f for f in text_string_to_metric_families(body.decode())}


def stats(port):
    return json.loads(get(port, "/stats.json")[2])


def metrics_server(factory, *args, app=None, chdir=None, **kw):
    mport = free_port()
    extra = ["--metrics-bind", f"127.0.0.1:{mport}", *args]
    if chdir is not None:
        srv = factory(*extra, app=app, chdir=chdir, **kw)
    else:
        srv = factory(*extra, app=app, **kw)
    wait_metrics(mport)
    return srv, mport


def wait_metrics(mport, workers=1, timeout=15.0):
    """Until every worker has published (twice a second)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if len(stats(mport)["workers"]) >= workers:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("the workers never published their figures")


def hello_requests(port, n, conns=4):
    def one(k):
        for _ in range(k):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
                assert r.status == 200
                r.read()
    ts = [threading.Thread(target=one, args=(n // conns + (i < n % conns),)) for i in range(conns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


class Load:
    """conns keep-alive connections, each sending `path` one request at a
    time (body read by Content-Length), until stop()."""

    def __init__(self, port, path, conns):
        self.port, self.path, self.done = port, path, 0
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(conns)]
        for t in self.threads:
            t.start()

    def run(self):
        req = f"GET {self.path} HTTP/1.1\r\nHost: t\r\n\r\n".encode()
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            reader = Reader(s)
            while not self.stopping.is_set():
                s.sendall(req)
                reader.read_response()
                with self.lock:
                    self.done += 1
            s.close()
        except (OSError, EOFError):  # the server closed: the load ends
            pass

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=15)


def await_verdict(mport, acceptable, seconds=15.0, settle=3.5):
    """Poll the verdict after `settle` seconds of load (its window is three
    seconds), until it is one of `acceptable` or `seconds` pass. Returns the
    last verdict seen and every regime seen."""
    time.sleep(settle)
    deadline = time.monotonic() + seconds - settle
    seen = []
    while True:
        v = stats(mport)["verdict"]
        seen.append(v["regime"])
        if v["regime"] in acceptable or time.monotonic() >= deadline:
            return v, seen
        time.sleep(0.5)


def report(name, v):
    """The figures each verdict rests on, for the record (pytest -s)."""
    print(f"\nverdict[{name}]: {v['regime']}: {v['why']}; advice: {v['advice']}")


# ---- the formats ---------------------------------------------------------------------

@needs_prom
def test_metrics_every_family_parsed_and_counters_monotonic(server_factory):
    srv, mport = metrics_server(server_factory)
    hello_requests(srv.port, 20)
    time.sleep(0.7)  # a publish
    first = families(mport)
    missing = FAMILIES - set(first)
    assert not missing, f"families missing from /metrics: {sorted(missing)}"
    assert first["cserve_regime"].type == "gauge"
    assert sum(s.value for s in first["cserve_regime"].samples) == 1, "exactly one regime is the verdict"
    assert {s.labels["regime"] for s in first["cserve_regime"].samples} == set(REGIMES)
    assert first["cserve_request_duration_seconds"].type == "histogram"
    for s in first["cserve_thread_cpu_seconds"].samples:
        assert {"worker", "thread", "role"} <= set(s.labels)
    two = {s.labels["class"]: s.value for s in first["cserve_requests"].samples
           if s.labels["worker"] == "0"}
    assert two["2xx"] >= 20

    hello_requests(srv.port, 20)
    time.sleep(0.7)
    second = families(mport)
    grew = False
    for name, fam in first.items():
        if fam.type not in ("counter", "histogram"):
            continue
        before = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in fam.samples}
        for s in second[name].samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            if key in before:
                assert s.value >= before[key], f"{s.name}{s.labels} went back: {before[key]} -> {s.value}"
                grew |= s.value > before[key]
    assert grew
    req = lambda fams: [s.value for s in fams["cserve_requests"].samples  # noqa: E731
                        if s.labels == {"worker": "all", "class": "2xx"}][0]
    assert req(second) - req(first) >= 20
    count = [s.value for s in second["cserve_request_duration_seconds"].samples
             if s.name.endswith("_count") and s.labels["worker"] == "0"][0]
    assert count >= 40, "every response is in the latency histogram"


@needs_prom
def test_two_workers_sum_equals_total(server_factory):
    srv, mport = metrics_server(server_factory, "--workers", "2")
    wait_metrics(mport, workers=2)
    hello_requests(srv.port, 200, conns=8)
    time.sleep(0.7)
    fams = families(mport)
    pids = {s.labels["worker"]: s.value for s in fams["cserve_worker_pid"].samples}
    assert set(pids) == {"0", "1"} and pids["0"] != pids["1"]
    checked = 0
    for name, fam in fams.items():
        if name in NO_TOTAL or not any("worker" in s.labels for s in fam.samples):
            continue
        sums, totals = {}, {}
        for s in fam.samples:
            rest = tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("worker", "thread")))
            key = (s.name, rest)
            if s.labels["worker"] == "all":
                totals[key] = s.value
            else:
                sums[key] = sums.get(key, 0) + s.value
        assert set(sums) == set(totals), f"{name}: per-worker series without a total or the reverse"
        for key, v in totals.items():
            assert abs(sums[key] - v) <= 1e-9 * max(1.0, abs(v)), f"{name}{key}: sum {sums[key]} != total {v}"
            checked += 1
    assert checked > 50
    served = {s.labels["worker"]: s.value for s in fams["cserve_loop_requests"].samples}
    assert served["all"] >= 200


def test_stats_json_and_the_page(server_factory):
    srv, mport = metrics_server(server_factory)
    hello_requests(srv.port, 10)
    time.sleep(0.7)
    doc = stats(mport)
    assert doc["verdict"]["regime"] in REGIMES and doc["verdict"]["advice"] and doc["verdict"]["why"]
    w = doc["workers"][0]
    assert w["requests_by_class"]["2xx"] >= 10
    assert [t["role"] for t in w["threads"]] == ["loop", "pool"]
    assert w["threads"][1]["handoff"]["taken"] >= 10
    assert sum(w["latency"]["counts"]) == w["latency"]["count"] >= 10
    assert w["bytes_in"] > 0 and w["bytes_out"] > 0
    status, headers, page = get(mport, "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    text = page.decode()
    # Self-contained: no script, style or image fetched from elsewhere.
    for needle in ("<script src", "<link", "http://", "https://", "@import"):
        assert needle not in text, f"the dashboard references an external asset ({needle})"
    assert "<canvas" in text and "stats.json" in text


def test_stats_table_has_the_verdict(server_factory):
    srv, mport = metrics_server(server_factory, "--stats")
    hello_requests(srv.port, 10)
    srv.stop()
    log = srv.log_text()
    assert "  verdict: " in log and "advice: " in log, log[-2000:]


# ---- the verdict follows the load --------------------------------------------------------

def test_verdict_not_loaded(server_factory):
    srv, mport = metrics_server(server_factory)
    v, seen = await_verdict(mport, {"not-loaded"}, seconds=6.0)
    report("no load", v)
    # Other work on the machine may leave it no idle CPU: then machine-bound
    # is the truth, and the figure shows it.
    if v["regime"] == "machine-bound":
        assert v["figures"]["machine_busy"] >= 0.9
    else:
        assert v["regime"] == "not-loaded", seen
    assert v["figures"]["loop_util"] < 0.5 and v["figures"]["pool_util"] < 0.5


def test_verdict_hello_pipelined(server_factory):
    srv, mport = metrics_server(server_factory)
    # One client process in Python cannot keep even the loop busy; three
    # fill a 2-CPU machine whatever else it runs.
    loads = [subprocess.Popen([sys.executable, str(ROOT / "tests/integration/loadgen.py"), "--port",
                               str(srv.port), "-n", "100000000", "-c", "16", "-d", "16"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(3)]
    try:
        # Whichever the counters say, but something must be saturated: on two
        # CPUs the clients compete with the server, and the machine may be.
        v, seen = await_verdict(mport, {"loop-bound", "gil-bound", "machine-bound"})
    finally:
        for load in loads:
            load.kill()
            load.wait()
    report("hello pipelined", v)
    assert v["regime"] in ("loop-bound", "gil-bound", "machine-bound"), seen
    f = v["figures"]
    assert max(f["loop_util"], f["pool_util"], f["machine_busy"]) >= 0.9


def test_verdict_cpu_app_is_gil_bound(server_factory):
    srv, mport = metrics_server(server_factory, "--blocking-threads", "2", app="cpu:application",
                                chdir=APPS_DIR)
    load = Load(srv.port, "/?us=5000", conns=4)
    try:
        v, seen = await_verdict(mport, {"gil-bound"})
    finally:
        load.stop()
    report("apps/cpu.py", v)
    assert load.done > 0
    if v["regime"] == "machine-bound":
        # Only when other work leaves the pool no core to hold the GIL on:
        # it waited for a CPU, and no CPU was idle.
        f = v["figures"]
        assert f["machine_busy"] >= 0.9 and f["pool_util"] + f["pool_ready"] >= 0.9, seen
    else:
        assert v["regime"] == "gil-bound", seen
        assert "--workers" in v["advice"]


def test_verdict_sleeping_app_threads_short(server_factory):
    srv, mport = metrics_server(server_factory, "--blocking-threads", "1", app="gil_release:application",
                                chdir=APPS_DIR)
    load = Load(srv.port, "/?us=20000&mode=sleep", conns=32)
    try:
        v, seen = await_verdict(mport, {"threads-short"})
    finally:
        load.stop()
    report("apps/gil_release.py sleeping", v)
    f = v["figures"]
    if v["regime"] == "machine-bound":
        # A machine so busy that the one thread waited for a CPU a tenth of
        # the time: the verdict's rule says the CPU, not threads, is short.
        assert f["machine_busy"] >= 0.9 and f["pool_ready"] >= 0.1 and f["queued_frac"] >= 0.75, seen
        return
    assert v["regime"] == "threads-short", seen
    assert "--blocking-threads" in v["advice"]
    assert f["pool_util"] < 0.5 and f["queued_frac"] >= 0.75


# ---- bad input on the metrics listener ----------------------------------------------------

def raw(mport, data, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", mport), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            try:
                d = s.recv(65536)
            except ConnectionResetError:
                break
            if not d:
                break
            out += d
        return out
    finally:
        s.close()


def test_bad_input_on_the_metrics_listener(server_factory):
    srv, mport = metrics_server(server_factory)
    assert raw(mport, b"GET /nope HTTP/1.1\r\nHost: t\r\n\r\n").startswith(b"HTTP/1.1 404")
    r = raw(mport, b"POST /metrics HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n")
    assert r.startswith(b"HTTP/1.1 405") and b"Allow: GET, HEAD" in r
    head = raw(mport, b"HEAD /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and head.endswith(b"\r\n\r\n")
    big = b"GET /metrics HTTP/1.1\r\nHost: t\r\nX: " + b"a" * 16384 + b"\r\n\r\n"
    try:
        r = raw(mport, big)
        assert r == b"" or r.startswith(b"HTTP/1.1 431"), r[:80]
    except (BrokenPipeError, ConnectionResetError):
        pass  # closed while we were still sending: also a refusal

    # Slow clients: more than the listener takes at once, each sending half a
    # head. The app's port serves meanwhile, and each is closed at its deadline.
    slow = [socket.create_connection(("127.0.0.1", mport), timeout=10) for _ in range(40)]
    for s in slow:
        s.sendall(b"GET /metrics HTTP/1.1\r\n")
    t0 = time.monotonic()
    hello_requests(srv.port, 8, conns=2)
    assert time.monotonic() - t0 < 2.0, "the app's listener waited on the metrics clients"
    closed = 0
    for s in slow[:32]:
        s.settimeout(6.0)
        try:
            closed += s.recv(1) == b""
        except ConnectionResetError:
            closed += 1
    assert closed == 32, "a slow metrics client was not closed at its deadline"
    assert time.monotonic() - t0 < 6.0
    for s in slow:
        s.close()
    # And the listener serves again once they are gone.
    assert get(mport, "/metrics")[0] == 200


def test_unix_socket_and_refused_addresses(server_factory, tmp_path):
    path = tmp_path / "m.sock"
    srv = server_factory("--metrics-bind", f"unix:{path}")
    deadline = time.monotonic() + 10
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(path))
    status, body = http_get(s, "/stats.json")
    assert status == 200
    json.loads(body)
    srv.stop()
    assert not path.exists(), "the metrics socket is removed at exit"
    p = subprocess.run([BIN, "--bind", f"127.0.0.1:{free_port()}", "--metrics-bind", "0.0.0.0:9"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "loopback" in p.stderr


# ---- through a reload -------------------------------------------------------------------------

def test_metrics_follow_a_reloaded_lone_worker(server_factory):
    srv, mport = metrics_server(server_factory)
    pid0 = stats(mport)["workers"][0]["pid"]
    assert pid0 == srv.proc.pid
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 20
    pid1 = pid0
    while time.monotonic() < deadline:
        try:
            pid1 = stats(mport)["workers"][0]["pid"]
        except OSError:
            pass
        if pid1 != pid0:
            break
        time.sleep(0.2)
    assert pid1 != pid0, "the successor's slot was never served"
    hello_requests(srv.port, 10)
    time.sleep(0.7)
    w = stats(mport)["workers"][0]
    assert w["pid"] == pid1 and w["requests_by_class"]["2xx"] >= 10


# ---- the dashboard in a browser -----------------------------------------------------------------

def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


@pytest.mark.skipif(chromium() is None,
                    reason="no headless Chromium (Debian: apt-get install chromium; scripts/setup.sh does)")
def test_dashboard_in_a_browser(server_factory, tmp_path):
    srv, mport = metrics_server(server_factory)
    load = Load(srv.port, "/", conns=4)
    try:
        time.sleep(1.5)
        browser = [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                   f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1100"]
        url = f"http://127.0.0.1:{mport}/"
        # Virtual time runs the page's one-second timer without waiting for it.
        dom = subprocess.run(browser + ["--virtual-time-budget=6000", "--dump-dom", url],
                             capture_output=True, text=True, timeout=90).stdout
        shot = tmp_path / "dashboard.png"
        subprocess.run(browser + ["--virtual-time-budget=6000", f"--screenshot={shot}", url],
                       capture_output=True, timeout=90)
    finally:
        load.stop()
    import re
    refreshes = int(re.search(r'<body[^>]*data-refreshes="(\d+)"', dom).group(1))
    assert refreshes >= 3, f"the page refreshed {refreshes} times"
    regime = re.search(r'id="verdict" data-regime="([a-z-]*)"', dom).group(1)
    assert regime in REGIMES, "the verdict text was never filled in"
    points = int(re.search(r'id="util" data-points="(\d+)"', dom).group(1))
    assert points >= 2, "the utilisation plot drew no line"
    assert shot.exists() and shot.stat().st_size > 10000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(loadgen.sanitizer(BIN) == "tsan",
                    reason="under TSan a child forked from a pool thread may not start threads "
                           "(multiprocessing's Pool does): the app, not the server, cannot run")
def test_app_that_forks_while_metrics_are_served(server_factory):
    """A fork inside a request (multiprocessing's fork start method, from a
    pool thread) stops and restarts the metrics thread around it: the
    request is answered, the metrics listener still serves, and the children
    did not keep it."""
    srv, mport = metrics_server(server_factory, "--keepalive-timeout", "1",
                                app="fork_apps:pool", chdir=ROOT / "tests/integration/apps")
    for _ in range(2):
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/", timeout=60) as r:
            assert r.read() == b"140 9"
    assert get(mport, "/metrics")[0] == 200
    time.sleep(0.7)  # a publish
    doc = stats(mport)
    assert doc["workers"][0]["requests_by_class"]["2xx"] >= 2
