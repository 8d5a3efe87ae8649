"""The responses the loop makes itself (a bad head's 400, 413, 505, a
probe's garbage, the watchdog's 503) are written to the access log with
the status sent and the request as far as it was read, and counted in
/metrics' cserve_requests_total by status class, as the app's are."""
import json
import os
import re
import socket
import urllib.request

from conftest import free_port, start_server
from httpclient import Reader
from loadgen import wait_until

TIMEOUT = 1  # --app-timeout (s)


def send_all(port, raw):
    """raw on a new connection; the whole answer, read to EOF."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(raw)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def send(port, raw):
    """raw on a new connection; the status line of the answer, read to EOF."""
    return send_all(port, raw).split(b"\r\n", 1)[0]


def log_lines(path, n):
    assert wait_until(lambda: os.path.exists(path) and open(path).read().count("\n") >= n, 30), \
        open(path).read() if os.path.exists(path) else "no log file"
    return open(path).read().splitlines()


def requests_total(mport, cls):
    """cserve_requests_total for all workers and one status class."""
    with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=30) as r:
        text = r.read().decode()
    m = re.search(r'^cserve_requests_total\{worker="all",class="%s"\} (\d+)$' % cls, text, re.M)
    assert m, text
    return int(m.group(1))


def test_the_loops_own_error_responses_are_logged_and_counted(tmp_path):
    log = tmp_path / "access.log"
    mport = free_port()
    srv = start_server(f"--access-log={log}", "--metrics-bind", f"127.0.0.1:{mport}")
    try:
        assert send(srv.port, b"GET /probe HTTP/1.1\r\nNot a header line\r\n\r\n") == b"HTTP/1.1 400 Bad Request"
        assert send(srv.port, b"\x16\x03\x01\x02\x00 hello\r\n\r\n") == b"HTTP/1.1 400 Bad Request"
        assert send(srv.port, b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999\r\n\r\n") \
            == b"HTTP/1.1 413 Content Too Large"
        assert send(srv.port, b"GET /v HTTP/2.5\r\nHost: x\r\n\r\n") == b"HTTP/1.1 505 HTTP Version Not Supported"
        lines = log_lines(log, 4)
        # The head that did not parse: its first line as the client sent it, escaped.
        assert re.search(r'"GET /probe HTTP/1\.1" 400 12 "-" "-" \d+$', lines[0]), lines
        assert re.search(r'"\\x16\\x03\\x01\\x02\\x00 hello" 400 12 ', lines[1]), lines
        # A head that parsed: its request line.
        assert re.search(r'"POST /up HTTP/1\.1" 413 18 ', lines[2]), lines
        assert '"GET /v HTTP/2.5" 505 ' in lines[3], lines
        assert wait_until(lambda: requests_total(mport, "4xx") >= 3 and requests_total(mport, "5xx") >= 1, 30)
        assert requests_total(mport, "2xx") == 0
    finally:
        srv.close()


def test_the_loops_error_response_is_a_whole_closing_response():
    """Every byte of the loop's own answer: the head every response starts
    with (Server, Date), a plain-text body naming the status, and a close."""
    srv = start_server()
    try:
        for raw, status in [(b"GET /probe HTTP/1.1\r\nNot a header line\r\n\r\n", b"400 Bad Request"),
                            (b"GET /v HTTP/2.5\r\nHost: x\r\n\r\n", b"505 HTTP Version Not Supported"),
                            (b"GET / HTTP/1.0\r\nContent-Length: x\r\n\r\n", b"400 Bad Request")]:
            data = send_all(srv.port, raw)
            m = re.fullmatch(rb"HTTP/1\.1 (\d{3} [^\r]+)\r\nServer: cserve\r\n"
                             rb"Date: (Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d [A-Z][a-z]{2} \d{4} "
                             rb"\d\d:\d\d:\d\d GMT\r\n"
                             rb"Content-Type: text/plain; charset=utf-8\r\nContent-Length: (\d+)\r\n"
                             rb"Connection: close\r\n\r\n(.*)", data, re.S)
            assert m, data
            assert m.group(1) == status, data
            body = status.split(b" ", 1)[1] + b"\n"
            assert m.group(4) == body and int(m.group(3)) == len(body), data
    finally:
        srv.close()


def test_a_bad_head_in_json(tmp_path):
    log = tmp_path / "access.json"
    srv = start_server(f"--access-log={log}", "--access-log-format", "json")
    try:
        assert send(srv.port, b"GET /a\"b HTTP/1.1\r\nHost x\r\n\r\n") == b"HTTP/1.1 400 Bad Request"
        (line,) = log_lines(log, 1)
        d = json.loads(line)
        assert d["status"] == 400 and d["bytes"] == 12 and d["client"] == "127.0.0.1", d
        assert d["request"] == 'GET /a"b HTTP/1.1' and d["method"] == "" and d["target"] == "", d
    finally:
        srv.close()


def test_the_watchdogs_503_is_logged_and_counted(tmp_path):
    """The stuck request's 503 and the queued one's: one line each, and two
    in the 5xx class, published by the stuck worker (its successor, which
    takes its metrics slot, starts only once the test has seen them)."""
    log = tmp_path / "access.log"
    marker = tmp_path / "slow-reimport"
    mport = free_port()
    srv = start_server("--blocking-threads", "1", "--app-timeout", str(TIMEOUT), "--graceful-timeout", "2",
                       f"--access-log={log}", "--metrics-bind", f"127.0.0.1:{mport}", app="hang_apps:application",
                       env={**os.environ, "HANG_APPS_SLOW_REIMPORT": str(marker)})
    try:
        marker.write_text("")
        stuck = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        mark = tmp_path / "in-app"
        stuck.sendall(f"GET /hang?mark={mark} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert wait_until(mark.exists, 30), srv.log_text()[-2000:]  # the one thread is taken
        queued = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        queued.sendall(b"GET /queued HTTP/1.1\r\nHost: x\r\n\r\n")
        for s in (stuck, queued):
            assert Reader(s).read_response().status == 503
        lines = log_lines(log, 2)
        assert any(re.search(r'"GET /hang\?mark=[^"]*" 503 20 ', l) for l in lines), lines  # a long line is cut
        assert any(re.search(r'"GET /queued HTTP/1\.1" 503 20 ', l) for l in lines), lines
        assert wait_until(lambda: requests_total(mport, "5xx") >= 2, 30), srv.log_text()[-2000:]
        stuck.close()
        queued.close()
    finally:
        (tmp_path / "slow-reimport.go").touch()  # the successor may start
        srv.close()
