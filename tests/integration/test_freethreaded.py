"""cserve on a free-threaded CPython (PEP 703): the GIL stays off, and the
pool threads, which then run the app in parallel, keep every response right
while they share state (the app's and the bridge's own: the HTTP_* key
cache, the environ template, wsgi.errors).

Runs only when the binary under test is a free-threaded build (`cserve
--version` says "free-threaded"); build one with `make test-freethreaded`
or docs/python.md's "Free-threaded Python"."""
import os
import random
import re
import socket
import subprocess
import threading

import pytest

from conftest import BIN, ROOT
from httpclient import Reader, req

APP = "ft_apps:application"
THREADS = ["--blocking-threads", "4"]


def _version():
    try:
        return subprocess.run([BIN, "--version"], capture_output=True, text=True, timeout=30).stdout
    except OSError as e:
        return f"(cannot run {BIN}: {e})"


VERSION = _version()
if "free-threaded" not in VERSION:
    pytest.skip(f"{BIN} is not a free-threaded build (--version: {VERSION.strip()!r}); "
                "see `make test-freethreaded`", allow_module_level=True)


def load(port, paths, clients=8, headers_for=None):
    """Send every path once over `clients` keep-alive connections in
    parallel; returns {index: Response}. headers_for(i) gives extra header
    pairs for request i."""
    results = {}
    errors = []
    lock = threading.Lock()
    work = list(enumerate(paths))
    random.Random(7).shuffle(work)
    shares = [work[c::clients] for c in range(clients)]

    def client(share):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
                reader = Reader(s)
                for i, path in share:
                    extra = headers_for(i) if headers_for else ()
                    s.sendall(req("GET", path, extra))
                    resp = reader.read_response()
                    with lock:
                        results[i] = resp
        except Exception as e:  # reported by the test, not lost in a thread
            with lock:
                errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(sh,)) for sh in shares]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    assert len(results) == len(paths)
    return results


def f(n):
    """apps/ft_apps.py's f: what /cache?k=N must answer."""
    return sum(i * i for i in range(n % 97 + 50)) + n


def body_of(resp):
    assert resp.status == 200, resp
    return resp.body.decode()


def test_version_and_start_up_line_say_free_threaded_gil_disabled(server_factory):
    assert re.search(r"Python 3\.\d+\.\d+\S* free-threaded at \S+, GIL disabled", VERSION), VERSION
    srv = server_factory(*THREADS, app=APP)
    line = next(ln for ln in srv.log_text().splitlines() if " serving " in ln)
    assert "free-threaded at " in line and ", GIL disabled" in line, line


def test_gil_stays_disabled_inside_the_app(server_factory):
    srv = server_factory(*THREADS, app=APP)
    # Each pool thread, after using wsgi.input, the file wrapper and
    # start_response: nothing cserve gives the app turns the GIL on.
    results = load(srv.port, ["/gil"] * 64)
    assert {body_of(r) for r in results.values()} == {"False"}


def test_shared_dict_cache_under_load(server_factory, handoff):
    srv = server_factory(*THREADS, app=APP, handoff=handoff)
    keys = [i % 300 for i in range(2400)]
    results = load(srv.port, [f"/cache?k={k}" for k in keys])
    bad = [(keys[i], body_of(r)) for i, r in results.items() if body_of(r) != str(f(keys[i]))]
    assert not bad, bad[:5]


def test_counter_under_a_lock_counts_every_request(server_factory, handoff):
    srv = server_factory(*THREADS, app=APP, handoff=handoff)
    n = 2000
    results = load(srv.port, ["/count"] * n)
    seen = sorted(int(body_of(r)) for r in results.values())
    assert seen == list(range(1, n + 1))  # each value once: no lost update
    total = load(srv.port, ["/total"], clients=1)
    assert body_of(total[0]) == str(n)


def test_logging_from_all_pool_threads_keeps_every_line_whole(server_factory):
    srv = server_factory(*THREADS, app=APP)
    n = 800
    load(srv.port, [f"/log?i={i}" for i in range(n)])
    srv.stop()
    lines = [ln for ln in srv.log_text().splitlines() if "ft-log-line" in ln]
    whole = re.compile(r"^ft-log-line (\d+) x{64}$")
    assert all(whole.match(ln) for ln in lines), [ln for ln in lines if not whole.match(ln)][:3]
    assert sorted(int(whole.match(ln).group(1)) for ln in lines) == list(range(n))


def test_header_keys_first_seen_on_parallel_threads(server_factory, handoff):
    # Many header names, each new to the server, arriving on four pool
    # threads at once: the bridge's HTTP_* key cache is filled from all of
    # them in parallel, and must map every name to its own key. A race
    # there seldom shows in the responses (its window is a few stores); the
    # TSan run of this test in make test-freethreaded reports it.
    srv = server_factory(*THREADS, app=APP, handoff=handoff)
    names = 400

    def headers_for(i):
        a, b = i % names, (i * 7 + 3) % names
        return [(f"X-Ft-{a}-Name", f"v{i}a"), (f"X-FT-{b}-name", f"v{i}b")]

    results = load(srv.port, ["/headers"] * 1600, headers_for=headers_for)
    for i, r in results.items():
        a, b = i % names, (i * 7 + 3) % names
        want = {f"HTTP_X_FT_{a}_NAME": f"v{i}a"}
        want[f"HTTP_X_FT_{b}_NAME"] = (want[f"HTTP_X_FT_{b}_NAME"] + f", v{i}b"
                                       if a == b else f"v{i}b")
        got = dict(ln.split("=", 1) for ln in body_of(r).splitlines())
        assert got == want, (i, got, want)


def test_python_gil_1_turns_it_on_and_the_start_up_line_says_so(server_factory):
    # The line asks the running interpreter, not the build.
    srv = server_factory(*THREADS, app=APP, env=dict(os.environ, PYTHON_GIL="1"))
    line = next(ln for ln in srv.log_text().splitlines() if " serving " in ln)
    assert ", GIL enabled" in line, line
    assert body_of(load(srv.port, ["/gil"], clients=1)[0]) == "True"


def _prefix():
    return re.search(r"free-threaded at (\S+?),", VERSION).group(1)


def test_virtualenv_of_the_free_threaded_python_is_served(tmp_path, server_factory):
    venv = tmp_path / "venv"
    subprocess.run([f"{_prefix()}/bin/python3.13t", "-m", "venv", "--without-pip", str(venv)], check=True)
    srv = server_factory("--virtualenv", str(venv), *THREADS, app=APP)
    assert f"virtualenv {venv}" in srv.log_text()
    assert body_of(load(srv.port, ["/gil"], clients=1)[0]) == "False"


def test_virtualenv_of_the_gil_build_of_the_same_version_is_refused(tmp_path):
    # What `python3.13 -m venv` (the GIL build) leaves: its site-packages
    # under lib/python3.13, which this interpreter would never look in.
    venv = tmp_path / "venv"
    (venv / "lib" / "python3.13" / "site-packages").mkdir(parents=True)
    (venv / "bin").mkdir()
    version = re.search(r"Python (3\.\d+\.\d+)", VERSION).group(1)
    (venv / "pyvenv.cfg").write_text(f"home = /usr/bin\nversion = {version}\n")
    p = subprocess.run([BIN, "--bind", "127.0.0.1:0", "--virtualenv", str(venv)], cwd=str(ROOT),
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p.stderr
    assert "is not of a free-threaded Python" in p.stderr and "python3.13t -m venv" in p.stderr, p.stderr
