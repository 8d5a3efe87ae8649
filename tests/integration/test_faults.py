"""Faults: clients that vanish or crawl, apps that misbehave or never answer,
running out of file descriptors, signals under load. The server must keep
serving, leak nothing (fds back to baseline, RSS bounded over repeated
rounds), call every iterable's close(), and shut down cleanly. CSERVE_SOAK=1 runs the long forms (10x rounds).

Figures (memory per idle connection, RSS growth, retries) are printed: run
with -s to see them.
"""
import os
import re
import resource
import selectors
import signal
import socket
import struct
import tempfile
import threading
import time

import pytest

import loadgen
import procfs
from conftest import BIN
from httpclient import Reader, get, req
from loadgen import wait_until
from procfs import fd_count, rss_kib, settled_fds

SOAK = os.environ.get("CSERVE_SOAK") == "1"
APP = "fault_apps:app"
WSGI_APP = "wsgi_apps:application"
RECORDING_APP = "recording_apps:app"
SAN = loadgen.sanitizer(BIN)


def assert_memory(ok, msg):
    """Memory bounds hold for a release build; under a sanitizer RSS is
    dominated by shadow memory and quarantine, so they are only printed."""
    if SAN:
        if not ok:
            print(f"  (not asserted under {SAN}: {msg})")
        return
    assert ok, msg


def hello_ok(port, path="/hello", timeout=5.0):
    r = get(port, path, timeout=timeout)
    assert r.status == 200 and r.body == b"Hello, World!", r
    return r


def recording_hello_ok(port):
    r = get(port, "/hello", timeout=5)
    assert r.status == 200 and r.body == b"hello", r


def rst_close(sock):
    """Close with SO_LINGER {on, 0}: the kernel sends RST, not FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def records(path):
    try:
        with open(path) as f:
            return f.read().split("\n")[:-1]
    except FileNotFoundError:
        return []


def log_after(srv, mark, pattern, timeout=5.0):
    """Wait for regex pattern in the server log after byte offset mark."""
    found = wait_until(lambda: re.search(pattern, srv.log_text()[mark:]), timeout)
    return found


class Background:
    """A normal client making hello requests on fresh connections while a
    test does something nasty; records failures and the worst latency."""

    def __init__(self, port, interval=0.05, timeout=30.0):
        self.port, self.interval, self.timeout = port, interval, timeout
        self.ok = 0
        self.failures = []
        self.worst = 0.0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            t = time.monotonic()
            try:
                hello_ok(self.port, timeout=self.timeout)
                self.ok += 1
            except Exception as e:  # noqa: BLE001 - every failure is recorded
                self.failures.append(repr(e))
            self.worst = max(self.worst, time.monotonic() - t)
            self._stop.wait(self.interval)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(timeout=self.timeout + 5)

    def check(self, what):
        print(f"  background client during {what}: {self.ok} ok, "
              f"{len(self.failures)} failed, worst latency {self.worst * 1000:.0f} ms")
        assert not self.failures, f"normal client failed during {what}: {self.failures[:3]}"
        assert self.ok > 0, "the normal client was never served"


# ---- 10,000 idle connections ---------------------------------------------------

def test_ten_thousand_idle_connections(server_factory):
    n = int(os.environ.get("CSERVE_IDLE_CONNS", "10000"))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < n + 1000:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {n + 1000}: cannot hold {n} connections")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the server inherits it
    socks = []
    try:
        srv = server_factory("--header-timeout", "600", "--keepalive-timeout", "600",
                             "--backlog", "4096")
        pid = srv.proc.pid
        for _ in range(200):
            hello_ok(srv.port, "/")
        base_fds = settled_fds(pid)
        base_rss = rss_kib(pid)
        req = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
        t0 = time.monotonic()
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            socks.append(s)
            if i % 2 == 0:  # half of them idle after one keep-alive exchange
                # one request at a time: requests piled up in flight would
                # grow the job free list to their peak, which is not what
                # an idle connection costs
                s.sendall(req)
                r = Reader(s).read_response()
                assert r.status == 200, r
        held = wait_until(lambda: fd_count(pid) >= base_fds + n, 30)
        t_open = time.monotonic() - t0
        assert held, f"server holds {fd_count(pid) - base_fds} of {n} connections"
        rss = rss_kib(pid)
        per_conn = (rss - base_rss) * 1024 / n
        print(f"\n  {n} idle connections (half after one request) opened in {t_open:.1f}s: "
              f"RSS {base_rss} -> {rss} KiB = {per_conn:.0f} bytes per idle connection; "
              f"fds {base_fds} -> {fd_count(pid)}")
        # README: ~2.6 KB each. Measured here (jemalloc): 2508-2510 bytes on a
        # quiet machine, 3206-3516 with both vCPUs contended (the
        # allocator's caches fill differently). 5.5 KiB: a page, or a 4 KiB
        # buffer, more per connection than the quiet figure fails it.
        assert_memory(per_conn < 5632, f"{per_conn:.0f} bytes per idle connection, README says ~2.6 KB")
        # still serving new clients, and the idle ones too
        for _ in range(20):
            hello_ok(srv.port, "/")
        for s in (socks[1], socks[n - 1], socks[0]):
            s.sendall(req)
            assert Reader(s).read_response().status == 200
        for s in socks:
            s.close()
        socks = []
        back = wait_until(lambda: fd_count(pid) <= base_fds, 30)
        print(f"  after close: fds {fd_count(pid)} (baseline {base_fds}), RSS {rss_kib(pid)} KiB")
        assert back, f"fds {fd_count(pid)} did not return to baseline {base_fds}"
        hello_ok(srv.port, "/")
    finally:
        for s in socks:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize("how", ["fin", "rst"])
def test_client_gone_while_app_runs_then_body_read_does_not_hang(server_factory, how):
    """The client sends part of a body and leaves (FIN or RST) while the app
    is still busy; the app then reads: first the bytes still queued in the
    socket (a short read), then the end. The peer's shutdown was the
    connection's last readiness edge, so after that short read the loop must
    still read on, not wait for an edge that never comes (which would hang
    the app until --io-timeout, and every request queued behind it)."""
    srv = server_factory("--io-timeout", "60", app=APP)
    fd, logpath = tempfile.mkstemp(prefix="cserve-close-")
    os.close(fd)
    try:
        for i in range(3):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.sendall(b"POST /upload?log=%s&id=%d&delay=0.3 HTTP/1.1\r\nHost: localhost\r\n"
                      b"Content-Length: 200000\r\n\r\n" % (logpath.encode(), i))
            s.sendall(b"u" * 100_000)
            assert wait_until(lambda: f"upload-start {i}" in records(logpath), 30, 0.002)
            if how == "rst":
                rst_close(s)
            else:
                s.shutdown(socket.SHUT_WR)
            t0 = time.monotonic()
            done = wait_until(lambda: f"upload {i}" in records(logpath), 30, 0.01)
            s.close()
            assert done, (f"round {i}: the app's close() not called {time.monotonic() - t0:.1f}s "
                          f"after the client left\n{srv.log_text()[-2000:]}")
        hello_ok(srv.port)
    finally:
        os.unlink(logpath)

# ---- clients that vanish -------------------------------------------------------

ROUNDS = 6000 if SOAK else 600
WARMUP = 100
HALF_HEAD = b"GET /hello HTTP/1.1\r\nHost: localhost\r\nUser-Agent: vanish"


def _vanish_round(port, mode, logpath, i):
    """One client that goes away; returns the close() record expected, if any."""
    rst = mode.endswith("-rst")
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    expect = None
    if mode.startswith("mid-head"):
        s.sendall(HALF_HEAD)
        time.sleep(0.002)
    elif mode.startswith("mid-upload"):
        total = 200_000
        s.sendall(b"POST /upload?log=%s&id=%d HTTP/1.1\r\nHost: localhost\r\n"
                  b"Content-Length: %d\r\n\r\n" % (logpath.encode(), i, total))
        s.sendall(b"u" * (total // 2))
        started = wait_until(lambda: f"upload-start {i}" in records(logpath), 30, 0.002)
        assert started, f"round {i}: the upload app never started"
        expect = f"upload {i}"
    elif mode.startswith("mid-response"):
        s.sendall(b"GET /stream?log=%s&id=%d HTTP/1.1\r\nHost: localhost\r\n\r\n"
                  % (logpath.encode(), i))
        got = 0
        while got < 100_000:
            d = s.recv(65536)
            assert d, f"round {i}: stream ended after {got} bytes"
            got += len(d)
        expect = f"stream {i}"
    if rst:
        rst_close(s)
    else:
        s.close()
    return expect


@pytest.mark.parametrize("mode", ["mid-head", "mid-head-rst", "mid-upload", "mid-upload-rst",
                                  "mid-response", "mid-response-rst"])
def test_vanishing_clients_leak_nothing(server_factory, mode):
    srv = server_factory("--io-timeout", "20", app=APP)
    pid = srv.proc.pid
    fd, logpath = tempfile.mkstemp(prefix="cserve-close-")
    os.close(fd)
    try:
        for _ in range(20):
            hello_ok(srv.port)
        base_fds = settled_fds(pid)
        expected = []

        def closes():
            return [r for r in records(logpath) if not r.split()[0].endswith("-start")]
        t0 = time.monotonic()
        with Background(srv.port) as bg:
            for i in range(ROUNDS):
                if i == WARMUP:
                    # let the warm-up rounds finish before the RSS baseline
                    wait_until(lambda: len(closes()) >= len(expected), 10)
                    wait_until(lambda: fd_count(pid) <= base_fds, 10)
                    rss_warm = rss_kib(pid)
                try:
                    e = _vanish_round(srv.port, mode, logpath, i)
                except AssertionError as err:
                    raise AssertionError(f"{err}\nserver log (tail):\n{srv.log_text()[-3000:]}") from None
                if e:
                    expected.append(e)
        elapsed = time.monotonic() - t0
        wait_until(lambda: len(closes()) >= len(expected), 30)
        back = wait_until(lambda: fd_count(pid) <= base_fds, 30)
        rss_end = rss_kib(pid)
        growth = rss_end - rss_warm
        print(f"\n  {mode}: {ROUNDS} rounds in {elapsed:.1f}s; fds {fd_count(pid)} (baseline {base_fds}); "
              f"RSS after warm-up {rss_warm} KiB, end {rss_end} KiB, growth {growth} KiB "
              f"({growth * 1024 / (ROUNDS - WARMUP):.0f} bytes/round); close() calls "
              f"{len(closes())}/{len(expected)}")
        bg.check(mode)
        missing = sorted(set(expected) - set(closes()), key=lambda r: int(r.split()[1]))
        assert not missing, f"close() not called for {len(missing)} requests, e.g. {missing[:5]}"
        assert back, f"fds {fd_count(pid)} did not return to baseline {base_fds}"
        # RSS after warm-up still steps up by a few hundred KiB while the
        # allocators' caches settle (measured: up to 428 KiB in rounds 20-200
        # on a CI machine, then no more over 2000 rounds), so the signal
        # must be large beside that plateau: leaking one idle connection's
        # worth (~2.6 KB) per round is 1270 KiB over the 500 rounds measured.
        limit = 768 if not SOAK else 2048
        assert_memory(growth < limit, f"RSS grew {growth} KiB over {ROUNDS - WARMUP} rounds")
        assert srv.proc.poll() is None
        hello_ok(srv.port)
    finally:
        os.unlink(logpath)


# ---- slowloris -------------------------------------------------------------------

def test_slowloris_closed_at_header_timeout(server_factory):
    nconn = 1000 if SOAK else 200
    timeout = 1.0
    srv = server_factory("--header-timeout", str(timeout), app=APP)
    pid = srv.proc.pid
    hello_ok(srv.port)
    base_fds = settled_fds(pid)
    head = b"GET /hello HTTP/1.1\r\nHost: localhost\r\n" + b"X-Slow: " + b"a" * 4000
    sel = selectors.DefaultSelector()
    conns = {}
    for _ in range(nconn):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        conns[s] = {"t0": time.monotonic(), "sent": 0, "closed": None, "got": b""}
        sel.register(s, selectors.EVENT_READ)

    def mark_closed(s):
        st = conns[s]
        if st["closed"] is None:
            st["closed"] = time.monotonic() - st["t0"]
            sel.unregister(s)
            s.close()

    stop_at = time.monotonic() + timeout + 10
    with Background(srv.port, interval=0.05, timeout=5.0) as bg:
        next_drip = time.monotonic()
        while time.monotonic() < stop_at and any(c["closed"] is None for c in conns.values()):
            now = time.monotonic()
            if now >= next_drip:
                for s, st in list(conns.items()):
                    if st["closed"] is None:
                        try:
                            s.send(head[st["sent"]:st["sent"] + 1])
                            st["sent"] += 1
                        except (BlockingIOError, InterruptedError):
                            pass
                        except OSError:
                            mark_closed(s)
                next_drip = now + 0.3
            for key, _ in sel.select(timeout=max(0.0, min(0.05, next_drip - time.monotonic()))):
                s = key.fileobj
                try:
                    d = s.recv(4096)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    mark_closed(s)
                    continue
                if d:
                    conns[s]["got"] += d
                else:
                    mark_closed(s)
    for s, st in conns.items():
        if st["closed"] is None:
            s.close()
    times = sorted(st["closed"] for st in conns.values() if st["closed"] is not None)
    open_left = nconn - len(times)
    got = [st["got"] for st in conns.values() if st["got"]]
    print(f"\n  slowloris: {nconn} connections dribbling 1 byte/0.3s, --header-timeout {timeout}: "
          f"{len(times)} closed, first at {times[0] if times else -1:.2f}s, last at "
          f"{times[-1] if times else -1:.2f}s; {len(got)} got a response "
          f"({got[0][:40] if got else b''!r})")
    bg.check("slowloris")
    assert open_left == 0, f"{open_left} slowloris connections still open after {timeout + 10}s"
    assert times[0] >= 0.8 * timeout, f"closed after {times[0]:.2f}s, before the {timeout}s header timeout"
    assert times[-1] <= timeout + 4, f"last closed {times[-1]:.2f}s after connecting"
    # README: "closed, nothing sent"
    assert not got, f"{len(got)} timed-out partial heads got a response, e.g. {got[0][:80]!r}"
    assert wait_until(lambda: fd_count(pid) <= base_fds, 10), "fds did not return to baseline"


# ---- apps that misbehave ----------------------------------------------------------

def test_app_raises_gives_500_and_logs(server_factory):
    srv = server_factory(app=APP)
    mark = len(srv.log_text())
    msg = f"boom{os.getpid()}x{time.monotonic_ns()}"
    r = get(srv.port, f"/raise?msg={msg}")
    assert r.status == 500, r
    assert log_after(srv, mark, rf"RuntimeError.*{msg}"), \
        f"no traceback with 'RuntimeError: {msg}' in log:\n{srv.log_text()[mark:][-2000:]}"
    hello_ok(srv.port)
    # and repeatedly, on one keep-alive connection interleaved with good requests
    with srv.connect() as s:
        rd = Reader(s)
        for i in range(50):
            s.sendall(b"GET /raise?msg=x HTTP/1.1\r\nHost: l\r\n\r\nGET /hello HTTP/1.1\r\nHost: l\r\n\r\n")
            r1 = rd.read_response()
            assert r1.status == 500, r1
            if r1.header("connection", "").lower() == "close":
                break  # the server may close after a 500; then use a new connection
            r2 = rd.read_response()
            assert r2.status == 200 and r2.body == b"Hello, World!"
    hello_ok(srv.port)


@pytest.mark.parametrize("path", ["/nonbytes", "/nonbytes-list"])
def test_app_returns_non_bytes_gives_500_and_logs(server_factory, path):
    srv = server_factory(app=APP)
    fd, logpath = tempfile.mkstemp(prefix="cserve-close-")
    os.close(fd)
    try:
        mark = len(srv.log_text())
        r = get(srv.port, f"{path}?log={logpath}&id=1")
        assert r.status == 500, r
        # the bad item's type is named: a list's item by its index, a
        # generator's by what it yielded
        what = "yielded str" if path == "/nonbytes" else "body item 0 is str"
        assert log_after(srv, mark, rf"error: app failed \(GET {path}[?][^)]*\)\n"
                                    rf"TypeError: the app(?:'s)? {what}, not bytes"), \
            f"no log line naming the bad body item:\n{srv.log_text()[mark:][-2000:]}"
        if path == "/nonbytes":
            assert wait_until(lambda: "nonbytes 1" in records(logpath), 5), "close() not called"
        hello_ok(srv.port)
    finally:
        os.unlink(logpath)


def test_app_raises_mid_stream_closes_without_last_chunk(server_factory):
    srv = server_factory(app=APP)
    fd, logpath = tempfile.mkstemp(prefix="cserve-close-")
    os.close(fd)
    try:
        mark = len(srv.log_text())
        with srv.connect() as s:
            s.sendall(b"GET /raise-mid?msg=midfail42&log=%s&id=7 HTTP/1.1\r\nHost: l\r\n\r\n"
                      % logpath.encode())
            data = b""
            s.settimeout(5)
            deadline = time.monotonic() + 10
            eof = False
            while time.monotonic() < deadline:
                try:
                    d = s.recv(65536)
                except ConnectionResetError:
                    eof = True
                    break
                if not d:
                    eof = True
                    break
                data += d
        assert eof, f"connection not closed after the app raised mid-body: {data!r}"
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 "), data
        assert b"transfer-encoding: chunked" in head.lower(), head
        assert b"partial-body;" in body
        assert not body.endswith(b"0\r\n\r\n"), f"a failed body was terminated as complete: {body!r}"
        assert wait_until(lambda: "raise-mid 7" in records(logpath), 5), "close() not called"
        assert log_after(srv, mark, r"ValueError.*midfail42"), srv.log_text()[mark:][-2000:]
        hello_ok(srv.port)
    finally:
        os.unlink(logpath)


def test_app_reference_cycles_are_collected(server_factory):
    """Each /cycle request leaves 512 KiB in an unreachable reference cycle: if
    the server's interpreter never runs the cycle collector, 1000 requests
    hold 500 MB."""
    srv = server_factory(app=APP)
    pid = srv.proc.pid
    with srv.connect() as s:
        rd = Reader(s)
        for _ in range(20):
            s.sendall(b"GET /cycle HTTP/1.1\r\nHost: l\r\n\r\n")
            assert rd.read_response().status == 200
        before = rss_kib(pid)
        for _ in range(1000):
            s.sendall(b"GET /cycle HTTP/1.1\r\nHost: l\r\n\r\n")
            assert rd.read_response().status == 200
        after = rss_kib(pid)
        s.sendall(b"GET /cycle-stats HTTP/1.1\r\nHost: l\r\n\r\n")
        finalized = int(rd.read_response().body)
    print(f"\n  1000 cycle requests: RSS {before} -> {after} KiB, {finalized} of 2040 nodes finalized")
    assert_memory(after - before < 200 * 1024, f"RSS grew {after - before} KiB: cycles not collected")
    assert finalized > 1000


def test_app_that_leaks_does_not_stop_the_server(server_factory):
    srv = server_factory(app=APP)
    with srv.connect() as s:
        rd = Reader(s)
        for i in range(1, 2001):  # 20 MB kept forever by the app
            s.sendall(b"GET /grow HTTP/1.1\r\nHost: l\r\n\r\n")
            r = rd.read_response()
            assert r.status == 200 and r.body == b"%d" % i, r
    hello_ok(srv.port)


def test_app_that_never_answers_is_cut_off(server_factory, handoff):
    """A request whose app never answers does not hold its client forever:
    the app's time is bounded by --io-timeout like every other stall."""
    # killed: the app is still asleep at the end, past any graceful stop
    srv = server_factory("--io-timeout", "1", app=WSGI_APP, handoff=handoff, killed=True)
    with srv.connect(timeout=10) as s:
        # the app sleeps 300 s; the client's 60 s only detects a server
        # that waits for it (a timeout raises socket.timeout, not these)
        s.settimeout(60)
        s.sendall(b"GET /sleep?s=300 HTTP/1.1\r\nHost: x\r\n\r\n")
        r = Reader(s)
        with pytest.raises((EOFError, ConnectionResetError)):
            r.read_response()
    # the stuck thread does not take the server with it (other workers, or
    # the same one once the sleep ends, serve the next request)
    srv.proc.kill()


def test_sigterm_exits_within_graceful_timeout_while_app_blocks(server_factory):
    srv = server_factory("--graceful-timeout", "1", app=APP)
    fd, logpath = tempfile.mkstemp(prefix="cserve-close-")
    os.close(fd)
    try:
        s = srv.connect(timeout=40)
        s.sendall(b"GET /sleep?s=300&log=%s&id=1 HTTP/1.1\r\nHost: l\r\n\r\n" % logpath.encode())
        assert wait_until(lambda: "sleep-start 1" in records(logpath), 30), "app never started"
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        try:
            rc = srv.proc.wait(timeout=60)
        except Exception:
            rc = None
        took = time.monotonic() - t0
        print(f"\n  SIGTERM with a request sleeping 300s, --graceful-timeout 1: exited {rc} after {took:.2f}s")
        # 60 s only detects a server that waits for the app (300 s)
        assert rc is not None, "still running 60s after SIGTERM"
        # README: exit 0 within --graceful-timeout; it waits that long for the app first
        assert rc == 0, f"exit status {rc} after a forced graceful stop:\n{srv.log_text()[-2000:]}"
        # it waits --graceful-timeout for the app first (less the coarse
        # clock's few ms); how late after that it exits is the scheduler's
        assert took >= 1 - 0.1, f"exit took {took:.2f}s with --graceful-timeout 1"
        log = srv.log_text()
        assert "warning: graceful timeout: 1 request(s) still with the app" in log, log[-2000:]
        assert "warning: exiting with 1 request(s) unfinished" in log, log[-2000:]
        s.settimeout(30)
        try:
            tail = s.recv(65536)
        except ConnectionResetError:
            tail = b""
        s.close()
        assert tail == b"" or tail.startswith(b"HTTP/1.1 5"), f"after forced shutdown the client got {tail!r}"
    finally:
        os.unlink(logpath)


# ---- SIGTERM under load --------------------------------------------------------------

class _CountingReader(Reader):
    def __init__(self, sock):
        super().__init__(sock)
        self.nbytes = 0

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            self.eof = True
            raise EOFError("connection closed")
        self.nbytes += len(data)
        self.buf += data


def test_sigterm_under_load_drops_nothing(server_factory):
    """'Dropped' = a request written on a connection whose previous response
    was complete (and did not say Connection: close) that then got a partial
    response, or no response. The one exception, retryable and counted, is
    RFC 9112 §9.3.1's keep-alive race: zero response bytes on a reused
    connection (the server closed it as idle just as the request went out);
    the server must not have processed such a request (access log)."""
    graceful = 10
    nthreads = 8
    acc_fd, acclog = tempfile.mkstemp(prefix="cserve-access-")
    os.close(acc_fd)
    srv = server_factory("--graceful-timeout", str(graceful), f"--access-log={acclog}",
                         "--blocking-threads", "2", app=APP)
    sigterm_sent = threading.Event()
    lock = threading.Lock()
    st = {"ok": 0, "close_signalled": 0, "retryable": [], "dropped": [], "partial": [],
          "wrong": [], "not_closed_after_close": 0, "after_sigterm_ok": 0, "latencies": []}
    started = [0] * nthreads

    def client(t):
        s = srv.connect(timeout=graceful + 5)
        rd = _CountingReader(s)
        k = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rid = f"{t}-{k}"
            k += 1
            if rd.buf:
                with lock:
                    st["wrong"].append((rid, f"stray bytes before request: {rd.buf[:80]!r}"))
                break
            before = rd.nbytes
            t_req = time.monotonic()
            try:
                s.sendall(b"GET /work?ms=3&id=%s HTTP/1.1\r\nHost: l\r\n\r\n" % rid.encode())
                r = rd.read_response()
            except (EOFError, ConnectionResetError, BrokenPipeError, socket.timeout) as e:
                got = rd.nbytes - before
                with lock:
                    if got == 0 and not isinstance(e, socket.timeout):
                        st["retryable"].append(rid)
                    elif got == 0:
                        st["dropped"].append((rid, "no response, connection left open"))
                    else:
                        st["partial"].append((rid, got, rd.buf[:120]))
                if not sigterm_sent.is_set() and got == 0:
                    s.close()  # retry the idempotent request on a new connection
                    s = srv.connect(timeout=graceful + 5)
                    rd = _CountingReader(s)
                    continue
                break
            if r.status != 200 or r.body != f"id={rid}".encode():
                with lock:
                    st["wrong"].append((rid, repr(r)))
                break
            with lock:
                st["ok"] += 1
                if sigterm_sent.is_set():
                    st["after_sigterm_ok"] += 1
                else:
                    st["latencies"].append(time.monotonic() - t_req)
            started[t] += 1
            if (r.header("connection") or "").lower() == "close":
                with lock:
                    st["close_signalled"] += 1
                if not rd.closed(timeout=5):
                    with lock:
                        st["not_closed_after_close"] += 1
                break
        s.close()

    threads = [threading.Thread(target=client, args=(t,), daemon=True) for t in range(nthreads)]
    for th in threads:
        th.start()
    assert wait_until(lambda: min(started) >= 20, 30), f"clients did not get going: {started}"
    t0 = time.monotonic()
    sigterm_sent.set()
    srv.proc.send_signal(signal.SIGTERM)
    try:
        rc = srv.proc.wait(timeout=graceful + 10)
    except Exception:
        rc = None
    took = time.monotonic() - t0
    for th in threads:
        th.join(timeout=graceful + 10)
    alive = sum(th.is_alive() for th in threads)
    with open(acclog, errors="replace") as f:
        access = f.read()
    os.unlink(acclog)
    print(f"\n  SIGTERM under load ({nthreads} keep-alive clients back to back): exit {rc} after "
          f"{took:.2f}s; {st['ok']} ok ({st['after_sigterm_ok']} completed after SIGTERM), "
          f"{st['close_signalled']} with Connection: close, retries {len(st['retryable'])} "
          f"{st['retryable'][:8]}, dropped {len(st['dropped'])}, partial {len(st['partial'])}, "
          f"wrong {len(st['wrong'])}; access log {access.count(chr(10))} lines")
    assert rc == 0, f"exit status {rc} after SIGTERM:\n{srv.log_text()[-2000:]}"
    # What is in flight at SIGTERM is at most one 3 ms request per client:
    # the stop drains it, it never reaches the graceful timeout (how soon
    # it exits is tests/perf/test_perf_faults.py's).
    assert "graceful timeout" not in srv.log_text(), srv.log_text()[-2000:]
    assert alive == 0, "client threads still waiting after the server exited"
    assert not st["partial"], f"partial responses: {st['partial'][:3]}"
    assert not st["dropped"], f"dropped: {st['dropped'][:3]}"
    assert not st["wrong"], f"wrong responses: {st['wrong'][:3]}"
    assert st["not_closed_after_close"] == 0, "Connection: close but the connection stayed open"
    # with 8 clients back to back on a 3 ms app, requests were in flight at
    # SIGTERM: they must have been finished with Connection: close
    assert st["close_signalled"] >= 1, "no in-flight request was finished with Connection: close"
    # the access log has a line per answered request, with its id in the target
    answered = len(re.findall(r'"GET /work\?ms=3&id=\d+-\d+ HTTP/1\.1" 200 ', access))
    assert answered == st["ok"], f"access log has {answered} lines for {st['ok']} answered requests"
    processed = [rid for rid in st["retryable"] if re.search(rf"id={re.escape(rid)}(?![\d-])", access)]
    assert not processed, (f"requests that got zero response bytes were processed by the "
                           f"server (access log): {processed[:5]} — their responses were lost")


# ---- out of file descriptors ---------------------------------------------------------

def test_out_of_fds_pauses_accepts_and_keeps_serving(server_factory):
    """With RLIMIT_NOFILE at 64 the server runs out of descriptors: accept(2)
    fails with EMFILE, the server logs it and pauses accepting (instead of
    spinning on a listener that stays readable), keeps serving the
    connections it has, and accepts the waiting ones once descriptors are
    free again."""
    limit = 64

    def low_nofile():
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    # Sorting the connections below waits 0.2 s on each waiting one (seconds
    # in all), so the served ones sit idle meanwhile: a keep-alive timeout
    # far longer than that keeps them open for the second round.
    srv = server_factory("--keepalive-timeout", "60", app=RECORDING_APP, preexec_fn=low_nofile)
    recording_hello_ok(srv.port)
    socks = []
    for i in range(limit + 16):
        s = srv.connect(timeout=10)
        s.sendall(req("GET", f"/hello?i={i}"))
        socks.append(s)
    assert wait_until(lambda: "pausing accepts for 100 ms" in srv.log_text(), 5), srv.log_text()[-2000:]
    assert "accept: Too many open files; pausing accepts for 100 ms" in srv.log_text()

    def answered(s, timeout):
        s.settimeout(timeout)
        try:
            return Reader(s).read_response().status == 200
        except socket.timeout:
            return False
    t_first = time.monotonic()
    served = [s for s in socks if answered(s, 0.2)]
    waiting = [s for s in socks if s not in served]
    print(f"\n  RLIMIT_NOFILE {limit}: {len(served)} connections served, {len(waiting)} waiting")
    assert served and waiting, (len(served), len(waiting))
    # the connections it has keep being served
    for s in served[:5]:
        s.settimeout(5)
        s.sendall(req("GET", "/hello"))
        assert Reader(s).read_response().body == b"hello"
    # free descriptors: the waiting connections are accepted and answered
    for s in served:
        s.close()
    for s in waiting:
        assert answered(s, 5), "a connection waiting for a descriptor was never served"
        s.close()
    # paused, not spinning: at most one EMFILE per 100 ms pause (a loop that
    # retried accept at once would log thousands)
    pauses = srv.log_text().count("pausing accepts for 100 ms")
    elapsed = time.monotonic() - t_first + 1.0
    assert pauses <= elapsed / 0.1 + 5, f"{pauses} EMFILE warnings in {elapsed:.1f}s: accepts not paused"
    recording_hello_ok(srv.port)


# ---- SIGKILL of a worker ----------------------------------------------------------

SERVING = re.compile(r"\] info: worker \d+: serving")


def test_sigkill_worker_is_respawned_and_listener_keeps_answering(server_factory):
    srv = server_factory("--workers", "2", app=APP)
    sup = srv.proc.pid
    workers = wait_until(lambda: len(procfs.children(sup)) == 2 and procfs.children(sup), 15)
    assert workers, f"expected 2 worker processes under {sup}, found {procfs.children(sup)}"
    known = set(workers)
    results = []  # (t_start, ok, pid or error, t_end)
    stop = threading.Event()

    def client():
        while not stop.is_set():
            t = time.monotonic()
            try:
                r = get(srv.port, "/pid", timeout=30)
                results.append((t, r.status == 200, int(r.body) if r.status == 200 else r.status,
                                time.monotonic()))
            except Exception as e:  # noqa: BLE001 - recorded
                results.append((t, False, repr(e), time.monotonic()))
            stop.wait(0.005)  # bounded rate: fresh connections leave TIME_WAITs
    threads = [threading.Thread(target=client, daemon=True) for _ in range(4)]
    try:
        for th in threads:
            th.start()
        assert wait_until(lambda: sum(r[1] for r in results) >= 20, 30), f"no load: {results[:3]}"
        victim = workers[0]
        served = len(SERVING.findall(srv.log_text()))
        t_kill = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        new = wait_until(lambda: set(procfs.children(sup)) - known, 30)
        # The supervisor reaped the victim before it started the new one:
        # the victim's sockets are closed, so every connection made from
        # now on reaches a live worker.
        t_new = time.monotonic()
        known |= set(new or ())
        assert wait_until(lambda: sum(r[0] >= t_new for r in list(results)) >= 20, 30), "no load after the respawn"
        stop.set()
        for th in threads:
            th.join(timeout=30)
        # "before": answered (or failed) before the kill. A request still in
        # flight at the kill, or made before the victim was gone, may die
        # with the worker: it counts as "during".
        before = [r for r in results if r[3] < t_kill]
        during = [r for r in results if r[3] >= t_kill and r[0] < t_new]
        after = [r for r in results if r[0] >= t_new]
        print(f"\n  --workers 2: killed {victim}; new worker {sorted(new or [])} seen after {t_new - t_kill:.2f}s; "
              f"requests before {len(before)} ({sum(not r[1] for r in before)} failed), until the "
              f"respawn {len(during)} ({sum(not r[1] for r in during)} failed), "
              f"after {len(after)} ({sum(not r[1] for r in after)} failed)")
        assert new, "no new worker process appeared after SIGKILL"
        assert srv.proc.poll() is None, "the supervisor died"
        assert not [r for r in before if not r[1]], "failures before the kill"
        bad = [r for r in after if not r[1]]
        assert not bad, f"requests failed after the respawn: {bad[:3]}"
        assert len(after) >= 20
        assert all(r[2] != victim for r in after), "the killed worker answered after its death"
        # The respawned worker takes its share once it has imported the app
        # (its socket listens from then on; a sanitizer build imports
        # slowly): fresh connections spread over the SO_REUSEPORT group.
        assert wait_until(lambda: len(SERVING.findall(srv.log_text())) > served, 60), srv.log_text()[-3000:]
        pids = set()
        deadline = time.monotonic() + 30
        while not set(new) & pids and time.monotonic() < deadline:
            r = get(srv.port, "/pid", timeout=5)
            assert r.status == 200
            pids.add(int(r.body))
        assert set(new) & pids, f"the new worker never answered; answered by {pids}"
        assert srv.stop(signal.SIGTERM, timeout=15) == 0
        gone = wait_until(lambda: not any(procfs.alive(p) for p in known), 10)
        assert gone, "worker processes outlived the supervisor"
    finally:
        stop.set()
        for p in known:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass

