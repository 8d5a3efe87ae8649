"""Behind a real nginx, configured by the recipe in docs/deploying.md.

Debian's nginx (nginx-light; scripts/setup.sh test installs it) runs as a reverse
proxy with its own temporary prefix, workers as www-data, and the upstream
and server blocks read from docs/deploying.md (the fenced block after its
recipe marker), so the documented recipe is the tested one: only the socket
path, the listen address, the upstream keepalive_timeout and the static
folder are replaced. cserve runs with the options of the doc's own command
line (only the socket path, the user, the timeout and the app replaced), on a
unix socket it hands to nobody:www-data with --socket-mode 660. Checks: no
client chooses its REMOTE_ADDR, scheme or host with hostile Forwarded and
X-Forwarded-* fields, in the environ or the access log; the
app sees the Host the client sent, port included; static files come from
nginx; a multi-megabyte chunked upload echoed byte for byte; a streamed
(generator) response; upstream keep-alive reuse (cserve's accept count);
POSTs sent around the moment an idle upstream connection times out (no 502
when nginx's upstream keepalive_timeout is shorter than cserve's
--keepalive-timeout, the doc's rule); a short wrk run with zero errors."""
import hashlib
import http.client
import json
import os
import re
import shlex
import shutil
import ssl
import subprocess
import tempfile
import time

import pytest

from conftest import APPS, BIN, ROOT, free_port
from deploy_support import Proc, clean_env, wait_connect

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
pytestmark = [
    pytest.mark.skipif(NGINX is None, reason="nginx is not installed (scripts/setup.sh test installs nginx-light)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="nginx workers as www-data and cserve --user need root"),
]

# nginx's upstream keepalive_timeout is shorter, the doc's rule, by a margin
# (3 s) that nginx's idle timer cannot miss even on a busy machine.
CSERVE_KEEPALIVE = 4.0   # cserve --keepalive-timeout (s)
NGINX_UPSTREAM_KEEPALIVE = 1  # nginx upstream keepalive_timeout (s)
HANG_S = 30  # only detects a hang: nothing here legitimately takes this long

DOC = os.path.join(str(ROOT), "docs", "deploying.md")
RECIPE_MARKER = "<!-- nginx recipe: tests/integration/test_nginx.py runs the fenced block below as written -->"
STATIC_CSS = b"body { color: #333; }\n"


def recipe():
    """The nginx configuration docs/deploying.md gives, as written there."""
    text = open(DOC).read()
    assert text.count(RECIPE_MARKER) == 1, f"{DOC} lost its nginx recipe marker"
    m = re.match(r"\s*```nginx\n(.*?)\n```", text.split(RECIPE_MARKER, 1)[1], re.S)
    assert m, f"no ```nginx block right after the recipe marker in {DOC}"
    return m.group(1)


def cserve_command(sock, log, stats):
    """The cserve command line the doc runs behind nginx, with this machine's
    socket, user, timeout and app (each value replaced must stand in it once)
    and the test's instruments added."""
    text = open(DOC).read()
    found = [l.strip() for l in text.splitlines() if l.strip().startswith("/srv/myapp/venv/bin/cserve --bind unix:")]
    assert len(found) == 1, f"{DOC}: no single cserve command line on its unix socket: {found}"
    args = shlex.split(found[0].removesuffix("&"))[1:]
    line = " ".join(args)
    for old, new in [("--bind unix:/run/myapp/cserve.sock", f"--bind unix:{sock}"), ("--user myapp", "--user nobody"),
                     ("--keepalive-timeout 75", f"--keepalive-timeout {CSERVE_KEEPALIVE}"),
                     ("--chdir /srv/myapp app:app", f"--chdir {APPS} wsgi_apps:application")]:
        assert f" {line} ".count(f" {old} ") == 1, f"the command in {DOC} no longer has {old!r}"
        line = f" {line} ".replace(f" {old} ", f" {new} ").strip()
    return [BIN, "--stats-json", stats, f"--access-log={log}", "--access-log-format", "json", *line.split()]


def localise(conf, sock, port, static, tls=None):
    """The recipe with this machine's paths and the test's short timeout.
    Each value replaced must stand in the recipe exactly once: if the doc
    changes it, the test says so instead of testing something else. tls:
    (port, cert, key) adds a TLS listener to the recipe's server, as a
    deployment that terminates TLS at nginx has."""
    listen = f"listen 127.0.0.1:{port};"
    if tls:
        listen += (f"\n    listen 127.0.0.1:{tls[0]} ssl;\n    ssl_certificate {tls[1]};\n"
                   f"    ssl_certificate_key {tls[2]};")
    for old, new in [("server unix:/run/myapp/cserve.sock;", f"server unix:{sock};"),
                     ("listen 8080;", listen),
                     ("keepalive_timeout 60s;", f"keepalive_timeout {NGINX_UPSTREAM_KEEPALIVE}s;"),
                     ("alias /srv/myapp/static/;", f"alias {static}/;")]:
        assert conf.count(old) == 1, f"the recipe in {DOC} no longer has {old!r}"
        conf = conf.replace(old, new)
    return conf

CONF = """
user www-data;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 512; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;

{recipe}
}}
"""


@pytest.fixture(scope="module")
def stack():
    d = tempfile.mkdtemp(prefix="cserve-nginx-")
    os.chmod(d, 0o777)  # www-data reaches the socket; nobody removes it at exit
    os.makedirs(os.path.join(d, "tmp"), mode=0o777)
    sock = os.path.join(d, "cserve.sock")
    port = free_port()
    stats = os.path.join(d, "stats.json")
    static = os.path.join(d, "static")
    os.makedirs(static, mode=0o755)
    with open(os.path.join(static, "site.css"), "wb") as f:
        f.write(STATIC_CSS)
    tls = None
    if shutil.which("openssl"):
        cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "1", "-subj", "/CN=localhost"], check=True, capture_output=True)
        tls = (free_port(), cert, key)
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(CONF.format(d=d, recipe=localise(recipe(), sock, port, static, tls)))
    access_log = os.path.join(d, "access.jsonl")
    srv = Proc(cserve_command(sock, access_log, stats), env=clean_env())
    wait_connect(srv, sock).close()
    ngx = Proc([NGINX, "-p", d, "-c", os.path.join(d, "nginx.conf"), "-g", "daemon off;"], env=clean_env())
    try:
        wait_connect(ngx, ("127.0.0.1", port)).close()
        yield {"port": port, "srv": srv, "ngx": ngx, "dir": d, "stats": stats, "sock": sock,
               "tls_port": tls[0] if tls else None, "access_log": access_log}
    finally:
        ngx.stop()
        srv.stop()
        shutil.rmtree(d, ignore_errors=True)


def _conn(stack):
    return http.client.HTTPConnection("127.0.0.1", stack["port"], timeout=30)


def _accepts(stack):
    """cserve's accepted connections so far: SIGUSR1 rewrites --stats-json."""
    before = os.path.getmtime(stack["stats"]) if os.path.exists(stack["stats"]) else 0
    stack["srv"].proc.send_signal(10)  # SIGUSR1
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        if os.path.exists(stack["stats"]) and os.path.getmtime(stack["stats"]) != before:
            try:
                text = open(stack["stats"]).read()
                json.loads(text)
                return sum(int(n) for n in re.findall(r'"accepts":\s*(\d+)', text))
            except ValueError:
                pass
        time.sleep(0.02)
    raise AssertionError("no stats from cserve:\n" + stack["srv"].text())


def test_workers_and_socket_permissions(stack):
    st = os.stat(stack["sock"])
    assert oct(st.st_mode & 0o777) == "0o660"
    c = _conn(stack)
    c.request("GET", "/hello")
    r = c.getresponse()
    assert r.status == 200 and r.read() == b"hello", stack["ngx"].text()


def test_app_sees_the_host_the_client_sent_port_included(stack):
    # With `Host $host` nginx would drop the port: Django would then build
    # absolute URLs without it and refuse a browser's POST (CSRF, Origin).
    c = _conn(stack)
    c.request("GET", "/environ")  # http.client sends Host: 127.0.0.1:PORT
    r = c.getresponse()
    env = json.loads(r.read())
    assert r.status == 200
    assert env["HTTP_HOST"] == f"127.0.0.1:{stack['port']}", env["HTTP_HOST"]


def test_the_app_sees_the_client_and_scheme_nginx_vouches_for(stack):
    # nginx is a unix-socket peer, trusted by the recipe's --forwarded-allow-ips
    # unix: its X-Forwarded-For gives the client's address, and its
    # X-Forwarded-Proto ($scheme) replaces whatever scheme the client claimed.
    c = _conn(stack)
    c.request("GET", "/environ", headers={"X-Forwarded-Proto": "https"})
    r = c.getresponse()
    env = json.loads(r.read())
    assert r.status == 200
    assert env["REMOTE_ADDR"] == "127.0.0.1", env["REMOTE_ADDR"]
    assert env["wsgi.url_scheme"] == "http"


def test_behind_nginx_terminating_tls_the_app_sees_https(stack):
    # The recipe's X-Forwarded-Proto $scheme says https on a TLS listener;
    # nginx, a trusted (unix-socket) peer, is believed: Django and any other
    # framework then build https:// URLs from wsgi.url_scheme.
    if not stack["tls_port"]:
        pytest.skip("openssl is not installed: no certificate for nginx's TLS listener")
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    c = http.client.HTTPSConnection("127.0.0.1", stack["tls_port"], timeout=30, context=ctx)
    c.request("GET", "/environ")
    r = c.getresponse()
    env = json.loads(r.read())
    assert r.status == 200
    assert env["wsgi.url_scheme"] == "https" and env["HTTPS"] == "on", env
    assert env["HTTP_HOST"] == f"127.0.0.1:{stack['tls_port']}"


HOSTILE = [("Forwarded", "for=6.6.6.6;proto=https;host=evil.example"), ("X-Forwarded-For", "6.6.6.6"),
           ("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "evil.example"), ("X-Real-IP", "6.6.6.6")]


def _logged_client(stack, target):
    """The client the access log names for the one request to target."""
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        recs = [json.loads(l) for l in open(stack["access_log"]).read().splitlines() if l.strip()]
        mine = [r for r in recs if r["target"] == target]
        if mine:
            assert len(mine) == 1, mine
            return mine[0]["client"]
        time.sleep(0.02)
    raise AssertionError(f"no access log line for {target}:\n" + open(stack["access_log"]).read())


def test_no_client_chooses_its_address_scheme_or_host(stack):
    """Hostile fields of both families, sent through the recipe's nginx
    (which appends to X-Forwarded-For, replaces X-Forwarded-Proto and
    passes Forwarded and X-Forwarded-Host through): the app and the access
    log see the client, scheme and host nginx saw."""
    target = "/environ?hostile=plain"
    c = _conn(stack)
    c.request("GET", target, headers=dict(HOSTILE))
    r = c.getresponse()
    env = json.loads(r.read())
    assert r.status == 200
    assert env["REMOTE_ADDR"] == "127.0.0.1", env
    assert env["wsgi.url_scheme"] == "http" and "HTTPS" not in env, env
    assert env["HTTP_HOST"] == f"127.0.0.1:{stack['port']}", env
    assert "evil" not in env["SERVER_NAME"], env
    assert env["HTTP_X_FORWARDED_FOR"] == "6.6.6.6, 127.0.0.1"  # nginx appended the peer it saw
    assert _logged_client(stack, target) == "127.0.0.1"


def test_over_tls_no_client_turns_the_scheme_back_to_http(stack):
    if not stack["tls_port"]:
        pytest.skip("openssl is not installed: no certificate for nginx's TLS listener")
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    target = "/environ?hostile=tls"
    c = http.client.HTTPSConnection("127.0.0.1", stack["tls_port"], timeout=30, context=ctx)
    c.request("GET", target, headers={"Forwarded": "for=6.6.6.6;proto=http", "X-Forwarded-Proto": "http",
                                      "X-Forwarded-For": "6.6.6.6"})
    r = c.getresponse()
    env = json.loads(r.read())
    assert r.status == 200
    assert env["wsgi.url_scheme"] == "https" and env["REMOTE_ADDR"] == "127.0.0.1", env
    assert _logged_client(stack, target) == "127.0.0.1"


def test_static_files_come_from_nginx(stack):
    before = _accepts(stack)
    c = _conn(stack)
    c.request("GET", "/static/site.css")
    r = c.getresponse()
    assert r.status == 200 and r.read() == STATIC_CSS, stack["ngx"].text()
    assert _accepts(stack) == before, "a static file went through cserve"


def test_chunked_multi_megabyte_upload_echoed(stack):
    blob = os.urandom(3 * 1024 * 1024 + 12345)
    pieces = (blob[i:i + 65536 + 7] for i in range(0, len(blob), 65536 + 7))
    c = _conn(stack)
    c.request("POST", "/raw_echo", body=pieces, encode_chunked=True,
              headers={"Transfer-Encoding": "chunked", "Content-Type": "application/octet-stream"})
    r = c.getresponse()
    body = r.read()
    assert r.status == 200, (r.status, body[:200])
    assert len(body) == len(blob) and hashlib.sha256(body).digest() == hashlib.sha256(blob).digest()


def test_streamed_generator_response(stack):
    c = _conn(stack)
    c.request("GET", "/stream?n=200&size=1000")
    r = c.getresponse()
    body = r.read()
    assert r.status == 200
    assert r.getheader("Transfer-Encoding") == "chunked"
    assert body == b"".join(bytes([ord("a") + i % 26]) * 1000 for i in range(200))


def _hello(stack):
    c = _conn(stack)  # a new client connection each time: nginx pools upstream
    c.request("GET", "/hello")
    assert c.getresponse().read() == b"hello"
    c.close()


def test_upstream_keepalive_reused(stack):
    """Two requests one after the other cost cserve at most one new
    connection: the second goes on the upstream connection the first left
    idle. Without reuse every pair costs two. A pair may legitimately cost
    two when the machine stalls past nginx's 1 s idle timeout between them,
    so a few pairs are tried; one that reuses decides."""
    costs = []
    for _ in range(10):
        before = _accepts(stack)
        _hello(stack)
        _hello(stack)
        costs.append(_accepts(stack) - before)
        if costs[-1] <= 1:
            break
    assert costs[-1] <= 1, f"new upstream connections per pair of requests: {costs}: keep-alive not reused"


def test_post_as_idle_upstream_connection_times_out_no_502(stack):
    """POSTs (which nginx does not retry) sent at delays around both idle
    timeouts, each after a request that leaves an idle upstream connection."""
    statuses = []
    delays = [NGINX_UPSTREAM_KEEPALIVE + x for x in (-0.05, 0.0, 0.05)] + \
             [CSERVE_KEEPALIVE + x for x in (-0.1, 0.0, 0.1)]
    for delay in delays:
        c = _conn(stack)
        c.request("GET", "/hello")
        c.getresponse().read()
        c.close()
        time.sleep(delay)  # the stimulus: idle this long; any delay must give 200
        c = _conn(stack)
        c.request("POST", "/raw_echo", body=b"x" * 1000, headers={"Content-Type": "text/plain"})
        r = c.getresponse()
        statuses.append((delay, r.status))
        r.read()
        c.close()
    assert all(s == 200 for _, s in statuses), (statuses, open(os.path.join(stack["dir"], "error.log")).read())


def test_wrk_zero_errors(stack):
    wrk = shutil.which("wrk")
    if not wrk:
        pytest.skip("wrk is not installed (scripts/setup.sh test installs it)")
    # wrk counts a response slower than its --timeout (2 s by default) as a
    # socket error: a busy machine is not an error here, a hang is.
    out = subprocess.run([wrk, "-t1", "-c16", "-d2s", "--timeout", f"{HANG_S}s",
                          f"http://127.0.0.1:{stack['port']}/hello"],
                         capture_output=True, text=True, timeout=2 * HANG_S).stdout
    m = re.search(r"(\d+) requests in", out)
    assert m and int(m.group(1)) > 0, out
    assert "Socket errors" not in out and "Non-2xx" not in out, out
