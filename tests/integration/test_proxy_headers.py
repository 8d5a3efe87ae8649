"""Proxy headers are believed only from --forwarded-allow-ips peers (none by
default), and only the fields --forwarded-headers names (X-Forwarded-For and
X-Forwarded-Proto by default; X-Forwarded-Host and RFC 7239 Forwarded only
when asked, and never both families): they set REMOTE_ADDR (the rightmost
address no listed proxy added), wsgi.url_scheme and the host. From any other
peer, and for any field not named, they stay plain HTTP_* keys and change
nothing. --root-path mounts the app under a prefix (SCRIPT_NAME)."""
import http.client
import json
import subprocess

import pytest

from conftest import BIN, start_server

HOSTILE = [("Forwarded", "for=6.6.6.6;proto=https;host=evil.example"), ("X-Forwarded-For", "6.6.6.6"),
           ("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "evil.example")]


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


def assert_unchanged(env):
    assert env["REMOTE_ADDR"] == "127.0.0.1"
    assert env["wsgi.url_scheme"] == "http" and "HTTPS" not in env
    assert env["HTTP_HOST"] == "origin.test:8000"
    assert env["SERVER_NAME"] == "127.0.0.1"


@pytest.fixture(scope="module")
def default():
    srv = start_server(app="wsgi_apps:application")
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def trusting():
    srv = start_server("--forwarded-allow-ips", "127.0.0.1", app="wsgi_apps:application")
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def distrusting():
    srv = start_server("--forwarded-allow-ips", "10.1.2.3, 192.168.0.0/16", app="wsgi_apps:application")
    yield srv
    srv.close()


def test_by_default_no_peer_is_trusted_not_even_loopback(default):
    # A local client of a server on 127.0.0.1 cannot choose its REMOTE_ADDR,
    # scheme or host with either family of fields.
    env = environ(default, headers=HOSTILE)
    assert_unchanged(env)
    assert env["HTTP_X_FORWARDED_FOR"] == "6.6.6.6"  # passed on, for the app to judge


def test_a_trusted_peer_sets_client_and_scheme_but_not_the_host_unless_asked(trusting):
    env = environ(trusting, headers=[("X-Forwarded-Proto", "https"), ("X-Forwarded-For", "203.0.113.7"),
                                     ("X-Forwarded-Host", "www.example.org")])
    assert env["wsgi.url_scheme"] == "https"
    assert env["HTTPS"] == "on"
    assert env["REMOTE_ADDR"] == "203.0.113.7"
    assert env["HTTP_HOST"] == "origin.test:8000"
    assert env["HTTP_X_FORWARDED_HOST"] == "www.example.org"


def test_x_forwarded_host_is_read_when_asked_for():
    srv = start_server("--forwarded-allow-ips", "127.0.0.1", "--forwarded-headers",
                       "x-forwarded-for,x-forwarded-proto,x-forwarded-host", app="wsgi_apps:application")
    try:
        env = environ(srv, headers=[("X-Forwarded-Proto", "https"), ("X-Forwarded-Host", "www.example.org")])
        assert env["HTTP_HOST"] == "www.example.org"
        assert env["SERVER_NAME"] == "www.example.org" and env["SERVER_PORT"] == "443"
        env = environ(srv, headers=[("X-Forwarded-Host", "evil.example/<script>")])
        assert env["HTTP_HOST"] == "origin.test:8000"
    finally:
        srv.close()


def test_the_client_is_the_rightmost_address_no_trusted_proxy_added(trusting):
    # Each proxy appends its peer: what a client wrote itself is leftmost.
    env = environ(trusting, headers=[("X-Forwarded-For", "6.6.6.6, 198.51.100.4, 127.0.0.1")])
    assert env["REMOTE_ADDR"] == "198.51.100.4"
    env = environ(trusting, headers=[("X-Forwarded-For", "6.6.6.6"), ("X-Forwarded-For", "198.51.100.9")])
    assert env["REMOTE_ADDR"] == "198.51.100.9"


def test_forwarded_is_not_read_unless_asked_for(trusting):
    env = environ(trusting, headers=[("Forwarded", "for=6.6.6.6;proto=https;host=evil.example"),
                                     ("X-Forwarded-For", "203.0.113.7")])
    assert env["REMOTE_ADDR"] == "203.0.113.7"
    assert env["wsgi.url_scheme"] == "http"
    assert env["HTTP_HOST"] == "origin.test:8000"


def test_rfc7239_forwarded_when_asked_for_and_then_x_forwarded_is_not_read():
    srv = start_server("--forwarded-allow-ips", "127.0.0.1", "--forwarded-headers", "forwarded",
                       app="wsgi_apps:application")
    try:
        env = environ(srv, headers=[
            ("Forwarded", 'for=6.6.6.6, for="[2001:db8::17]:4711";proto=https;host="shop.example:8443"'),
            ("X-Forwarded-Proto", "http"), ("X-Forwarded-For", "9.9.9.9")])
        assert env["wsgi.url_scheme"] == "https"
        assert env["REMOTE_ADDR"] == "2001:db8::17"
        assert env["HTTP_HOST"] == "shop.example:8443"
        assert env["SERVER_NAME"] == "shop.example" and env["SERVER_PORT"] == "8443"
        env = environ(srv, headers=[("X-Forwarded-For", "9.9.9.9"), ("X-Forwarded-Proto", "https")])
        assert_unchanged(env)
    finally:
        srv.close()


def test_unusable_values_change_nothing(trusting):
    env = environ(trusting, headers=[("X-Forwarded-Proto", "gopher"), ("X-Forwarded-For", "unknown")])
    assert_unchanged(env)


def test_from_an_untrusted_peer_the_fields_are_passed_through_and_ignored(distrusting):
    env = environ(distrusting, headers=[("X-Forwarded-Proto", "https"), ("X-Forwarded-For", "203.0.113.7"),
                                        ("X-Forwarded-Host", "www.example.org"),
                                        ("Forwarded", "for=203.0.113.8;proto=https")])
    assert_unchanged(env)
    assert env["HTTP_X_FORWARDED_PROTO"] == "https"
    assert env["HTTP_FORWARDED"] == "for=203.0.113.8;proto=https"


@pytest.mark.parametrize("args", [["--forwarded-allow-ips", "10.0.0.300"], ["--forwarded-allow-ips", "10.0.0.0/33"],
                                  ["--forwarded-allow-ips", "example.com"], ["--forwarded-allow-ips", "::1/129"],
                                  ["--forwarded-headers", "forwarded,x-forwarded-for"],
                                  ["--forwarded-headers", "x-real-ip"]])
def test_a_bad_proxy_option_is_refused_before_listening(args):
    r = subprocess.run([BIN, *args, "--bind", "127.0.0.1:1"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert args[0] in r.stderr


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
    srv = start_server("--forwarded-allow-ips", "127.0.0.1", "--forwarded-headers",
                       "x-forwarded-proto,x-forwarded-host", app="django_proxy:application")
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
