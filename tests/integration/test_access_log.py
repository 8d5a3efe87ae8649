"""--access-log: combined by default (with the duration), common or json by
--access-log-format; the client a trusted proxy names; opened before --user
drops root, kept by reloaded workers, reopened on SIGWINCH (logrotate)."""
import json
import os
import re
import signal
import socket

import pytest

from conftest import APPS, start_server
from loadgen import wait_until

COMBINED = re.compile(r'^(\S+) - - \[(\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d \+0000)\] "([^"\\]*(?:\\.[^"\\]*)*)" '
                      r'(\d{3}) (\d+|-) "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)" (\d+)$')
COMMON = re.compile(r'^(\S+) - - \[[^\]]+\] "([^"\\]*(?:\\.[^"\\]*)*)" (\d{3}) (\d+|-)$')


def send(port, raw):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(raw)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def lines(path, n, timeout=10):
    assert wait_until(lambda: os.path.exists(path) and open(path).read().count("\n") >= n, timeout), \
        open(path).read() if os.path.exists(path) else "no log file"
    return open(path).read().splitlines()


def test_combined_is_the_default_with_duration_and_escaped_fields(tmp_path):
    log = tmp_path / "access.log"
    srv = start_server(f"--access-log={log}")
    try:
        send(srv.port, b'GET /a%20b?x=1 HTTP/1.1\r\nHost: x\r\nReferer: http://r.example/\r\n'
                       b'User-Agent: agent "quoted" \\ \xff\r\nConnection: close\r\n\r\n')
        (line,) = lines(log, 1)
        m = COMBINED.match(line)
        assert m, line
        client, _, request, status, size, referer, agent, us = m.groups()
        assert client == "127.0.0.1" and request == "GET /a%20b?x=1 HTTP/1.1"
        assert status == "200" and size == "13"
        assert referer == "http://r.example/"
        assert agent == r'agent \"quoted\" \\ \xff'
        assert 0 < int(us) < 10_000_000
    finally:
        srv.close()


def test_common_and_json_formats(tmp_path):
    log = tmp_path / "common.log"
    srv = start_server(f"--access-log={log}", "--access-log-format", "common")
    try:
        send(srv.port, b"HEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        (line,) = lines(log, 1)
        m = COMMON.match(line)
        assert m and m.group(2) == "HEAD / HTTP/1.1" and m.group(3) == "200", line
    finally:
        srv.close()
    log = tmp_path / "json.log"
    srv = start_server(f"--access-log={log}", "--access-log-format", "json")
    try:
        send(srv.port, b'GET /\x01"q HTTP/1.1\r\nHost: x\r\nUser-Agent: \xe9t\xe9\r\nConnection: close\r\n\r\n')
        send(srv.port, b"GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        recs = [json.loads(x) for x in lines(log, 1)]
        ok = [r for r in recs if r["target"] == "/ok"]
        if ok:
            r = ok[0]
            assert r["method"] == "GET" and r["protocol"] == "HTTP/1.1" and r["status"] == 200
            assert r["bytes"] == 13 and r["client"] == "127.0.0.1" and r["duration_us"] >= 0
            assert r["time"].endswith("Z")
    finally:
        srv.close()
    recs = [json.loads(x) for x in open(log).read().splitlines()]
    assert any(r["target"] == "/ok" for r in recs), recs


def test_the_client_is_the_one_a_trusted_proxy_names(tmp_path):
    log = tmp_path / "access.log"
    raw = b"GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.9\r\nConnection: close\r\n\r\n"
    srv = start_server(f"--access-log={log}", "--forwarded-allow-ips", "127.0.0.1")
    try:
        send(srv.port, raw)
        assert lines(log, 1)[0].startswith("203.0.113.9 - - [")
    finally:
        srv.close()
    log2 = tmp_path / "untrusted.log"
    srv = start_server(f"--access-log={log2}", "--forwarded-allow-ips", "10.9.9.9")
    try:
        send(srv.port, raw)
        assert lines(log2, 1)[0].startswith("127.0.0.1 - - [")
    finally:
        srv.close()


@pytest.mark.parametrize("trust", [[], ["--forwarded-allow-ips", "127.0.0.1"]])
def test_the_logged_client_is_remote_addr_whatever_a_client_forges(tmp_path, trust):
    """A client's own Forwarded and X-Forwarded-For (leftmost, under the
    entry the trusted peer vouches for) choose neither REMOTE_ADDR nor the
    logged client, and the two agree."""
    log = tmp_path / "access.log"
    xff = b"X-Forwarded-For: 6.6.6.6, 203.0.113.9\r\n" if trust else b"X-Forwarded-For: 6.6.6.6\r\n"
    raw = (b"GET /environ HTTP/1.1\r\nHost: x\r\nForwarded: for=6.6.6.6;proto=https\r\n" + xff +
           b"Connection: close\r\n\r\n")
    srv = start_server(f"--access-log={log}", "--access-log-format", "json", *trust, app="wsgi_apps:application")
    try:
        body = send(srv.port, raw).split(b"\r\n\r\n", 1)[1]
        remote = json.loads(body)["REMOTE_ADDR"]
        assert remote == ("203.0.113.9" if trust else "127.0.0.1")
        assert json.loads(lines(log, 1)[0])["client"] == remote
    finally:
        srv.close()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigwinch_reopens_the_log_for_logrotate(tmp_path, workers):
    log = tmp_path / "access.log"
    srv = start_server(f"--access-log={log}", "--workers", workers)
    try:
        send(srv.port, b"GET /before HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        lines(log, 1)
        os.rename(log, tmp_path / "access.log.1")
        srv.proc.send_signal(signal.SIGWINCH)
        assert wait_until(lambda: srv.log_text().count("access log: reopened") >= int(workers), 10), \
            srv.log_text()
        for _ in range(4):  # every worker's connection lands in the new file
            send(srv.port, b"GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        new = lines(log, 4)
        assert all("/after" in x for x in new), new
        assert "/before" in (tmp_path / "access.log.1").read_text()
    finally:
        srv.close()


def test_sigwinch_reopens_a_relative_log_where_it_was_after_the_app_changed_directory(tmp_path):
    """--access-log=NAME is relative to the directory cserve starts in
    (after --chdir); with one worker the app runs in the server's process,
    and its os.chdir does not move the file a reopen makes."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    srv = start_server("--access-log=access.log", app=f"{APPS / 'wsgi_apps.py'}:application", chdir=tmp_path)
    try:
        send(srv.port, f"GET /chdir?to={elsewhere} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        lines(tmp_path / "access.log", 1)
        os.rename(tmp_path / "access.log", tmp_path / "access.log.1")
        srv.proc.send_signal(signal.SIGWINCH)
        assert wait_until(lambda: "access log: reopened" in srv.log_text(), 10), srv.log_text()
        send(srv.port, b"GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert "/after" in lines(tmp_path / "access.log", 1)[0]
        assert not (elsewhere / "access.log").exists()
    finally:
        srv.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="--user needs root")
def test_opened_before_root_is_dropped_and_kept_across_a_reload(tmp_path):
    d = tmp_path / "logs"
    d.mkdir(mode=0o755)  # root's: nobody cannot create a file here
    os.chmod(tmp_path, 0o755)
    log = d / "access.log"
    srv = start_server(f"--access-log={log}", "--user", "nobody", "--group", "nogroup")
    try:
        send(srv.port, b"GET /one HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert "/one" in lines(log, 1)[0]
        srv.proc.send_signal(signal.SIGHUP)  # the new worker (exec'd, as nobody) inherits the log
        assert wait_until(lambda: "serves" in srv.log_text(), 20), srv.log_text()
        send(srv.port, b"GET /two HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert "/two" in lines(log, 2)[1]
        assert "Permission denied" not in srv.log_text()
    finally:
        srv.close()


def test_workers_a_reload_starts_after_a_rotation_write_to_the_new_file(tmp_path):
    log = tmp_path / "access.log"
    srv = start_server(f"--access-log={log}", "--workers", "2")
    try:
        # Both workers running (the second starts once the first serves), so both reopen.
        assert wait_until(lambda: "worker 1: serving" in srv.log_text(), 20), srv.log_text()
        os.rename(log, tmp_path / "access.log.1")
        srv.proc.send_signal(signal.SIGWINCH)
        assert wait_until(lambda: srv.log_text().count("access log: reopened") >= 3, 10), srv.log_text()
        srv.proc.send_signal(signal.SIGHUP)  # the new workers inherit the supervisor's descriptor
        assert wait_until(lambda: srv.log_text().count(" serves; pid ") >= 2, 20), srv.log_text()
        for _ in range(4):
            send(srv.port, b"GET /after-reload HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert len([x for x in lines(log, 4) if "/after-reload" in x]) == 4
        assert "/after-reload" not in (tmp_path / "access.log.1").read_text()
    finally:
        srv.close()


@pytest.mark.parametrize("fmt", ["combined", "json"])
def test_a_huge_escaped_target_keeps_the_line_whole(tmp_path, fmt):
    log = tmp_path / "access.log"
    srv = start_server(f"--access-log={log}", "--access-log-format", fmt, "--app", "native-hello")
    try:
        target = b"/a" + b'"' * 4200 + b"\\" * 3000
        send(srv.port, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nUser-Agent: " + b"\xff" * 3000 +
             b"\r\nConnection: close\r\n\r\n")
        (line,) = lines(log, 1)
        if fmt == "json":
            rec = json.loads(line)
            assert rec["target"].endswith("...") and rec["status"] == 200 and rec["user_agent"].endswith("...")
        else:
            m = COMBINED.match(line)
            assert m, line[-200:]
            assert m.group(3).endswith("... HTTP/1.1") and m.group(4) == "200"
    finally:
        srv.close()
