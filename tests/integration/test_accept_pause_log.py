"""Out of descriptors, the loop pauses accepts 100 ms at a time until one
succeeds again (test_faults.py covers the serving). Its log is bounded
however long that lasts: one line when it starts, then at most one line per
10 s counting the pauses since, and one line when accepting again."""
import resource
import socket
import time
import urllib.request

from loadgen import wait_until

HANG_S = 30
STARTS = "pausing accepts for 100 ms at a time until a descriptor is free"


def episodes(log):
    """The warning lines of each episode, an episode ending at its
    "free again" line. Once the test closes its connections the loop may
    start another: it accepts the closed ones still in the backlog faster
    than it reads their ends."""
    eps = [[]]
    for ln in log.splitlines():
        if "] warning: accept: " in ln:
            eps[-1].append(ln)
        elif "] info: accept: descriptors free again after" in ln:
            eps.append([])
    return [e for e in eps if e]


def test_an_episode_logs_a_bounded_number_of_lines(server_factory):
    def low_nofile():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    srv = server_factory("--keepalive-timeout", "60", preexec_fn=low_nofile)
    conns = []
    t0 = time.monotonic()  # before the episode can begin
    try:
        for _ in range(80):  # more than 64 descriptors: the loop runs out and pauses
            conns.append(socket.create_connection(("127.0.0.1", srv.port), timeout=HANG_S))
        assert wait_until(lambda: STARTS in srv.log_text(), HANG_S), srv.log_text()[-2000:]
        # The episode lasts: the backlog stays readable, each pause ends in
        # EMFILE again (a loop that logged each pause writes 10 lines a second).
        time.sleep(2)
    finally:
        for c in conns:
            c.close()
    assert wait_until(lambda: "accept: descriptors free again after" in srv.log_text(), HANG_S), \
        srv.log_text()[-2000:]
    elapsed = time.monotonic() - t0
    eps = episodes(srv.log_text())
    assert eps, srv.log_text()[-2000:]
    for lines in eps:
        assert STARTS in lines[0], lines
        assert len(lines) <= 1 + int(elapsed // 10), f"{len(lines)} lines in {elapsed:.1f} s:\n" + "\n".join(lines)
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/", timeout=HANG_S) as r:
        assert r.status == 200
