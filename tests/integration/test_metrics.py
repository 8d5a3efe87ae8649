"""--metrics-bind against the real binary: /metrics in the Prometheus text
format (read by prometheus_client's own parser), /stats.json, the dashboard
in a headless browser, the verdict where the figures decide it (no load;
requests waiting on a gate for an off-CPU thread), bad input and slow
clients on the metrics listener, and the metrics thread serving through a
reload. The verdict under a CPU-bound load, how soon the listener answers
beside slow clients and the CPU it uses out of descriptors depend on the
scheduler: tests/perf/test_perf_metrics.py."""
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

from deploy_support import Proc, clean_env, http_get, one_line_error, wait_connect
from httpclient import Reader, stats_json as stats
from conftest import BIN, ROOT, free_port, start_server

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import loadgen  # noqa: E402

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:  # pragma: no cover - depends on the machine
    text_string_to_metric_families = None

needs_prom = pytest.mark.skipif(
    text_string_to_metric_families is None,
    reason="prometheus_client is not installed (scripts/setup.sh test installs python3-prometheus-client)")

APPS_DIR = ROOT / "apps"
REGIMES = ["loop-bound", "gil-bound", "threads-short", "machine-bound", "pool-queued", "not-loaded"]

# Every family /metrics must carry (the handoff ones with a pool).
FAMILIES = {
    "cserve_info", "cserve_worker_pid", "cserve_metrics_refused", "cserve_thread_cpu_seconds", "cserve_thread_requests",
    "cserve_loop_requests", "cserve_loop_passes", "cserve_loop_epoll_waits", "cserve_loop_events",
    "cserve_loop_wait_seconds", "cserve_loop_pass_seconds", "cserve_loop_accepts", "cserve_loop_reads",
    "cserve_loop_read_eagain", "cserve_loop_writes", "cserve_loop_closes",
    "cserve_pool_gil_releases", "cserve_pool_messages", "cserve_pool_skipped",
    "cserve_handoff_loop_submitted", "cserve_handoff_loop_full", "cserve_handoff_loop_submit_syscalls",
    "cserve_handoff_loop_wakes_sent", "cserve_handoff_loop_drained", "cserve_handoff_loop_drain_syscalls",
    "cserve_handoff_loop_eagain", "cserve_handoff_loop_sleep_syscalls", "cserve_handoff_loop_loop_parks",
    "cserve_handoff_loop_loop_spins", "cserve_handoff_loop_loop_spin_hits", "cserve_handoff_loop_loop_dozes",
    "cserve_handoff_worker_taken", "cserve_handoff_worker_take_syscalls", "cserve_handoff_worker_parks",
    "cserve_handoff_worker_spins", "cserve_handoff_worker_yields", "cserve_handoff_worker_completed",
    "cserve_handoff_worker_complete_syscalls", "cserve_handoff_worker_loop_wakes",
    "cserve_handoff_worker_spin_hits", "cserve_handoff_loop_spin_budget_seconds",
    "cserve_handoff_worker_spin_budget_seconds", "cserve_queue_depth", "cserve_requests",
    "cserve_request_duration_seconds", "cserve_received_bytes", "cserve_sent_bytes",
    "cserve_connections_open", "cserve_regime", "cserve_verdict_window_seconds",
    "cserve_verdict_loop_utilisation", "cserve_verdict_pool_utilisation", "cserve_verdict_pool_ready_ratio",
    "cserve_verdict_queued_ratio", "cserve_verdict_queued_max_ratio", "cserve_verdict_waiting_ratio",
    "cserve_verdict_machine_busy_ratio", "cserve_pool_threads", "cserve_pool_threads_started",
    "cserve_pool_threads_max", "cserve_pool_threads_changes",
}
# Per-worker gauges whose sum over workers means nothing (no "all" series).
NO_TOTAL = {"cserve_worker_pid", "cserve_handoff_loop_spin_budget_seconds",
            "cserve_handoff_worker_spin_budget_seconds"}


def get(port, path, timeout=5.0):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return r.status, r.headers, r.read()


def families(port):
    _, headers, body = get(port, "/metrics")
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return {f.name: f for f in text_string_to_metric_families(body.decode())}


def wait_published(mport, done, check=None, timeout=30.0):
    """Until the workers' published counts hold `done` successful requests
    (a loop publishes twice a second, later on a loaded machine), or
    check(stats) holds; returns that /stats.json."""
    deadline = time.monotonic() + timeout
    while True:
        doc = stats(mport)
        if check(doc) if check else sum(w["requests_by_class"]["2xx"] for w in doc["workers"]) >= done:
            return doc
        assert time.monotonic() < deadline, f"the published counts never reached {done}: {doc['workers']}"
        time.sleep(0.1)


def metrics_server(factory, *args, app=None, chdir=None, **kw):
    mport = free_port()
    extra = ["--metrics-bind", f"127.0.0.1:{mport}", *args]
    if chdir is not None:
        srv = factory(*extra, app=app, chdir=chdir, **kw)
    else:
        srv = factory(*extra, app=app, **kw)
    wait_metrics(mport)
    return srv, mport


def wait_metrics(mport, workers=1, timeout=30.0):
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


def await_verdict(mport, acceptable, seconds=30.0):
    """Poll the verdict until it is one of `acceptable` or `seconds` pass
    (a deadline that only detects a hang: its window is three seconds).
    Returns the last verdict seen and every regime seen."""
    deadline = time.monotonic() + seconds
    seen = []
    while True:
        v = stats(mport)["verdict"]
        if not seen or seen[-1] != v["regime"]:
            seen.append(v["regime"])
        if v["regime"] in acceptable or time.monotonic() >= deadline:
            return v, seen
        time.sleep(0.2)


def report(name, v):
    """The figures each verdict rests on, for the record (pytest -s)."""
    print(f"\nverdict[{name}]: {v['regime']}: {v['why']}; advice: {v['advice']}")


# ---- the formats ---------------------------------------------------------------------

@needs_prom
def test_metrics_every_family_parsed_and_counters_monotonic(server_factory):
    srv, mport = metrics_server(server_factory)
    hello_requests(srv.port, 20)
    wait_published(mport, 20)
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
    wait_published(mport, 40)
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
    wait_published(mport, 200)
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


@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="no promtool (Debian: apt-get install prometheus; scripts/setup.sh does)")
def test_promtool_check_metrics(server_factory):
    """Prometheus' own linter, `promtool check metrics`, has nothing to say
    about the live /metrics of two workers with a handoff (base units,
    _total counters, HELP and TYPE for every family)."""
    srv, mport = metrics_server(server_factory, "--workers", "2")
    wait_metrics(mport, workers=2)
    hello_requests(srv.port, 40)
    wait_published(mport, 40)
    body = get(mport, "/metrics")[2]
    assert b"cserve_handoff_loop_spin_budget" in body
    p = subprocess.run([shutil.which("promtool"), "check", "metrics"], input=body, capture_output=True,
                       timeout=60)
    said = (p.stdout + p.stderr).decode(errors="replace")
    assert p.returncode == 0 and not said.strip(), said


def test_stats_json_and_the_page(server_factory):
    srv, mport = metrics_server(server_factory)
    hello_requests(srv.port, 10)
    doc = wait_published(mport, 10)
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


# What only the endpoint has of a worker: its live counts, and the loop's
# counters again at the top, where the dashboard reads them (and, in
# blocking_threads, the pool's last change of size).
LIVE_ONLY = {"connections_open", "bytes_in", "bytes_out", "requests_by_class", "latency", "queue_samples",
             "queue_samples_all_waiting", "queue_samples_request_waiting", "loop", "handoff"}


def key_tree(obj):
    """obj's keys, nested objects as their own key trees."""
    if isinstance(obj, dict):
        return {k: key_tree(v) for k, v in obj.items()}
    return None


def test_stats_json_file_and_endpoint_agree(server_factory, tmp_path):
    """--stats-json and /stats.json are one writer's rendering of one
    snapshot: a worker's threads carry the same keys, nested ones too, and,
    with nothing served between the two reads, the same counts. The file's
    window is the worker's life here (no SIGUSR2, no --stats-window), as is
    the endpoint's."""
    path = tmp_path / "stats.json"
    srv, mport = metrics_server(server_factory, "--stats-json", str(path))
    n = 20
    hello_requests(srv.port, n)

    def all_in(doc):
        (w,) = doc["workers"]
        loop, pool = w["threads"]
        return (loop["requests"] == n and pool["requests"] == n and pool["counters"]["handoff"]["completed"] == n
                and loop["counters"]["handoff"]["drained"] == n)
    live = wait_published(mport, n, check=all_in)["workers"][0]
    srv.proc.send_signal(signal.SIGUSR1)

    def written():
        try:
            return json.loads(path.read_text())  # written whole and renamed into place
        except (OSError, ValueError):
            return None
    doc = loadgen.wait_until(written, 15)
    assert doc, "SIGUSR1 wrote no --stats-json"
    (filed,) = doc["workers"]

    assert set(live) - set(filed) == LIVE_ONLY, (sorted(live), sorted(filed))
    assert set(filed) <= set(live)
    assert (filed["worker"], filed["pid"]) == (live["worker"], live["pid"])
    assert filed["blocking_threads"].items() <= live["blocking_threads"].items()  # less the last change
    assert [(t["name"], t["role"]) for t in filed["threads"]] == [(t["name"], t["role"]) for t in live["threads"]]
    for f, e in zip(filed["threads"], live["threads"]):
        assert key_tree(f) == key_tree(e), (f, e)
        assert (f["tid"], f["requests"]) == (e["tid"], e["requests"]) == (e["tid"], n)
    (floop, fpool), (eloop, epool) = filed["threads"], live["threads"]
    assert floop["counters"]["accepts"] == eloop["counters"]["accepts"] >= n  # and the start's probe
    for k in ("submitted", "drained"):
        assert floop["counters"]["handoff"][k] == eloop["counters"]["handoff"][k] == n, k
    assert fpool["counters"]["app_calls"] == epool["counters"]["app_calls"] == n
    for k in ("taken", "completed"):
        assert fpool["counters"]["handoff"][k] == epool["counters"]["handoff"][k] == n, k


def test_stats_table_has_the_verdict(server_factory):
    srv, mport = metrics_server(server_factory, "--stats")
    hello_requests(srv.port, 10)
    srv.stop()
    log = srv.log_text()
    assert "  verdict: " in log and "advice: " in log, log[-2000:]


# ---- the verdict follows the load --------------------------------------------------------

def test_verdict_not_loaded(server_factory):
    """No load: not-loaded, or machine-bound when other work leaves no idle
    CPU (then the figure shows it); the loop and the pool idle."""
    srv, mport = metrics_server(server_factory)
    v, seen = await_verdict(mport, {"not-loaded"})
    report("no load", v)
    if v["regime"] == "machine-bound":
        assert v["figures"]["machine_busy"] >= 0.9
    else:
        assert v["regime"] == "not-loaded", seen
    assert v["figures"]["loop_util"] < 0.5 and v["figures"]["pool_util"] < 0.5


def test_verdict_requests_waiting_for_an_off_cpu_thread_are_threads_short(server_factory, tmp_path):
    """One pool thread, its request waiting on a gate with the GIL released
    (no CPU, no wakes), three more requests queued behind it: over a whole
    window requests wait for a thread that is off the CPU, so the verdict is
    threads-short whatever else the machine runs, and its advice is
    --blocking-threads."""
    import fcntl
    srv, mport = metrics_server(server_factory, "--blocking-threads", "1", app="auto_apps:application")
    gate = open(tmp_path / "gate", "wb")
    fcntl.flock(gate, fcntl.LOCK_EX)
    conns = []
    try:
        for _ in range(4):
            c = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
            c.sendall(f"GET /?gate={tmp_path / 'gate'} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
            conns.append(c)
        v, seen = await_verdict(mport, {"threads-short"})
    finally:
        fcntl.flock(gate, fcntl.LOCK_UN)
        gate.close()
    for c in conns:
        assert Reader(c).read_response().status == 200
        c.close()
    report("requests on a gate", v)
    assert v["regime"] == "threads-short", seen
    assert "--blocking-threads" in v["advice"]
    f = v["figures"]
    assert f["pool_util"] < 0.5 and f["queued_frac"] >= 0.75, f


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


def status_of(response):
    return int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/1.1 ") else None


def test_bad_input_on_the_metrics_listener(server_factory):
    srv, mport = metrics_server(server_factory)
    host = f"Host: 127.0.0.1:{mport}\r\n".encode()
    assert status_of(raw(mport, b"GET /nope HTTP/1.1\r\n" + host + b"\r\n")) == 404
    r = raw(mport, b"POST /metrics HTTP/1.1\r\n" + host + b"Content-Length: 0\r\n\r\n")
    assert status_of(r) == 405 and b"Allow: GET, HEAD" in r
    head = raw(mport, b"HEAD /metrics HTTP/1.1\r\n" + host + b"\r\n")
    assert status_of(head) == 200 and head.endswith(b"\r\n\r\n")
    # The server's own parser: what it refuses on the app's port it refuses here.
    assert status_of(raw(mport, b"GET /metrics HTTP/1.1\r\n" + host + b"X : y\r\n\r\n")) == 400
    assert status_of(raw(mport, b"GET /metrics HTTP/2.0\r\n" + host + b"\r\n")) == 505
    assert status_of(raw(mport, b"GET /metrics HTTP/1.1\r\n\r\n")) == 400  # no Host
    assert status_of(raw(mport, b"GET /metrics HTTP/1.1\nHost: 127.0.0.1\n\n")) == 400  # bare LF
    # A head that does not fit 4 KiB: 431 (414 when the request line alone
    # does not), delivered whole although the client is still sending.
    big = b"GET /metrics HTTP/1.1\r\n" + host + b"X: " + b"a" * 16384 + b"\r\n\r\n"
    assert status_of(raw(mport, big)) == 431
    assert status_of(raw(mport, b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\n" + host + b"\r\n")) == 414

    # Slow clients: more than the listener takes at once, each sending half a
    # head. The app's port serves meanwhile, and each is closed at its deadline.
    slow = [socket.create_connection(("127.0.0.1", mport), timeout=10) for _ in range(40)]
    for s in slow:
        s.sendall(b"GET /metrics HTTP/1.1\r\n")
    hello_requests(srv.port, 8, conns=2)
    closed = 0
    for s in slow[:32]:
        s.settimeout(30.0)  # only a hang: the head's deadline is 2 s
        try:
            closed += s.recv(1) == b""
        except ConnectionResetError:
            closed += 1
    assert closed == 32, "a slow metrics client was not closed at its deadline"
    for s in slow:
        s.close()
    # And the listener serves again once they are gone.
    assert get(mport, "/metrics")[0] == 200


def test_head_that_fills_the_buffer_exactly(server_factory):
    """A head of exactly 4096 bytes is answered; one byte more is 431 (under
    ASan: the scan stays inside the 4096-byte buffer either way)."""
    srv, mport = metrics_server(server_factory)
    start = f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{mport}\r\nX: ".encode()
    for size, status in ((4096, 200), (4097, 431)):
        req = start + b"a" * (size - len(start) - 4) + b"\r\n\r\n"
        assert len(req) == size
        assert status_of(raw(mport, req)) == status, size


def _ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.parametrize("family", ["ipv4", "ipv6", "unix"])
def test_host_must_name_the_metrics_listener(server_factory, tmp_path, family):
    """A page of another origin that rebinds its name to 127.0.0.1 sends
    that name in Host: a TCP metrics listener answers only Host values that
    name it (its bound address, IPv6 in brackets, or localhost, with any
    port or none) and 421 to every other, or to none; an absolute-form
    target's authority counts, not Host. A unix: listener has no name to
    rebind: any Host, or none."""
    if family == "ipv6" and not _ipv6_loopback():
        pytest.skip("no IPv6 loopback")
    mport = free_port()
    if family == "unix":
        path = str(tmp_path / "m.sock")
        server_factory("--metrics-bind", f"unix:{path}")

        def send(data):
            c = wait_connect_unix(path)
            return _exchange(c, data)
    else:
        addr = "127.0.0.1" if family == "ipv4" else "[::1]"
        server_factory("--metrics-bind", f"{addr}:{mport}")

        def send(data):
            fam = socket.AF_INET if family == "ipv4" else socket.AF_INET6
            c = socket.socket(fam)
            c.settimeout(5)
            deadline = time.monotonic() + 30
            while True:
                try:
                    c.connect(("127.0.0.1" if family == "ipv4" else "::1", mport))
                    break
                except ConnectionRefusedError:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
            return _exchange(c, data)

    def status(host, target="/metrics", version="1.1"):
        field = b"" if host is None else f"Host: {host}\r\n".encode()
        return status_of(send(f"GET {target} HTTP/{version}\r\n".encode() + field + b"\r\n"))

    if family == "unix":
        for host in ("127.0.0.1", "evil.example", "evil.example:80"):
            assert status(host) == 200, host
        assert status(None, version="1.0") == 200
        return
    own = "127.0.0.1" if family == "ipv4" else "[::1]"
    other = "[::1]" if family == "ipv4" else "127.0.0.1"
    for host in (own, f"{own}:{mport}", f"{own}:1", f"{own}:", "localhost", f"LocalHost:{mport}"):
        assert status(host) == 200, host
    # "[::1].evil.example" is not host[:port] at all; "127.0.0.1.evil.example" is a name.
    dotted = (f"{own}.evil.example",)
    for host in ("evil.example", f"evil.example:{mport}", f"{other}:{mport}", "127.0.0.2",
                 f"localhost.evil.example:{mport}", "0x7f.1") + (dotted if family == "ipv4" else ()):
        assert status(host) == 421, host
    # Not a valid Host: the parser's 400, before the listener's own check.
    for host in (f"{own}:x", f"user@{own}") + (dotted if family == "ipv6" else ()):
        assert status(host) == 400, host
    assert status(None, version="1.0") == 421
    assert status(own, target=f"http://evil.example:{mport}/metrics") == 421
    assert status("evil.example", target=f"http://{own}:{mport}/metrics") == 200


def wait_connect_unix(path, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        c = socket.socket(socket.AF_UNIX)
        c.settimeout(5)
        try:
            c.connect(path)
            return c
        except (FileNotFoundError, ConnectionRefusedError):
            c.close()
            assert time.monotonic() < deadline
            time.sleep(0.05)


def _exchange(c, data):
    """Send data, half-close, read to the end."""
    try:
        c.sendall(data)
        c.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            d = c.recv(65536)
            if not d:
                return out
            out += d
    finally:
        c.close()


def test_slow_clients_do_not_hold_the_others(server_factory):
    """Clients that send half a head and stop each hold one slot until their
    deadline, never the thread: whole requests beside them are answered,
    and each slow one is closed at its deadline without an answer. (How
    soon the others are answered: tests/perf/test_perf_metrics.py.)"""
    srv, mport = metrics_server(server_factory)
    slow = [socket.create_connection(("127.0.0.1", mport), timeout=30) for _ in range(16)]
    try:
        for s in slow:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-")
        for _ in range(5):
            assert get(mport, "/stats.json", timeout=30)[0] == 200
        for s in slow:
            try:
                assert s.recv(1) == b""
            except ConnectionResetError:
                pass
    finally:
        for s in slow:
            s.close()


def test_out_of_descriptors_the_metrics_thread_pauses(server_factory):
    """With the process out of descriptors (one worker: the metrics thread
    shares the app's process), a pending metrics client makes accept fail
    with EMFILE on a listener that stays readable: the thread pauses its
    accepts as the loop does, instead of polling again at once, so the
    process uses next to no CPU (tests/perf/test_perf_metrics.py measures
    that): the thread says it pauses, and once descriptors are free it
    serves again."""
    import resource

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    srv, mport = metrics_server(server_factory, preexec_fn=low_limit)
    conns = []
    try:
        for _ in range(80):  # more than the server's 64: its loop runs out and pauses
            conns.append(socket.create_connection(("127.0.0.1", srv.port), timeout=5))
        assert loadgen.wait_until(lambda: "pausing accepts" in srv.log_text(), 30), srv.log_text()[-2000:]
        waiting = [socket.create_connection(("127.0.0.1", mport), timeout=5) for _ in range(3)]
        conns += waiting
        assert loadgen.wait_until(lambda: "metrics: accept: " in srv.log_text(), 30), srv.log_text()[-2000:]
        assert "pausing its accepts for 100 ms at a time" in srv.log_text()
    finally:
        for c in conns:
            c.close()
    deadline = time.monotonic() + 30
    while True:
        try:
            assert get(mport, "/stats.json")[0] == 200
            break
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.1)


CORPUS = ROOT / "tests" / "corpus"
# Statuses only the head decides (the parser, the framing): the metrics
# listener, which parses with the same code, must give the same.
HEAD_STATUSES = {414, 431, 501, 505, 417}


@pytest.mark.parametrize("how", ["whole", "pieces"])
def test_corpus_on_the_metrics_listener(server_factory, how):
    """Every hostile request of tests/corpus/, sent to the metrics listener
    whole or in seeded random pieces: each gets exactly one complete
    response, with the parser's own status where the head alone decides
    it, and the listener serves on (under ASan: nothing read out of
    bounds; the server's log is checked at teardown)."""
    import random
    import re
    srv, mport = metrics_server(server_factory)
    cases = sorted(CORPUS.glob("*.http"))
    assert len(cases) > 50
    for case in cases:
        data = case.read_bytes()
        first = int((CORPUS / (case.stem + ".expect")).read_text().split()[0])
        c = socket.create_connection(("127.0.0.1", mport), timeout=10)
        if how == "whole":
            out = _exchange(c, data)
        else:
            rng = random.Random(case.stem)
            pos = 0
            try:
                while pos < len(data):
                    n = rng.randint(1, 64)
                    c.sendall(data[pos:pos + n])
                    pos += n
                    time.sleep(0.0005)
            except (BrokenPipeError, ConnectionResetError):
                pass
            out = _exchange(c, b"")
        head, sep, body = out.partition(b"\r\n\r\n")
        assert sep, f"{case.name}: no complete response: {out[:80]!r}"
        status = status_of(head)
        assert status is not None, f"{case.name}: {head[:80]!r}"
        length = int(re.search(rb"\r\nContent-Length: (\d+)\r\n", head + b"\r\n").group(1))
        assert len(body) == length, f"{case.name}: one response, and only one"
        if first in HEAD_STATUSES:
            assert status == first, f"{case.name}: {status}, the parser says {first}"
    assert get(mport, "/metrics")[0] == 200


def test_unix_socket_serves_and_is_removed_at_exit(server_factory, tmp_path):
    path = tmp_path / "m.sock"
    srv = server_factory("--metrics-bind", f"unix:{path}")
    assert loadgen.wait_until(path.exists, 30), "the metrics socket never appeared"
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(path))  # the path appears only once the socket listens
    status, body = http_get(s, "/stats.json")
    assert status == 200
    json.loads(body)
    srv.stop()
    assert not path.exists(), "the metrics socket is removed at exit"


@pytest.mark.parametrize("spec", ["no-port", "unix:", ":9100", "localhost:x"])
@pytest.mark.parametrize("how", ["--check-config", "start"])
def test_refused_addresses_before_anything_listens(spec, how):
    """What the start refuses --check-config refuses too, and the start
    refuses it before the app's port listens: one line, exit 2. An empty
    unix: path (an abstract socket, open to every local user) is one."""
    port = free_port()
    args = [BIN, "--bind", f"127.0.0.1:{port}", "--metrics-bind", spec]
    if how == "--check-config":
        args.append("--check-config")
    p = Proc(args, env=clean_env())
    try:
        assert p.wait_exit(timeout=20) == 2, p.text()
        line = one_line_error(p)
        assert "--metrics-bind" in line and "error" in line, line
    finally:
        p.close()


def _metrics_at(tmp_path, path):
    return Proc([BIN, "--bind", f"127.0.0.1:{free_port()}", "--metrics-bind", f"unix:{path}"], env=clean_env())


@pytest.mark.parametrize("what", ["file", "symlink", "live-socket"])
def test_unix_path_that_is_not_ours_is_refused_and_left(tmp_path, what):
    """--metrics-bind unix:PATH goes through --bind's checked binder: a
    regular file, a symlink or another server's live socket at PATH is
    refused (exit 2) and left exactly as it was."""
    path = tmp_path / "m.sock"
    other = None
    if what == "file":
        path.write_text("precious")
    elif what == "symlink":
        (tmp_path / "target").write_text("precious")
        os.symlink(tmp_path / "target", path)
    else:
        other = socket.socket(socket.AF_UNIX)
        other.bind(str(path))
        other.listen(8)
    p = _metrics_at(tmp_path, path)
    try:
        assert p.wait_exit(timeout=20) == 2, p.text()
        line = one_line_error(p)
        assert "--metrics-bind" in line, line
        if what == "file":
            assert path.read_text() == "precious"
        elif what == "symlink":
            assert os.readlink(path) == str(tmp_path / "target")
            assert (tmp_path / "target").read_text() == "precious"
        else:
            assert "listening" in line
            c = socket.socket(socket.AF_UNIX)
            c.connect(str(path))  # the other server still has its socket
            c.close()
    finally:
        p.close()
        if other:
            other.close()


def test_unix_socket_removed_at_exit_only_if_still_its_own(tmp_path):
    """At exit the metrics socket is removed only if PATH still holds it:
    what replaced it meanwhile stays."""
    path = tmp_path / "m.sock"
    p = _metrics_at(tmp_path, path)
    try:
        c = wait_connect(p, str(path))
        c.close()
        os.rename(path, tmp_path / "moved.sock")
        path.write_text("someone else's")
        assert p.stop() == 0, p.text()
        assert path.read_text() == "someone else's"
    finally:
        p.close()


# ---- through a reload -------------------------------------------------------------------------

def test_metrics_follow_a_reloaded_lone_worker(server_factory):
    srv, mport = metrics_server(server_factory)
    pid0 = stats(mport)["workers"][0]["pid"]
    assert pid0 == srv.proc.pid
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 30
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
    w = wait_published(mport, 10, check=lambda d: d["workers"][0]["pid"] == pid1 and
                       d["workers"][0]["requests_by_class"]["2xx"] >= 10)["workers"][0]
    assert w["pid"] == pid1 and w["requests_by_class"]["2xx"] >= 10


def _metrics_region(pid):
    """The supervisor's shared metrics region (its memfd), mapped here."""
    import mmap
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/memfd:cserve-metrics"):
            f = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDWR)
            try:
                return mmap.mmap(f, os.fstat(f).st_size)
            finally:
                os.close(f)
    raise AssertionError("no metrics region in the supervisor")


def test_worker_killed_while_publishing_is_taken_over(server_factory):
    """A worker killed while it holds its slot's seqlock leaves the slot
    locked in its name (count odd, its pid beside it): its successor takes
    the slot over and publishes, and the worker is back in /stats.json.
    The kill lands inside a publish of a few microseconds only by chance,
    so the test stops the worker, leaves its slot in that state and kills
    it."""
    import struct
    srv, mport = metrics_server(server_factory, "--workers", "2")
    wait_metrics(mport, workers=2)
    pid0 = [w["pid"] for w in stats(mport)["workers"] if w["worker"] == 0][0]
    region = _metrics_region(srv.proc.pid)
    try:
        header = 64  # magic, nslots, padded to a cache line; slot 0's sequence word first
        os.kill(pid0, signal.SIGSTOP)
        word = struct.unpack_from("<Q", region, header)[0]
        count = (word & 0xFFFFFFFF) | 1
        struct.pack_into("<Q", region, header, pid0 << 32 | count)
        os.kill(pid0, signal.SIGKILL)
    finally:
        region.close()
    deadline = time.monotonic() + 30
    while True:
        workers = {w["worker"]: w["pid"] for w in stats(mport)["workers"]}
        if workers.get(0, pid0) != pid0:
            break
        assert time.monotonic() < deadline, f"worker 0 never published again: {workers}"
        time.sleep(0.2)
    assert {w["worker"] for w in stats(mport)["workers"]} == {0, 1}


# ---- the dashboard in a browser -----------------------------------------------------------------

def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


@pytest.mark.skipif(chromium() is None,
                    reason="no headless Chromium (Debian: apt-get install chromium; scripts/setup.sh test does)")
def test_dashboard_in_a_browser(server_factory, tmp_path):
    srv, mport = metrics_server(server_factory)
    load = Load(srv.port, "/", conns=4)
    try:
        wait_published(mport, 1)  # the page's first poll has requests to show
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
    doc = wait_published(mport, 2)
    assert doc["workers"][0]["requests_by_class"]["2xx"] >= 2
