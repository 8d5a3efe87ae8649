"""Load: many keep-alive connections with pipelining; nothing lost, nothing wrong.

Every response is compared byte for byte with the expected one (only the Date
value may differ), over every handoff backend. Short forms run in `make test`;
CSERVE_SOAK=1 switches to the long forms (10x the requests).
CSERVE_LOAD_SCALE=0.1 scales the request counts (e.g. for a TSan build).
"""
import os
import random
import socket
import threading

import pytest

import loadgen
import procfs
from loadgen import HELLO, Kind, Spec, learn_template

from conftest import BIN

SOAK = os.environ.get("CSERVE_SOAK") == "1"
SAN = loadgen.sanitizer(BIN)
RSS_SLACK_KIB = 8 * 1024  # after warm-up; a 100-byte-per-request leak is 10 MB per 10^5
SCALE = float(os.environ.get("CSERVE_LOAD_SCALE", "1"))
CONNS = 64
DEPTH = 16


def n_requests(short):
    return max(1000, int(short * (10 if SOAK else 1) * SCALE))


def report(name, res, srv=None):
    extra = ""
    if srv is not None and srv.proc.poll() is None:
        extra = f" rss={procfs.rss_kib(srv.proc.pid)} KiB"
    print(f"\n{name}: {res.done}/{res.expected} responses over {res.connections} conns "
          f"depth {DEPTH} in {res.elapsed:.2f}s = {res.rps:.0f} rps, "
          f"{len(res.errors)} errors{extra}")
    for e in res.errors:
        print("  error:", e)


def assert_clean(res, srv):
    assert not res.errors, f"{len(res.errors)} connections failed; first: {res.errors[:3]}"
    assert res.done == res.expected
    assert srv.proc.poll() is None, f"server died:\n{srv.log_text()[-3000:]}"


def loaded(name, srv, specs, n):
    """A warm-up run of n/10, then the measured run of n: every response
    verified, and the server's RSS must not grow across the measured run
    (memory per request that is never given back is a leak)."""
    warm = loadgen.run(srv.port, specs, max(2000, n // 10), CONNS, DEPTH, timeout=600)
    assert_clean(warm, srv)
    rss0 = procfs.rss_kib(srv.proc.pid)
    res = loadgen.run(srv.port, specs, n, CONNS, DEPTH, timeout=600)
    report(name, res, srv)
    assert_clean(res, srv)
    growth = procfs.rss_kib(srv.proc.pid) - rss0
    print(f"  RSS growth over {n} requests after warm-up: {growth} KiB "
          f"({growth * 1024 / n:.1f} bytes/request)")
    if SAN:
        print(f"  (RSS bound not asserted under {SAN})")
    else:
        assert growth < RSS_SLACK_KIB, (f"RSS grew {growth} KiB over {n} requests "
                                        f"({growth * 1024 / n:.0f} bytes/request): a leak per request")
    return res


# ---- the checker itself must be able to fail ---------------------------------

def _fake_server(corrupt):
    """A Python HTTP server that answers hello, but corrupts response #7 on
    its second connection as `corrupt` says. Returns (port, stop)."""
    good_head = (b"HTTP/1.1 200 OK\r\nServer: cserve\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                 b"Content-Type: text/plain\r\nContent-Length: 13\r\n\r\n")
    good = good_head + b"Hello, World!"
    variants = {
        "body": good[:-1] + b"?",
        "date": good.replace(b"08:49:37 GMT", b"08:49:37 UTC"),
        "header": good.replace(b"Server: cserve", b"Server: cservx"),
        "extra-header": good.replace(b"\r\n\r\n", b"\r\nX-Extra: 1\r\n\r\n"),
        "short": b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n",
        "close": b"",  # closes instead of answering
    }
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(128)
    lsock.settimeout(0.2)
    stop = threading.Event()
    nconn = [0]

    def serve(c, idx):
        buf = b""
        k = 0
        c.settimeout(0.2)
        with c:
            while not stop.is_set():
                try:
                    d = c.recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    return
                if not d:
                    return
                buf += d
                out = []
                while b"\r\n\r\n" in buf:
                    _, buf = buf.split(b"\r\n\r\n", 1)
                    if idx == 1 and k == 7 and corrupt != "none":
                        if corrupt == "close":
                            c.sendall(b"".join(out))
                            return
                        out.append(variants[corrupt])
                    else:
                        out.append(good)
                    k += 1
                c.sendall(b"".join(out))

    def accept_loop():
        while not stop.is_set():
            try:
                c, _ = lsock.accept()
            except socket.timeout:
                continue
            threading.Thread(target=serve, args=(c, nconn[0]), daemon=True).start()
            nconn[0] += 1
        lsock.close()

    threading.Thread(target=accept_loop, daemon=True).start()
    return lsock.getsockname()[1], stop


@pytest.mark.parametrize("corrupt", ["none", "body", "date", "header", "extra-header", "short", "close"])
def test_loadgen_checker_detects_corruption(corrupt):
    port, stop = _fake_server(corrupt)
    try:
        specs = loadgen.hello_specs(port)  # reference from connection 0 (good)
        res = loadgen.run(port, specs, total=2000, conns=4, depth=8, timeout=10.0)
    finally:
        stop.set()
    if corrupt == "none":
        assert not res.errors and res.done == 2000, res.errors
    else:
        assert len(res.errors) == 1, res.errors
        assert res.errors[0][0] == 0  # the corrupted connection (the fake server's 2nd), only it
        assert res.done < 2000


# ---- the real server -----------------------------------------------------------

def test_load_hello_pipelined(server_factory, handoff):
    srv = server_factory(handoff=handoff)
    loaded(f"hello/{handoff}", srv, loadgen.hello_specs(srv.port), n_requests(100_000))


def test_load_blocking_threads_4(server_factory, handoff):
    srv = server_factory("--blocking-threads", "4", handoff=handoff)
    loaded(f"hello/{handoff}/blocking-threads=4", srv, loadgen.hello_specs(srv.port),
           n_requests(100_000))


DIGEST = lambda body: Kind(  # noqa: E731
    b"HTTP/1.1 200 OK",
    {"content-type": "text/plain", "content-length": "51", "server": "cserve"},
    __import__("hashlib").sha1(body).hexdigest().encode() + b" " + b"%010d" % len(body),
    optional={"connection": "keep-alive"})


def _chunked(body, rng):
    out, pos = [], 0
    while pos < len(body):
        n = min(len(body) - pos, rng.randint(1, 9000))
        out.append(b"%x\r\n" % n + body[pos:pos + n] + b"\r\n")
        pos += n
    return b"".join(out) + b"0\r\n\r\n"


def post_mix_specs(port):
    """GETs and POSTs (Content-Length and chunked bodies of many sizes)
    interleaved on every connection; each POST's response is the body's
    sha1 and length, so a body mixed up with another request's shows."""
    rng = random.Random(1234)
    hello_req = b"GET /hello HTTP/1.1\r\nHost: localhost\r\n\r\n"
    hello_t = learn_template(port, hello_req, HELLO)
    specs = []
    digest_t = None
    for i, size in enumerate([0, 1, 517, 8192, 65537, 3, 20000, 1400]):
        body = rng.randbytes(size)
        if i % 2:
            req = (b"POST /digest HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n" + _chunked(body, rng))
        else:
            req = (b"POST /digest HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\n"
                   b"Content-Length: %d\r\n\r\n" % size + body)
        kind = DIGEST(body)
        if digest_t is None:
            digest_t = learn_template(port, req, kind)
        specs.append(Spec(req, digest_t, kind.body))
        specs.append(Spec(hello_req, hello_t, HELLO.body))
    return specs


def test_load_post_mix(server_factory, handoff):
    srv = server_factory(app="fault_apps:app", handoff=handoff)
    loaded(f"post-mix/{handoff}", srv, post_mix_specs(srv.port), n_requests(50_000))
