"""The server's processes and signals: graceful SIGTERM with requests in
flight, idle SIGTERM, --workers 2 (both serve, a killed worker is respawned,
SIGTERM to the supervisor stops every worker), and the connections waiting
in the accept backlog at SIGTERM, served even while accepts are paused for
want of descriptors; --pid-file held by one live server and removed at exit
only while it holds that server's pid."""
import json
import os
import signal
import socket
import time

import pytest

import procfs
from conftest import APPS, BIN, ROOT, Server, free_port, start_server
from httpclient import Reader, get, req
from loadgen import wait_until
from procfs import alive, fd_count

APP = "wsgi_apps:application"
RECORDING_APP = "recording_apps:app"


def _wait_gone(pid, timeout=30.0):
    """True once pid no longer runs (absent, or a zombie awaiting its
    reaper), False if it still runs after timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def _hello_ok(port):
    r = get(port, "/hello", timeout=5)
    assert r.status == 200 and r.body == b"hello", r


def _pid_of(port, timeout=10.0):
    resp = get(port, "/pid", headers=[("Connection", "close")], timeout=timeout)
    assert resp.status == 200
    return int(resp.body)


def _starts(path):
    return path.read_text().count("start") if path.exists() else 0


def test_sigterm_completes_in_flight_requests_then_exits_0(server_factory, handoff, tmp_path):
    # The requests end when the test creates the gate, after SIGTERM; an exit
    # at the graceful timeout (60 s) would outlast the wait for it (30 s).
    srv = server_factory("--blocking-threads", "4", "--graceful-timeout", "60", app=APP, handoff=handoff)
    mark, gate = tmp_path / "mark", tmp_path / "gate"
    # an idle keep-alive connection, to be closed by the shutdown
    idle = srv.connect(timeout=10)
    idle.sendall(req("GET", "/hello"))
    ridle = Reader(idle)
    assert ridle.read_response().body == b"hello"
    socks = []
    try:
        for _ in range(3):
            s = srv.connect(timeout=30)
            s.sendall(req("GET", f"/sleep?mark={mark}&gate={gate}"))
            socks.append(s)
        assert wait_until(lambda: _starts(mark) == 3, 30), f"{_starts(mark)} of 3 requests reached the app"
        srv.proc.send_signal(signal.SIGTERM)
        assert wait_until(lambda: "stopping:" in srv.log_text(), 30), srv.log_text()
        assert ridle.closed(timeout=30), "idle keep-alive connection not closed on SIGTERM"
        assert srv.proc.poll() is None  # the requests in the app hold the exit
        gate.touch()
        for s in socks:
            r = Reader(s)
            resp = r.read_response()
            assert resp.status == 200 and resp.body == b"slept"
            assert resp.header("connection", "").lower() == "close"
            assert r.closed(timeout=30)
        assert srv.proc.wait(timeout=30) == 0
    finally:
        for s in socks + [idle]:
            s.close()
    assert "Traceback" not in srv.log_text()


def test_sigterm_stops_accepting_new_connections(server_factory, tmp_path):
    """After SIGTERM the listener closes (connections are refused) while an
    in-flight request still runs (held in the app until the test creates
    its gate). Polled with a deadline, not assumed to happen within a fixed
    delay; a connection that got in before the close sat in the backlog
    and may be served (test_connections_in_the_backlog_at_sigterm_are_served)."""
    srv = server_factory("--graceful-timeout", "60", app=APP)
    mark, gate = tmp_path / "mark", tmp_path / "gate"
    with srv.connect(timeout=30) as busy:
        busy.sendall(req("GET", f"/sleep?mark={mark}&gate={gate}"))
        assert wait_until(lambda: _starts(mark) == 1, 30), "the request never reached the app"
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        refused_at = None
        while time.monotonic() - t0 < 30:
            try:
                # A SYN that meets the listener while close() tears it down is
                # dropped without an answer (the socket is no longer LISTEN
                # and not yet gone); the client resends it after its initial
                # retransmission timeout, 1 s, and that one is refused. So
                # the connect is given longer than one retransmission.
                socket.create_connection(("127.0.0.1", srv.port), timeout=5).close()
            except (ConnectionRefusedError, ConnectionResetError):
                # refused once the listener is closed; reset if the SYN
                # landed in its backlog just as it closed
                refused_at = time.monotonic() - t0
                break
            time.sleep(0.01)
        assert refused_at is not None, "still accepting connections 30 s after SIGTERM"
        assert srv.proc.poll() is None  # the in-flight request holds the exit
        gate.touch()
        resp = Reader(busy).read_response()
        assert resp.body == b"slept" and resp.header("connection", "").lower() == "close"
    assert srv.proc.wait(timeout=30) == 0


def test_sigterm_idle_server_exits_0_promptly(server_factory):
    # promptly: not at the graceful timeout (60 s), which outlasts the wait (30 s)
    srv = server_factory("--graceful-timeout", "60", app=APP)
    assert get(srv.port, "/hello").status == 200
    assert srv.stop(signal.SIGTERM, timeout=30) == 0


def test_sigint_idle_server_exits_0(server_factory):
    srv = server_factory()
    assert srv.stop(signal.SIGINT, timeout=10) == 0


# ------------------------------------------------- the accept backlog at SIGTERM

def test_connections_in_the_backlog_at_sigterm_are_served(server_factory):
    """Connections the kernel accepted for us before SIGTERM are ours: the
    server takes them from the backlog before closing the listener and
    serves their requests, then closes. Closing the listener without that
    resets them. The server is stopped (SIGSTOP) so the connections wait
    in the backlog while SIGTERM arrives. Whether a response says
    "Connection: close" is not this test's: the handler runs on whichever
    thread resumes first, so the loop may take the connections and start
    their requests a pass before it reads the signal, and a head built
    before the stop says keep-alive (the close after it loses nothing)."""
    srv = server_factory("--graceful-timeout", "10", app=RECORDING_APP)
    _hello_ok(srv.port)
    os.kill(srv.proc.pid, signal.SIGSTOP)
    socks = []
    try:
        # SIGTERM first, so the loop sees it before the listener's readiness
        srv.proc.send_signal(signal.SIGTERM)
        for i in range(5):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.sendall(req("GET", f"/hello?i={i}"))
            socks.append(s)
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)
    for i, s in enumerate(socks):
        rd = Reader(s)
        try:
            r = rd.read_response()
        except (EOFError, ConnectionResetError) as e:
            raise AssertionError(f"backlog connection {i} dropped at SIGTERM: {e!r}") from None
        assert r.status == 200 and r.body == b"hello", r
        assert rd.closed(timeout=5)
        s.close()
    assert srv.proc.wait(timeout=10) == 0


def test_sigterm_takes_the_backlog_while_accepts_are_paused(tmp_path):
    """SIGTERM while accepts are paused (out of descriptors): the server still
    tries to accept before it closes the listener, so a connection already in
    the backlog is served once descriptors have been freed, not reset."""
    port = free_port()
    srv = Server(["prlimit", "--nofile=40:40", BIN, "--bind", f"127.0.0.1:{port}",
                  "--app", "native-hello", "--header-timeout", "30"], port, cwd=str(ROOT))
    held = []
    waiting = socket.socket()
    try:
        srv.wait_ready()
        # Idle connections until the server has no descriptor left (its
        # accept after the last one fails): the next one waits in the backlog.
        while "pausing accepts" not in srv.log_text():
            assert len(held) < 60, srv.log_text()
            held.append(srv.connect())
            time.sleep(0.02)
        waiting = srv.connect()
        waiting.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        # Free descriptors (more than the backlog ahead of `waiting`) and wait
        # until the server has closed its ends. SIGTERM is meant to land in
        # the 100 ms pause; should it land after, `waiting` is accepted as
        # usual and the test passes without reaching that path.
        fds = fd_count(srv.proc.pid)
        for s in held[:10]:
            s.close()
        assert wait_until(lambda: fd_count(srv.proc.pid) <= fds - 10, 30, interval=0.002), fd_count(srv.proc.pid)
        srv.proc.send_signal(signal.SIGTERM)
        waiting.settimeout(30)
        try:
            resp = waiting.recv(4096)
        except ConnectionResetError:
            resp = b"reset"
        assert resp.startswith(b"HTTP/1.1 200 "), resp
        waiting.close()  # its lingering close ends
        assert srv.proc.wait(timeout=30) == 0
    finally:
        for s in held:
            s.close()
        waiting.close()
        srv.close()


# ------------------------------------------------------------- --workers 2

def _collect_pids(port, want=2, tries=3000, timeout=30.0, exclude=()):
    """Fetch /pid over fresh connections until `want` distinct pids (not in
    exclude) are seen; bounded in count and time. Failed connections are
    retried (a worker may be restarting)."""
    pids = set()
    deadline = time.monotonic() + timeout
    for _ in range(tries):
        if time.monotonic() > deadline:
            break
        try:
            pids.add(_pid_of(port))
        except (OSError, EOFError):
            time.sleep(0.05)
            continue
        if len(pids - set(exclude)) >= want:
            break
        time.sleep(0.002)
    return pids


def test_workers_2_both_serve(server_factory):
    srv = server_factory("--workers", "2", app=APP)
    pids = _collect_pids(srv.port)
    assert len(pids) == 2, pids
    assert srv.proc.pid not in pids  # the supervisor does not serve
    env = json.loads(get(srv.port, "/environ").body)
    assert env["wsgi.multiprocess"] is True
    assert srv.stop() == 0


def test_workers_2_sigkill_one_worker_is_respawned(server_factory):
    srv = server_factory("--workers", "2", app=APP)
    pids = _collect_pids(srv.port)
    assert len(pids) == 2, pids
    victim = sorted(pids)[0]
    os.kill(victim, signal.SIGKILL)
    assert _wait_gone(victim)
    # requests succeed again (the other worker serves); 30 s only detects a hang
    deadline = time.monotonic() + 30
    ok = 0
    while ok < 20 and time.monotonic() < deadline:
        try:
            if _pid_of(srv.port) != victim:
                ok += 1
        except (OSError, EOFError):
            ok = 0
            time.sleep(0.05)
    assert ok == 20, "requests do not succeed after a worker was killed"
    # and a new worker appears
    new = _collect_pids(srv.port, want=2, exclude=[victim]) - pids
    assert new, "no new worker pid after SIGKILL"
    assert victim not in _collect_pids(srv.port, want=3, tries=50)
    all_pids = (pids | new) - {victim}
    assert srv.stop(signal.SIGTERM, timeout=30) == 0
    for p in all_pids:
        assert _wait_gone(p), f"worker {p} survived the supervisor"


def _kill_workers_as_they_start(sup, slots, rounds):
    """SIGKILL each of sup's workers as soon as it runs, rounds times over,
    so that every slot's workers die within a second of starting (a crash
    loop: after five such deaths in a row the supervisor pauses before it
    starts the slot's next). Returns the pids killed."""
    killed = set()
    for n in range(rounds):
        fresh = wait_until(lambda: len(set(procfs.children(sup)) - killed) == slots
                           and set(procfs.children(sup)) - killed, 15, interval=0.005)
        assert fresh, f"round {n}: expected {slots} new workers under {sup}, found {procfs.children(sup)}"
        for pid in fresh:
            os.kill(pid, signal.SIGKILL)
        killed |= fresh
        for pid in fresh:
            assert _wait_gone(pid, 5), f"worker {pid} survived SIGKILL"
    return killed


def test_workers_that_keep_dying_at_start_are_started_again(server_factory):
    """Every slot in a crash loop at once: none has a process while it
    pauses, and the supervisor still starts a worker in each afterwards."""
    srv = server_factory("--workers", "2", app=APP)
    sup = srv.proc.pid
    killed = _kill_workers_as_they_start(sup, 2, 6)
    workers = wait_until(lambda: len(set(procfs.children(sup)) - killed) == 2, 15)
    assert workers, f"no workers again under {sup}: {procfs.children(sup)}\n{srv.log_text()}"
    assert srv.proc.poll() is None, srv.log_text()
    assert wait_until(lambda: _answers(srv.port), 15), srv.log_text()
    assert srv.stop(signal.SIGTERM, timeout=15) == 0


def test_sigterm_while_workers_keep_dying_at_start_exits_0(server_factory):
    srv = server_factory("--workers", "2", app=APP)
    sup = srv.proc.pid
    _kill_workers_as_they_start(sup, 2, 6)
    assert srv.stop(signal.SIGTERM, timeout=15) == 0
    assert "supervisor: stopped" in srv.log_text(), srv.log_text()


def _answers(port):
    try:
        _hello_ok(port)
        return True
    except (OSError, EOFError, AssertionError):
        return False


def test_workers_2_sigterm_to_supervisor_stops_all(server_factory):
    # the graceful timeout (60 s) outlasts the wait (30 s): idle workers stop at once
    srv = server_factory("--workers", "2", "--graceful-timeout", "60", app=APP)
    pids = _collect_pids(srv.port)
    assert len(pids) == 2, pids
    assert srv.stop(signal.SIGTERM, timeout=30) == 0
    for p in pids:
        assert _wait_gone(p), f"orphan worker {p} still running"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", srv.port), timeout=1).close()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_second_server_refuses_a_running_servers_pid_file(tmp_path, workers):
    pid_file = tmp_path / "cserve.pid"
    first = start_server("--pid-file", str(pid_file), "--workers", workers)
    try:
        assert int(pid_file.read_text()) == first.proc.pid
        port = free_port()
        second = start_server("--pid-file", str(pid_file), port=port, wait=False)
        try:
            assert second.proc.wait(timeout=20) == 2, second.log_text()
            assert f"pid {first.proc.pid}" in second.log_text(), second.log_text()
            with pytest.raises(OSError):  # refused before it listened
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
        finally:
            second.killed = True
            second.close()
        # the file still names the running server, so kill -HUP $(cat FILE) reaches it
        assert int(pid_file.read_text()) == first.proc.pid
        assert get(first.port, "/").status == 200
    finally:
        first.close()
    assert not pid_file.exists()


def test_a_pid_file_no_server_holds_is_taken_over(tmp_path):
    # Left by a server killed with SIGKILL, or holding a pid some other
    # live process has since: no running cserve holds it.
    pid_file = tmp_path / "cserve.pid"
    dead = start_server("--pid-file", str(pid_file), killed=True)
    dead.proc.kill()
    dead.proc.wait()
    dead.close()
    assert int(pid_file.read_text()) == dead.proc.pid
    srv = start_server("--pid-file", str(pid_file))
    try:
        assert int(pid_file.read_text()) == srv.proc.pid
    finally:
        srv.close()
    pid_file.write_text(f"{os.getpid()}\n")  # a live process, but not a server
    srv = start_server("--pid-file", str(pid_file))
    try:
        assert int(pid_file.read_text()) == srv.proc.pid
    finally:
        srv.close()
    assert not pid_file.exists()


@pytest.mark.parametrize("how", ["rewritten", "replaced"])
def test_at_exit_a_pid_file_that_no_longer_holds_our_pid_is_left(tmp_path, how):
    pid_file = tmp_path / "cserve.pid"
    srv = start_server("--pid-file", str(pid_file))
    try:
        assert int(pid_file.read_text()) == srv.proc.pid
        if how == "rewritten":  # the same file, another pid in it
            with open(pid_file, "r+") as f:
                f.truncate(0)
                f.write("4194000\n")
        else:  # another file in its place
            other = tmp_path / "other.pid"
            other.write_text("4194000\n")
            os.replace(other, pid_file)
    finally:
        srv.close()
    assert pid_file.read_text() == "4194000\n"


def test_a_pid_file_is_removed_when_a_stuck_app_cuts_the_exit_short(tmp_path):
    """A lone worker whose app still holds a request at --graceful-timeout
    exits without finalising Python: the pid file goes all the same, so no
    stale file names a pid the kernel may hand to another process."""
    pid_file = tmp_path / "cserve.pid"
    srv = start_server("--pid-file", str(pid_file), "--graceful-timeout", "1", app="hang_apps:application")
    mark = tmp_path / "mark"
    try:
        assert int(pid_file.read_text()) == srv.proc.pid
        s = srv.connect(timeout=10)
        s.sendall(b"GET /hang?mark=%s HTTP/1.1\r\nHost: x\r\n\r\n" % str(mark).encode())
        assert wait_until(lambda: _starts(mark) == 1, 30), "the request never reached the app"
        assert srv.stop(signal.SIGTERM, timeout=30) == 0
        assert "exiting with 1 request(s) unfinished" in srv.log_text(), srv.log_text()
        s.close()
    finally:
        srv.close()
    assert not pid_file.exists(), pid_file.read_text()


def test_an_app_that_reads_the_pid_file_does_not_release_it(tmp_path):
    """With one worker the app runs in the process that holds the pid file:
    the app opening and closing that file (to read the server's pid) must
    not let a second server take the file over."""
    pid_file = tmp_path / "cserve.pid"
    first = start_server("--pid-file", str(pid_file), app=APP)
    try:
        r = get(first.port, f"/cat?path={pid_file}")
        assert r.status == 200 and int(r.body) == first.proc.pid, r
        second = start_server("--pid-file", str(pid_file), app=APP, wait=False)
        try:
            assert second.proc.wait(timeout=20) == 2, second.log_text()
            assert f"pid {first.proc.pid}" in second.log_text(), second.log_text()
        finally:
            second.killed = True
            second.close()
        assert int(pid_file.read_text()) == first.proc.pid
    finally:
        first.close()
    assert not pid_file.exists()


def test_a_child_the_app_forks_does_not_keep_the_pid_file(tmp_path):
    """A process the app forks, still running after the server was killed
    (the file left behind), does not hold the pid file: the next server
    takes it."""
    pid_file = tmp_path / "cserve.pid"
    first = start_server("--pid-file", str(pid_file), app="fork_apps:sleeper", killed=True)
    try:
        child = int(get(first.port, "/?secs=30").body)
    finally:
        first.proc.kill()
        first.close()
    try:
        assert alive(child)
        second = start_server("--pid-file", str(pid_file), app=APP)
        try:
            assert int(pid_file.read_text()) == second.proc.pid
        finally:
            second.close()
    finally:
        os.kill(child, signal.SIGKILL)


def test_a_relative_pid_file_is_removed_after_the_app_changes_directory(tmp_path):
    """--pid-file NAME is relative to the directory cserve starts in (after
    --chdir); an app that changes the process's directory (one worker: the
    same process) does not stop its removal at exit."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "cserve.pid").write_text("4194000\n")  # what the name means from there
    srv = start_server("--pid-file", "cserve.pid", app=f"{APPS / 'wsgi_apps.py'}:application", chdir=tmp_path)
    try:
        assert int((tmp_path / "cserve.pid").read_text()) == srv.proc.pid
        assert get(srv.port, f"/chdir?to={elsewhere}").body == str(elsewhere).encode()
    finally:
        srv.close()
    assert not (tmp_path / "cserve.pid").exists()
    assert (elsewhere / "cserve.pid").read_text() == "4194000\n"
