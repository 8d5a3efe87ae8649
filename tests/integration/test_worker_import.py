"""--workers N where each worker imports the app: a slot's listener takes
connections only while its worker serves. A worker still importing (at
start, or after its predecessor died) and one whose import fails leave
their share of new connections to the workers that serve, instead of
holding them in a backlog nobody accepts from; a slot whose import keeps
failing is retried later and later, and the log says so.

The app (apps/gated_import_apps.py) imports normally in the first process
and, in every later one, blocks on a lock the test holds or raises."""
import concurrent.futures
import fcntl
import os
import re
import signal

import procfs
from conftest import start_server
from httpclient import get
from loadgen import wait_until

APP = "gated_import_apps:application"
HANG_S = 10  # a request not answered in this long waits for an import


def _later(gate):
    """The pids of the processes that imported after the first."""
    path = gate / "later"
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _answers(port, n):
    """n requests on fresh connections at once: the pid that answered each,
    or what went wrong."""
    def one(_):
        try:
            r = get(port, "/", timeout=HANG_S)
            return int(r.body) if r.status == 200 else f"status {r.status}"
        except OSError as e:
            return repr(e)
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def _serving_worker(sup, exclude):
    live = [p for p in procfs.children(sup) if procfs.alive(p) and p not in exclude]
    return live[0] if len(live) == 1 else None


def _start(tmp_path, mode):
    env = dict(os.environ, GATE_DIR=str(tmp_path), GATE_MODE=mode)
    # Worker 1 is not to serve yet: wait for the listener, not for both workers.
    return start_server("--workers", "2", app=APP, env=env, wait=False).wait_ready()


def test_a_worker_that_still_imports_leaves_its_connections_to_the_one_that_serves(tmp_path):
    lock = open(tmp_path / "lock", "a")
    fcntl.flock(lock, fcntl.LOCK_EX)
    srv = _start(tmp_path, "gated")
    try:
        # Worker 1 starts once worker 0 serves, and blocks in its import.
        assert wait_until(lambda: _later(tmp_path), 30), srv.log_text()[-3000:]
        importing = _later(tmp_path)[0]
        serving = wait_until(lambda: _serving_worker(srv.proc.pid, {importing}), 10)
        assert serving, procfs.children(srv.proc.pid)
        answers = _answers(srv.port, 20)
        assert answers == [serving] * 20, f"worker 0 is {serving}, worker 1 imports: {answers}"
        assert procfs.alive(importing) and _later(tmp_path) == [importing], "worker 1 was not still importing"
        # Once its import ends, worker 1 takes its share.
        fcntl.flock(lock, fcntl.LOCK_UN)
        assert wait_until(lambda: importing in _answers(srv.port, 4), 30), srv.log_text()[-3000:]
    finally:
        lock.close()
        srv.close()


def test_a_respawned_worker_takes_no_connections_until_it_has_imported(tmp_path):
    lock = open(tmp_path / "lock", "a")
    srv = _start(tmp_path, "gated")
    try:
        assert wait_until(lambda: len(set(_answers(srv.port, 8))) == 2, 30), srv.log_text()[-3000:]
        victim = _later(tmp_path)[0]
        fcntl.flock(lock, fcntl.LOCK_EX)
        os.kill(victim, signal.SIGKILL)
        # Its successor blocks in its import.
        assert wait_until(lambda: len(_later(tmp_path)) == 2, 30), srv.log_text()[-3000:]
        importing = _later(tmp_path)[1]
        serving = _serving_worker(srv.proc.pid, {importing})
        assert serving and serving != victim, procfs.children(srv.proc.pid)
        answers = _answers(srv.port, 20)
        assert answers == [serving] * 20, f"worker 0 is {serving}, worker 1's successor imports: {answers}"
        fcntl.flock(lock, fcntl.LOCK_UN)
        assert wait_until(lambda: importing in _answers(srv.port, 4), 30), srv.log_text()[-3000:]
    finally:
        lock.close()
        srv.close()


def test_a_worker_whose_import_keeps_failing_is_retried_later_and_serves_nothing(tmp_path):
    srv = _start(tmp_path, "failing")
    try:
        said = re.compile(r"worker 1 \(pid (\d+)\) could not import the app \(exit 2, (\d+) in a row\) while "
                          r"other workers serve: its connections go to them; next try in (\d+) s")
        # Two failures: the second try comes later than the first did.
        assert wait_until(lambda: len(said.findall(srv.log_text())) >= 2, 30), srv.log_text()[-3000:]
        (_, n1, wait1), (_, n2, wait2) = said.findall(srv.log_text())[:2]
        assert (n1, n2) == ("1", "2") and int(wait2) > int(wait1), srv.log_text()[-3000:]
        assert "import-fails-in-this-worker" in srv.log_text()
        serving = [p for p in procfs.children(srv.proc.pid) if procfs.alive(p) and p not in _later(tmp_path)]
        assert len(serving) == 1, (procfs.children(srv.proc.pid), _later(tmp_path))
        answers = _answers(srv.port, 20)
        assert answers == serving * 20, f"worker 0 is {serving}; worker 1 fails to import: {answers}"
        assert srv.proc.poll() is None
    finally:
        srv.close()
