"""The ring's waiting knobs as the live scheduler runs them: --spin (the
pool thread spins before it parks), --loop-spin (the loop polls for a
completion before it sleeps), --loop-doze (the loop waits on a timer
instead of asking to be woken). Each option's "off means off" is checked
by tests/integration/test_knobs.py; the doze's rule on fixed paces by
handoffs/tests/batch_test.c (parts 6 and 7)."""
import time

from pipelined import pipelined, thread_stats
from httpclient import Reader, req
import perf

APP = "wsgi_apps:application"


def sequential(srv, n):
    """n requests one after another on one connection, half a millisecond
    apart: each finds both threads idle."""
    with srv.connect() as s:
        rd = Reader(s)
        for _ in range(n):
            s.sendall(req("GET", "/hello"))
            assert rd.read_response().body == b"hello"
            time.sleep(0.0005)


def arm(server_factory, tmp_path, args, drive, pick):
    def run():
        path = tmp_path / f"s-{time.monotonic_ns()}.json"
        srv = server_factory("--stats-json", str(path), *args, app=APP)
        drive(srv)
        return pick(thread_stats(srv, path))
    return run


def test_the_pool_spins_by_default_and_parks_every_job_at_spin_0(server_factory, tmp_path):
    """200 sequential requests. Median over the rounds: with --spin 0 the
    pool thread parks at least once a request; by default it spins."""
    n = 200
    pick = lambda st: {"spins": st["pool"]["counters"]["handoff"]["spins"],
                       "parks": st["pool"]["counters"]["handoff"]["parks"]}
    m = perf.report(f"the pool thread over {n} sequential requests", perf.interleaved({
        "default": arm(server_factory, tmp_path, [], lambda s: sequential(s, n), pick),
        "--spin 0": arm(server_factory, tmp_path, ["--spin", "0"], lambda s: sequential(s, n), pick)}))
    assert m["--spin 0"]["parks"] >= n
    assert m["default"]["spins"] > 0


def test_loop_spin_catches_completions_without_a_wake(server_factory, tmp_path):
    """200 sequential requests, the pool spinning 20 ms after each job so
    only the loop's own sleep differs. Median over the rounds: with
    --loop-spin 20000 the pool wakes the loop for at most a quarter of the
    requests; without it, for at least half."""
    n = 200
    pick = lambda st: {"loop_wakes": st["pool"]["counters"]["handoff"]["loop_wakes"]}
    base = ["--spin", "20000us"]
    m = perf.report(f"eventfd wakes of the loop over {n} sequential requests", perf.interleaved({
        "default": arm(server_factory, tmp_path, base, lambda s: sequential(s, n), pick),
        "--loop-spin 20000": arm(server_factory, tmp_path, base + ["--loop-spin", "20000"],
                                 lambda s: sequential(s, n), pick)}))
    assert m["default"]["loop_wakes"] >= n // 2
    assert m["--loop-spin 20000"]["loop_wakes"] <= n // 4


def test_loop_doze_spares_a_busy_pool_its_wakeups(server_factory, tmp_path):
    """12 batches of 32 pipelined requests of 50 us, the hold off in both
    arms. Median over the rounds: by default the loop dozes and the pool
    writes the eventfd for at most a quarter of the requests; with
    --loop-doze 0 it writes it for more than a quarter, and at least three
    times as often."""
    batches, depth = 12, 32
    n = batches * depth
    pick = lambda st: {"dozes": st["loop"]["counters"]["handoff"]["loop_dozes"],
                       "loop_wakes": st["pool"]["counters"]["handoff"]["loop_wakes"]}
    drive = lambda s: pipelined(s, batches, depth, "/work?us=50")
    m = perf.report(f"the loop over {n} pipelined requests of 50 us", perf.interleaved({
        "default": arm(server_factory, tmp_path, ["--loop-hold", "0"], drive, pick),
        "--loop-doze 0": arm(server_factory, tmp_path, ["--loop-hold", "0", "--loop-doze", "0"], drive, pick)}))
    assert m["default"]["dozes"] > 0
    assert m["default"]["loop_wakes"] <= n // 4
    assert m["--loop-doze 0"]["loop_wakes"] > n // 4
    assert m["--loop-doze 0"]["loop_wakes"] >= 3 * max(m["default"]["loop_wakes"], 1)
