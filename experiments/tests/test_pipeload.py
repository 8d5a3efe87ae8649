"""build/pipeload (experiments/loadgen/pipeload.c) against a scripted server
on loopback: it counts exactly the responses a server completes (framed by
Content-Length, byte by byte or in one write, interim 1xx skipped, 204 and
304 without a body), counts each status, sends the browser-like head with
heads.lua's Cookie, a chunked body of -k chunks of -K bytes, and treats a response it cannot frame (chunked, no
length, a head over 64 KiB) as a protocol error and a server's close as lost
requests, reconnecting either way. A few seconds; no cserve."""
import json
import os
import re
import socket
import subprocess
import threading

import pytest

from experiments.lib import serverctl

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = serverctl.PIPELOAD  # CSERVE_PIPELOAD: another build of it (an ASan one)


class Scripted:
    """A server that answers the n-th request it reads (over all
    connections) with respond(n) -> bytes, or a list of byte strings written
    one by one; None closes the connection instead. Heads seen are kept."""

    def __init__(self, respond):
        self.respond, self.n, self.heads, self.per_read, self.lock = respond, 0, [], [], threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        buf = b""
        with c:
            while True:
                try:
                    d = c.recv(65536)
                except OSError:
                    return
                if not d:
                    return
                buf += d
                with self.lock:
                    self.per_read.append(d.count(b"\r\n\r\n"))
                while b"\r\n\r\n" in buf:
                    head, buf = buf.split(b"\r\n\r\n", 1)
                    with self.lock:
                        i = self.n
                        self.n += 1
                        self.heads.append(head)
                    out = self.respond(i)
                    if out is None:
                        c.shutdown(socket.SHUT_RDWR)
                        return
                    try:
                        for part in out if isinstance(out, list) else [out]:
                            c.sendall(part)
                    except OSError:  # the client closed (at its duration): nothing more to answer
                        return

    def close(self):
        self.sock.close()


def ok(status=200, body=b"hi", extra=""):
    reason = {200: "OK", 204: "No Content", 304: "Not Modified", 404: "Not Found", 500: "Server Error"}
    length = "" if status in (204, 304) else f"Content-Length: {len(body)}\r\n"
    body = b"" if status in (204, 304) else body
    return f"HTTP/1.1 {status} {reason[status]}\r\n{extra}{length}\r\n".encode() + body


def run(port, *args, timeout=120):
    assert os.access(BIN, os.X_OK), f"no {BIN}: make all builds it"
    p = subprocess.run([BIN, *args, f"http://127.0.0.1:{port}/x?y=1"], capture_output=True, text=True,
                       timeout=timeout)
    m = re.search(r"^pipeload-json: (.*)$", p.stdout, re.M)
    assert m, p.stdout + p.stderr
    return p.returncode, json.loads(m.group(1)), p.stdout


@pytest.fixture
def server():
    made = []

    def make(respond):
        s = Scripted(respond)
        made.append(s)
        return s
    yield make
    for s in made:
        s.close()


def test_counts_every_status_of_a_known_sequence(server):
    # 60 requests over 3 connections, 4 deep (the last batches shortened):
    # statuses in a fixed cycle, some written a byte at a time, an interim
    # 100 before some, a 200 with a capitalised header name and a large body.
    cycle = [200, 404, 204, 304, 500, 200]

    def respond(i):
        st = cycle[i % len(cycle)]
        r = ok(st, body=b"x" * (i % 7))
        if i % 5 == 0:
            return [bytes([b]) for b in r]  # one byte per write
        if i % 9 == 0:
            return [b"HTTP/1.1 100 Continue\r\n\r\n", r]
        if i % 11 == 0:
            return b"HTTP/1.1 200 OK\r\ncOnTeNt-LeNgTh: 200000\r\n\r\n" + b"z" * 200000
        return r
    s = server(respond)
    rc, j, out = run(s.port, "-c", "3", "-p", "4", "-n", "60")
    assert rc == 0 and j["requests"] == 60 and s.n == 60
    want = {}
    for i in range(60):
        st = 200 if i % 11 == 0 and i % 5 and i % 9 else cycle[i % len(cycle)]
        want[str(st)] = want.get(str(st), 0) + 1
    assert j["statuses"] == want
    assert j["errors"] == {"connect": 0, "read": 0, "write": 0, "protocol": 0} and j["lost"] == 0
    non2xx = sum(v for k, v in want.items() if not 200 <= int(k) <= 399)
    assert f"Non-2xx or 3xx responses: {non2xx}" in out and "60 requests in" in out
    assert all(h.startswith(b"GET /x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:") for h in s.heads)


def test_pipelines_depth_requests_per_write(server):
    # One write per batch: the server's reads hold up to the depth's requests
    # at once (one send of ~400 bytes on loopback arrives whole), never more.
    s = server(lambda i: ok())
    rc, j, _ = run(s.port, "-c", "1", "-p", "8", "-n", "32")
    assert rc == 0 and j["requests"] == 32 and j["batches"] == 4 and j["depth"] == 8
    assert max(s.per_read) == 8 and sum(s.per_read) == 32


def _cookie(n):
    """experiments/wrk/heads.lua's cookie(n), in Python."""
    parts, length, i = [], 0, 0
    while length < n:
        i += 1
        p = f"_c{i:03d}=" + chr(97 + i % 26) * 40
        parts.append(p)
        length += len(p) + 2
    return "; ".join(parts)[:n]


def test_browser_head_carries_heads_lua_cookie(server):
    s = server(lambda i: ok())
    rc, j, _ = run(s.port, "-c", "1", "-p", "2", "-n", "2", "-B", "-b", "2048")
    assert rc == 0 and j["requests"] == 2
    head = s.heads[0].decode()
    lines = dict(line.split(": ", 1) for line in head.split("\r\n")[1:])
    assert lines["Cookie"] == _cookie(2048) and len(lines["Cookie"]) == 2048
    assert lines["Sec-Fetch-Mode"] == "navigate" and "Chrome/120" in lines["User-Agent"]


@pytest.mark.parametrize("k,size,flags", [(5, 1, []), (3, 1024, ["-K", "1024"]), (2, 4000, ["-K", "4000"])],
                         ids=["one-byte", "1-KiB", "hex-size"])
def test_chunked_body_of_k_chunks_of_K_bytes(k, size, flags):
    # -k K -p 3: three POSTs in one write, each a chunked body of k chunks
    # of -K bytes (one by default; the size line in hex) and the last
    # chunk; read here byte-exact.
    one = (b"POST /x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nTransfer-Encoding: chunked\r\n\r\n" +
           (b"%x\r\n" % size + b"x" * size + b"\r\n") * k + b"0\r\n\r\n")
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    port = lsock.getsockname()[1]
    want, got = one % port * 3, []

    def serve():
        c, _ = lsock.accept()
        with c:
            buf = b""
            while len(buf) < len(want):
                d = c.recv(65536)
                if not d:
                    break
                buf += d
            got.append(buf)
            c.sendall(ok() * 3)
            c.recv(1)  # until the client closes
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    rc, j, _ = run(port, "-c", "1", "-p", "3", "-n", "3", "-k", str(k), *flags)
    t.join(30)
    lsock.close()
    assert rc == 0 and j["requests"] == 3
    assert got == [want]


@pytest.mark.parametrize("bad", [
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\nhi",
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi",
    b"HTTP/1.1 2x0 OK\r\nContent-Length: 2\r\n\r\nhi",
    b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70000 + b"\r\nContent-Length: 2\r\n\r\nhi",
], ids=["chunked", "no-length", "two-lengths", "bad-status", "head-over-64k"])
def test_unframable_response_is_a_protocol_error(server, bad):
    # Every response bad: none is counted (the run ends at -d, -n never met).
    s = server(lambda i: bad)
    rc, j, _ = run(s.port, "-c", "1", "-p", "1", "-n", "5", "-d", "1")
    assert rc == 1 and j["requests"] == 0 and j["errors"]["protocol"] >= 1
    # Every third request gets the bad response; the rest are fine. The bad
    # ones are never counted as responses, the connection is reopened, and
    # the unanswered requests of its batch are issued again (-n ends the
    # run; -d only bounds a hang).
    s = server(lambda i: bad if i % 3 == 1 else ok())
    rc, j, out = run(s.port, "-c", "2", "-p", "1", "-n", "20", "-d", "60")
    assert j["errors"]["protocol"] >= 1 and j["statuses"].get("200", 0) == j["requests"]
    assert j["requests"] == 20 and rc == 0
    assert "Socket errors: connect 0, read " in out


def test_server_close_loses_the_rest_of_the_batch_and_reconnects(server):
    # A response that says Connection: close ends its connection: the batch's
    # other requests are lost (counted) and issued again on a new connection.
    s = server(lambda i: ok(extra="Connection: Close\r\n") if i == 2 else ok())
    rc, j, _ = run(s.port, "-c", "1", "-p", "4", "-n", "12")
    assert rc == 0 and j["requests"] == 12 and j["lost"] == 1
    # And a server that just hangs up mid-batch: a read error.
    s2 = server(lambda i: None if i == 5 else ok())
    rc, j, _ = run(s2.port, "-c", "1", "-p", "4", "-n", "12")
    assert rc == 0 and j["requests"] == 12 and j["errors"]["read"] == 1 and j["lost"] >= 1


def test_runs_for_its_duration_without_n(server):
    s = server(lambda i: ok())
    rc, j, out = run(s.port, "-c", "2", "-p", "4", "-d", "0.5", "-t", "2")
    # It stops at the deadline, not before (how long past it is the
    # scheduler's; 30 s only detects a hang).
    assert rc == 0 and j["requests"] > 0 and 0.45 < j["seconds"] < 30 and j["threads"] == 2
    assert re.search(r"Requests/sec:\s+[\d.]+", out)


def test_usage_errors_exit_2():
    assert os.access(BIN, os.X_OK), f"no {BIN}: make all builds it"
    for args in (["-c", "0", "http://127.0.0.1:1/"], ["-p", "2000", "http://127.0.0.1:1/"],
                 ["-b", "10", "http://127.0.0.1:1/"], ["ftp://x/"], ["-t", "3", "-c", "2", "http://127.0.0.1:1/"],
                 ["-k", "0", "http://127.0.0.1:1/"], ["-K", "1024", "http://127.0.0.1:1/"],
                 ["-k", "2", "-K", "0", "http://127.0.0.1:1/"],
                 ["-k", "2048", "-K", "65536", "http://127.0.0.1:1/"],  # a body over 64 MiB
                 ["-k", "1024", "-K", "65536", "-p", "8", "http://127.0.0.1:1/"]):  # a batch over 256 MiB
        assert subprocess.run([BIN, *args], capture_output=True).returncode == 2, args
