"""Proxy headers are believed from --forwarded-allow-ips peers only (default
loopback and unix-socket peers): RFC 7239 Forwarded, else X-Forwarded-Proto,
-For and -Host, set wsgi.url_scheme, REMOTE_ADDR and the host; from any other
peer they stay plain HTTP_* keys and change nothing. --root-path mounts the
app under a prefix (SCRIPT_NAME)."""
import http.client
import json
import subprocess

import pytest

from conftest import BIN, start_server


def environ(srv, path="/environ", headers=()):
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        c.putrequest("GET", path, skip_host=True)
        c.putheader("Host", "origin.test:8000")
        for k, v in headers:
            c.putheader(k, v)
        c.endheaders()
        r = c.getresponse()
        body = r.read()
        assert r.status == 200, (r.status, body)
        return json.loads(body)
    finally:
        c.close()


@pytest.fixture(scope="module")
def trusting():
    srv = start_server(app="wsgi_apps:application")
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def distrusting():
    srv = start_server("--forwarded-allow-ips", "10.1.2.3, 192.168.0.0/16", app="wsgi_apps:application")
    yield srv
    srv.close()


def test_x_forwarded_fields_from_a_trusted_peer_set_scheme_client_and_host(trusting):
    env = environ(trusting, headers=[("X-Forwarded-Proto", "https"), ("X-Forwarded-For", "203.0.113.7"),
                                     ("X-Forwarded-Host", "www.example.org")])
    assert env["wsgi.url_scheme"] == "https"
    assert env["HTTPS"] == "on"
    assert env["REMOTE_ADDR"] == "203.0.113.7"
    assert env["HTTP_HOST"] == "www.example.org"
    assert env["SERVER_NAME"] == "www.example.org" and env["SERVER_PORT"] == "443"


def test_the_client_is_the_rightmost_address_no_trusted_proxy_added(trusting):
    # Each proxy appends its peer: what a client wrote itself is leftmost.
    env = environ(trusting, headers=[("X-Forwarded-For", "6.6.6.6, 198.51.100.4, 127.0.0.1")])
    assert env["REMOTE_ADDR"] == "198.51.100.4"
    env = environ(trusting, headers=[("X-Forwarded-For", "6.6.6.6"), ("X-Forwarded-For", "198.51.100.9")])
    assert env["REMOTE_ADDR"] == "198.51.100.9"


def test_rfc7239_forwarded_wins_over_x_forwarded(trusting):
    env = environ(trusting, headers=[
        ("Forwarded", 'for=6.6.6.6, for="[2001:db8::17]:4711";proto=https;host="shop.example:8443"'),
        ("X-Forwarded-Proto", "http"), ("X-Forwarded-For", "9.9.9.9")])
    assert env["wsgi.url_scheme"] == "https"
    assert env["REMOTE_ADDR"] == "2001:db8::17"
    assert env["HTTP_HOST"] == "shop.example:8443"
    assert env["SERVER_NAME"] == "shop.example" and env["SERVER_PORT"] == "8443"


def test_unusable_values_change_nothing(trusting):
    env = environ(trusting, headers=[("X-Forwarded-Proto", "gopher"), ("X-Forwarded-For", "unknown"),
                                     ("X-Forwarded-Host", "evil.example/<script>")])
    assert env["wsgi.url_scheme"] == "http"
    assert env["REMOTE_ADDR"] == "127.0.0.1"
    assert env["HTTP_HOST"] == "origin.test:8000"


def test_from_an_untrusted_peer_the_fields_are_passed_through_and_ignored(distrusting):
    env = environ(distrusting, headers=[("X-Forwarded-Proto", "https"), ("X-Forwarded-For", "203.0.113.7"),
                                        ("X-Forwarded-Host", "www.example.org"),
                                        ("Forwarded", "for=203.0.113.8;proto=https")])
    assert env["wsgi.url_scheme"] == "http"
    assert "HTTPS" not in env
    assert env["REMOTE_ADDR"] == "127.0.0.1"
    assert env["HTTP_HOST"] == "origin.test:8000"
    assert env["HTTP_X_FORWARDED_PROTO"] == "https"
    assert env["HTTP_FORWARDED"] == "for=203.0.113.8;proto=https"


@pytest.mark.parametrize("bad", ["10.0.0.300", "10.0.0.0/33", "example.com", "::1/129"])
def test_a_bad_allow_list_is_refused_before_listening(bad):
    r = subprocess.run([BIN, "--forwarded-allow-ips", bad, "--bind", "127.0.0.1:1"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2
    assert "--forwarded-allow-ips" in r.stderr


def test_root_path_sets_script_name_and_strips_path_info():
    srv = start_server("--root-path", "/api/", app="wsgi_apps:application")
    try:
        env = environ(srv, "/api/environ/x")
        assert env["SCRIPT_NAME"] == "/api" and env["PATH_INFO"] == "/environ/x"
        # A path that does not start with the prefix (a proxy stripped it) is left whole.
        env = environ(srv, "/environ")
        assert env["SCRIPT_NAME"] == "/api" and env["PATH_INFO"] == "/environ"
    finally:
        srv.close()


def test_root_path_is_stripped_only_at_a_segment_boundary():
    srv = start_server("--root-path", "/env", app="wsgi_apps:application")
    try:
        env = environ(srv, "/environ")  # /env + "iron": not under /env
        assert env["PATH_INFO"] == "/environ"
    finally:
        srv.close()


def test_django_builds_https_urls_only_when_a_trusted_proxy_says_https():
    pytest.importorskip("django")
    srv = start_server(app="django_proxy:application")
    other = start_server("--forwarded-allow-ips", "10.1.2.3", app="django_proxy:application")
    try:
        hdrs = [("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "www.example.org")]
        got = environ(srv, "/where", hdrs)
        assert got["url"] == "https://www.example.org/where" and got["secure"] is True
        got = environ(other, "/where", hdrs)
        assert got["url"] == "http://origin.test:8000/where" and got["secure"] is False
    finally:
        srv.close()
        other.close()
