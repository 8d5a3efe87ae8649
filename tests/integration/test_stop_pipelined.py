"""A stop (SIGTERM) or a reload (SIGHUP: the worker retires, its successor
serves) answers every request the app ran: 20 requests pipelined on one
connection, the first held in the app until the test lets it go, then the
signal. The requests already with the app are answered in order, only the
last response says "Connection: close" (a client discards whatever follows
one, RFC 9112 §9.6), the connection closes after it, and a request not yet
handed to the app is not run: the set of requests the app ran is the set of
responses the client read.

The second request is held too, until the client has read the first
response: the responses after the stop leave in more than one write, and
the connection stays open after the first. Two depths: on a fresh
connection the loop hands the app two requests (it does not know the
responses' size yet); after one request answered on the connection, all
twenty are with the app when the signal comes."""
import signal

import pytest

from httpclient import Reader, req
from loadgen import wait_until

APP = "recording_apps:app"
N = 20


def _ran(log):
    """The ids of the requests the app started, in the order it started them."""
    with open(log) as f:
        return [int(line.split()[1]) for line in f if line.startswith("start ") and line.split()[1].isdigit()]


def _read(r, ids, conn, n=None):
    """Read n responses off r (None: up to the close) into ids (from the
    bodies) and conn (the Connection header of each)."""
    while n is None or n > 0:
        try:
            resp = r.read_response()
        except EOFError:
            assert n is None, f"closed after {ids}"
            assert r.buf == b"", f"a partial response before the close: {r.buf[:200]!r}"
            return
        assert resp.status == 200, resp
        word, _, rid = resp.body.decode().partition(" ")
        assert word == "slept", resp
        ids.append(int(rid))
        conn.append(resp.header("connection", "").lower())
        n = None if n is None else n - 1


@pytest.mark.parametrize("warm", [False, True], ids=["fresh", "warm"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["sigterm", "sighup"])
def test_a_stop_answers_every_request_the_app_ran(server_factory, logfile, tmp_path, sig, warm):
    srv = server_factory("--blocking-threads", "1", "--graceful-timeout", "60", app=APP)
    gate1, gate2 = tmp_path / "gate1", tmp_path / "gate2"
    worker = srv.proc.pid  # one worker: the process itself (after a reload, its successor's supervisor)
    s = srv.connect(timeout=30)
    try:
        if warm:
            s.sendall(req("GET", f"/sleep?id=0&s=0&log={logfile}"))
            assert Reader(s).read_response().body == b"slept 0"
        held = b"".join(req("GET", f"/sleep?id={i}&s=60&gate={g}&log={logfile}")
                        for i, g in ((1, gate1), (2, gate2)))
        rest = b"".join(req("GET", f"/sleep?id={i}&s=0&log={logfile}") for i in range(3, N + 1))
        s.sendall(held + rest)
        assert wait_until(lambda: 1 in _ran(logfile), 30), f"the first request never reached the app: {_ran(logfile)}"
        srv.proc.send_signal(sig)
        # The stop has begun (a reload's once the successor serves): the loop says so.
        assert wait_until(lambda: "stopping:" in srv.log_text(), 30), srv.log_text()[-3000:]
        ids, conn, r = [], [], Reader(s)
        gate1.touch()
        _read(r, ids, conn, 1)
        gate2.touch()
        _read(r, ids, conn)
        # The draining worker is done with the app: what it ran is all in the log.
        if sig == signal.SIGTERM:
            assert srv.proc.wait(timeout=30) == 0, srv.log_text()[-3000:]
        else:
            assert wait_until(lambda: f"[cserve {worker}] info: stopped" in srv.log_text(), 30), \
                srv.log_text()[-3000:]
        ran = _ran(logfile)
        if warm:
            ran.remove(0)
        assert ids, "no response before the close"
        assert ids == list(range(1, len(ids) + 1)), f"responses out of order: {ids}"
        assert sorted(ran) == ids, f"the app ran {sorted(ran)}, the client read {ids}"
        assert not (set(range(1, N + 1)) - set(ids)) & set(ran), "a request the client never read was run"
        assert conn[-1] == "close", f"the last response does not say close: {conn}"
        assert "close" not in conn[:-1], f"a response before the last says close: {conn}"
    finally:
        s.close()
