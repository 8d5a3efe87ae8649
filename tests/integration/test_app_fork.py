"""Apps that fork: a child holding the server's descriptors must not make
the loop act on a connection it has closed, and no descriptor the server
owns may reach a program the app executes.

An epoll registration lives as long as the open file description, so a
socket the server closed while a forked child still holds a copy would keep
reporting events for a connection the loop has freed, unless the loop
deletes each registration before it closes. Close-on-exec on every server
descriptor keeps them out of exec'd children (subprocess, os.posix_spawn)."""
import os
import signal
import socket
import struct
import threading

import pytest

import procfs
from conftest import HANDOFFS
from httpclient import Reader, get, req
from loadgen import wait_until

MODES = HANDOFFS + ["inline"]


def _server(server_factory, mode, *args, app):
    if mode == "inline":
        return server_factory(*args, "--inline", app=app)
    return server_factory(*args, app=app, handoff=mode)


def _read(sock):
    return Reader(sock).read_response()


def _server_end(port, client):
    """The server's end of client's connection as /proc/PID/fd names it,
    "socket:[INODE]", found in /proc/net/tcp by the two ports."""
    want = (f":{port:04X}", f":{client.getsockname()[1]:04X}")
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            field = line.split()
            if (field[1][-5:], field[2][-5:]) == want:
                return f"socket:[{field[9]}]"
    raise AssertionError(f"no socket from port {port} to {client.getsockname()}")


@pytest.mark.parametrize("mode", MODES)
def test_connection_closed_while_a_forked_child_holds_it_is_forgotten(server_factory, mode):
    """The keep-alive timeout closes the server's end of a connection whose
    socket a sleeping child still holds; the client then sends on it and
    resets it. Those events belong to nobody: a connection accepted after
    the first was freed (likely at the same address) must not get them."""
    srv = _server(server_factory, mode, "--keepalive-timeout", "1", app="fork_apps:sleeper")
    a = srv.connect(timeout=30)
    a.sendall(req("GET", "/?secs=60"))
    r = _read(a)
    assert r.status == 200
    child = int(r.body)
    try:
        # Past the keep-alive timeout the server closes its end of a (the
        # child's copy keeps the socket itself open, so a sees no EOF): the
        # server's descriptor for it is gone.
        mine = _server_end(srv.port, a)
        assert wait_until(lambda: mine not in procfs.fd_targets(srv.proc.pid), 30), \
            f"the server still holds {mine} past its keep-alive timeout"
        b = srv.connect(timeout=30)
        b.sendall(b"GET /?secs=0 HTTP/1.1\r\n")  # half a head: b waits in its first state
        a.sendall(req("GET", "/?secs=0"))
        a.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        a.close()  # a reset on the socket the child holds
        b.sendall(b"Host: localhost\r\n\r\n")
        rb = _read(b)
        assert rb.status == 200 and int(rb.body) > 0
        b.close()
        assert get(srv.port, "/?secs=0", timeout=30).status == 200
    finally:
        os.kill(child, signal.SIGKILL)
    assert srv.stop() == 0
    assert srv.sanitizer_reports() == [], srv.log_text()[-8000:]


@pytest.mark.parametrize("mode", [MODES[0], MODES[-1]])
def test_multiprocessing_fork_inside_a_request(server_factory, mode):
    """A Pool and a Process made with the fork start method inside a
    request; the forked workers hold the server's descriptors while they
    run. Connections are closed by the keep-alive timeout meanwhile."""
    srv = _server(server_factory, mode, "--keepalive-timeout", "1", app="fork_apps:pool")
    for _ in range(2):
        with srv.connect(timeout=60) as s:
            for _ in range(2):
                s.sendall(req("GET", "/"))
                r = _read(s)
                assert (r.status, r.body) == (200, b"140 9")
    assert get(srv.port, "/", timeout=60).body == b"140 9"
    assert srv.stop() == 0
    assert srv.sanitizer_reports() == [], srv.log_text()[-8000:]


@pytest.mark.parametrize("mode", [MODES[0], MODES[-1]])
def test_forked_child_can_be_terminated(server_factory, mode):
    """The loop's signals are blocked in every server thread (it reads them
    from a signalfd); a child the app forks must not inherit that, or
    Process.terminate() (and Pool's exit) would wait for ever."""
    srv = _server(server_factory, mode, app="fork_apps:terminate")
    r = get(srv.port, "/", timeout=30)
    # With SIGTERM blocked the app's join gives up and kills the child: -9.
    # (The body's second field, how long the join took, is not judged.)
    assert int(r.body.split()[0]) == -signal.SIGTERM, r.body
    assert srv.stop() == 0


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("mode", [MODES[0], MODES[-1]])
def test_forked_child_blocks_no_signal(server_factory, mode, workers):
    """Neither the loop's signals nor, with --workers, the supervisor's
    (SIGCHLD, SIGALRM, its real-time one) stay blocked in a child the app
    forks: it starts with the mask the server was started with (none)."""
    srv = _server(server_factory, mode, "--workers", workers, app="fork_apps:sigblk")
    assert int(get(srv.port, "/", timeout=30).body, 16) == 0
    assert srv.stop() == 0


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("mode", MODES)
def test_a_program_the_app_runs_blocks_no_signal_and_can_be_terminated(server_factory, mode, workers):
    """subprocess execs from vfork, past fork handlers: the program gets the
    mask of the thread that ran it. No server thread blocks a signal, so
    Popen.terminate() reaches it."""
    srv = _server(server_factory, mode, "--workers", workers, app="fork_apps:exec_sigblk")
    assert int(get(srv.port, "/", timeout=30).body, 16) == 0
    assert srv.stop() == 0
    srv = _server(server_factory, mode, "--workers", workers, app="fork_apps:exec_terminate")
    assert get(srv.port, "/", timeout=30).body == b"-15"
    assert srv.stop() == 0


def test_subprocess_under_load(server_factory):
    """Many concurrent requests, each running `true` with subprocess: forks
    while other connections are accepted and closed."""
    srv = server_factory("--blocking-threads", "4", "--keepalive-timeout", "1", app="fork_apps:spawn")
    errors, ok = [], []

    def client(n):
        try:
            for i in range(n):
                close = i % 2 == 0  # half the connections closed by the client right away
                with srv.connect(timeout=30) as s:
                    s.sendall(req("GET", "/", [("Connection", "close")] if close else []))
                    r = _read(s)
                    if (r.status, r.body) != (200, b"true 0"):
                        errors.append(r)
                    else:
                        ok.append(1)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=client, args=(20,)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    assert len(ok) == 160
    assert get(srv.port, "/", timeout=30).body == b"true 0"
    assert srv.stop() == 0
    assert srv.sanitizer_reports() == [], srv.log_text()[-8000:]


# What a descriptor of the server's own looks like in /proc/PID/fd.
SERVER_KINDS = ("socket:", "anon_inode:[eventfd]", "anon_inode:[eventpoll]", "anon_inode:[signalfd]",
                "anon_inode:[timerfd]", "anon_inode:[pidfd]")


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("mode", MODES)
def test_exec_child_inherits_no_server_descriptor(server_factory, tmp_path, mode, workers):
    """The app runs a shell that lists its own descriptors: beyond stdin,
    stdout (the app's pipe) and stderr (the server's log) it may hold only
    the pipe of its own command substitution; no socket, eventfd, epoll or
    signalfd, and not the access log or stats file the server opened."""
    access, stats = tmp_path / "access.log", tmp_path / "stats.json"
    srv = _server(server_factory, mode, "--workers", workers, f"--access-log={access}",
                  "--stats-json", str(stats), app="fork_apps:fds")
    # A connection open while the child runs, and a request served before.
    other = srv.connect(timeout=30)
    assert get(srv.port, "/", timeout=30).status == 200
    r = get(srv.port, "/", timeout=30)
    assert r.status == 200
    seen = {}
    for line in r.body.decode().splitlines():
        fd, _, target = line.partition(" -> ")
        seen[int(fd)] = target
    leaked = {fd: t for fd, t in seen.items()
              if fd > 2 and (t.startswith(SERVER_KINDS) or not t.startswith("pipe:"))}
    assert not leaked, seen
    other.close()
    assert srv.stop() == 0
