"""--metrics-bind takes any address, and --metrics-allow-ips names the peers
it serves (loopback and unix: peers by default): any other peer's request
is answered 403 and counted in cserve_metrics_refused_total, the first one
logged. The Host check against DNS rebinding holds for a listener bound to
loopback; one bound to another address takes any Host. A list that does
not parse is refused at start and by --check-config alike."""
import socket
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import BIN, ROOT, free_port
from loadgen import wait_until
from test_metrics import wait_metrics

HANG_S = 30


def fetch(mport, path="/metrics", host="127.0.0.1", source="127.0.0.1", host_field=None):
    """One GET from source to host:mport; returns (status, body)."""
    with socket.create_connection((host, mport), timeout=HANG_S, source_address=(source, 0)) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host_field or f'{host}:{mport}'}\r\n"
                  "Connection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def refused_total(mport):
    status, body = fetch(mport)
    assert status == 200, body
    fams = {f.name: f for f in text_string_to_metric_families(body.decode())}
    return fams["cserve_metrics_refused"].samples[0].value


def test_a_peer_not_in_the_list_gets_403_and_is_counted(server_factory):
    """127.0.0.2 is loopback too, but not in a list of 127.0.0.1 alone."""
    mport = free_port()
    srv = server_factory("--metrics-bind", f"0.0.0.0:{mport}", "--metrics-allow-ips", "127.0.0.1")
    wait_metrics(mport)
    assert refused_total(mport) == 0
    for _ in range(3):
        status, body = fetch(mport, source="127.0.0.2")
        assert status == 403, body
    assert refused_total(mport) == 3
    log = srv.log_text()
    assert log.count("metrics: refusing 127.0.0.2, not in --metrics-allow-ips (127.0.0.1)") == 1, log
    assert f"on http://0.0.0.0:{mport} to 127.0.0.1" in log, log


def test_the_default_serves_loopback_only(server_factory):
    mport = free_port()
    server_factory("--metrics-bind", f"0.0.0.0:{mport}")
    wait_metrics(mport)
    assert fetch(mport, source="127.0.0.9")[0] == 200  # 127.0.0.0/8
    outside = _outside_address()
    if outside is None:
        pytest.skip("no address but loopback on this machine")
    assert fetch(mport, host=outside, source=outside)[0] == 403


def test_the_host_check_follows_the_peer_not_only_the_bind(server_factory):
    """Bound beyond loopback, a scraper on another host may name the target
    as it likes: no 421. A loopback peer (a browser on this host, which a
    rebinding page may steer) must still name localhost or a loopback
    address, whatever the bind; bound to loopback, every peer is checked."""
    mport = free_port()
    outside = _outside_address()
    allow = "127.0.0.0/8" + (f",{outside}" if outside else "")
    server_factory("--metrics-bind", f"0.0.0.0:{mport}", "--metrics-allow-ips", allow)
    wait_metrics(mport)
    assert fetch(mport, host_field="evil.example")[0] == 421
    assert fetch(mport, host_field=f"localhost:{mport}")[0] == 200
    assert fetch(mport, host_field=f"127.0.0.1:{mport}")[0] == 200
    if outside:
        assert fetch(mport, host=outside, source=outside, host_field="app1.internal:9100")[0] == 200
    lport = free_port()
    server_factory("--metrics-bind", f"127.0.0.1:{lport}", "--metrics-allow-ips", "127.0.0.0/8")
    wait_metrics(lport)
    assert fetch(lport, host_field="app1.internal:9100")[0] == 421


def test_refused_connections_are_counted_and_logged_once(server_factory):
    """A scanner that connects and closes without a request is refused too:
    each connection counted, one line in the log however many."""
    mport = free_port()
    srv = server_factory("--metrics-bind", f"0.0.0.0:{mport}", "--metrics-allow-ips", "127.0.0.1")
    wait_metrics(mport)
    for _ in range(50):
        socket.create_connection(("127.0.0.1", mport), timeout=HANG_S, source_address=("127.0.0.2", 0)).close()
    assert wait_until(lambda: refused_total(mport) == 50, HANG_S), refused_total(mport)
    assert srv.log_text().count("metrics: refusing 127.0.0.2") == 1, srv.log_text()[-3000:]


def test_an_empty_list_serves_no_one(server_factory):
    mport = free_port()
    server_factory("--metrics-bind", f"127.0.0.1:{mport}", "--metrics-allow-ips", "")
    status, _ = fetch(mport)
    assert status == 403


@pytest.mark.parametrize("check", [False, True])
def test_a_bad_list_is_refused_with_one_line(check):
    args = [BIN, "--bind", f"127.0.0.1:{free_port()}", "--metrics-bind", f"127.0.0.1:{free_port()}",
            "--metrics-allow-ips", "10.0.0.0/33", "--chdir", "tests/integration/apps", "wsgi_apps:application"]
    if check:
        args.insert(1, "--check-config")
    p = subprocess.run(args, cwd=str(ROOT), capture_output=True, text=True, timeout=HANG_S)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "--metrics-allow-ips" in lines[0], p.stderr


def test_check_config_takes_a_metrics_address_beyond_loopback():
    p = subprocess.run([BIN, "--check-config", "--metrics-bind", f"0.0.0.0:{free_port()}", "--chdir", "tests/integration/apps",
                        "wsgi_apps:application"], cwd=str(ROOT), capture_output=True, text=True, timeout=HANG_S)
    assert p.returncode == 0, p.stderr
    assert "metrics-allow-ips" in p.stdout + p.stderr


def _outside_address():
    """This machine's address on its default route, if it has one."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent
            addr = s.getsockname()[0]
    except OSError:
        return None
    return None if addr.startswith("127.") else addr
