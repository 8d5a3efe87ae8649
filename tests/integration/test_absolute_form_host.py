"""An absolute-form request target names the host: its authority overrides
the Host field (RFC 9112 §3.2.2: the server MUST ignore Host then), so the
app's HTTP_HOST is the target's authority whatever Host says. A Host field or
an authority that is not uri-host [":" port] is a 400 (RFC 9112 §3.2)."""
import json

import pytest

from conftest import start_server
from httpclient import req, request

APP = "wsgi_apps:application"


@pytest.fixture(scope="module", params=["pool", "inline"])
def srv(request):
    s = start_server(*(["--inline"] if request.param == "inline" else []), app=APP)
    request.addfinalizer(s.close)
    return s


def environ_for(srv, raw):
    resp = request(srv.port, raw)
    assert resp.status == 200, resp
    return json.loads(resp.body)


def test_absolute_form_authority_overrides_a_disagreeing_host(srv):
    env = environ_for(srv, req("GET", "http://a.example/environ/x?q=1", host=False,
                               headers=[("Host", "b.example")]))
    assert env["HTTP_HOST"] == "a.example"
    assert env["PATH_INFO"] == "/environ/x" and env["QUERY_STRING"] == "q=1"


def test_absolute_form_authority_keeps_its_port_and_case(srv):
    env = environ_for(srv, req("GET", "HTTPS://A.Example:8443/environ", host=False,
                               headers=[("Host", "b.example:80")]))
    assert env["HTTP_HOST"] == "A.Example:8443"


def test_absolute_form_authority_with_an_empty_path(srv):
    env = environ_for(srv, req("GET", "http://a.example?x=1", host=False,
                               headers=[("Host", "b.example")]))
    assert env["PATH_INFO"] == "/" and env["HTTP_HOST"] == "a.example"


def test_absolute_form_supplies_the_host_an_http10_request_lacks(srv):
    env = environ_for(srv, req("GET", "http://a.example/environ", version="1.0", host=False))
    assert env["HTTP_HOST"] == "a.example"


def test_absolute_form_in_http11_still_needs_a_host_field(srv):
    resp = request(srv.port, req("GET", "http://a.example/environ", host=False))
    assert resp.status == 400


def test_origin_form_uses_the_host_field(srv):
    env = environ_for(srv, req("GET", "/environ", host=False, headers=[("Host", "b.example")]))
    assert env["HTTP_HOST"] == "b.example"


@pytest.mark.parametrize("host", ["a b", "evil.example/x?y@z", 'a"<b>', "localhost:65536", ":80", "[::1"])
def test_an_invalid_host_field_is_a_400_and_never_reaches_the_app(srv, host):
    resp = request(srv.port, req("GET", "/environ", host=False, headers=[("Host", host)]))
    assert resp.status == 400, resp


@pytest.mark.parametrize("target", ['http://a"<b>/environ', "http://a%zz/environ", "http://:80/environ",
                                    "http://[::1/environ"])
def test_an_invalid_absolute_form_authority_is_a_400(srv, target):
    resp = request(srv.port, req("GET", target, host=False, headers=[("Host", "b.example")]))
    assert resp.status == 400, resp


def test_a_valid_ip_literal_host_reaches_the_app(srv):
    env = environ_for(srv, req("GET", "/environ", host=False, headers=[("Host", "[::1]:8000")]))
    assert env["HTTP_HOST"] == "[::1]:8000"
