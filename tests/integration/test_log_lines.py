"""cserve's own log lines from a running server: every line it writes starts
with the UTC time to the millisecond (ISO 8601, a Z suffix), then the pid and
the level, in the supervisor and in the worker processes alike; the times
are the wall clock's (between the test's readings before the start and
after the stop) and never go backwards within one process."""
import datetime as dt
import re
import urllib.request

STAMPED = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z \[cserve (\d+)\] (debug|info|warning|error): ")


def test_every_line_starts_with_its_utc_time(server_factory):
    before = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    srv = server_factory("--workers", "2", "--log-level", "debug")
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/", timeout=30) as r:
        r.read()
    srv.stop()
    after = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    lines = [ln for ln in srv.log_text().splitlines() if "[cserve " in ln]
    assert len(lines) >= 4, srv.log_text()
    last = {}
    for ln in lines:
        m = STAMPED.match(ln)
        assert m, ln
        t = dt.datetime.fromisoformat(m.group(1))
        # The stamp is cut to the millisecond, never rounded up.
        assert before.replace(microsecond=before.microsecond // 1000 * 1000) <= t <= after, (before, ln, after)
        pid = m.group(2)
        assert t >= last.get(pid, t), f"went backwards in {pid}: {ln}"
        last[pid] = t
    assert len(last) >= 3, f"supervisor and both workers wrote lines: {sorted(last)}"
