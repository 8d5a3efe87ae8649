"""Where the app is imported with --workers N: in each worker by default
(what its import opens, a database connection or a thread, is that
worker's own), or once in the supervisor before the workers are forked
with --preload. An app that cannot be imported ends the start with exit 2
either way, before any worker serves, instead of respawning workers."""
import os
import signal
import subprocess

import pytest

import procfs
from conftest import APPS, BIN, free_port, start_server
from loadgen import wait_until


def _imports(path):
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _workers(pid):
    """The server's worker processes: its live children."""
    return sorted(c for c in procfs.children(pid) if procfs.alive(c))


@pytest.mark.parametrize("preload", [False, True])
def test_the_app_is_imported_in_each_worker_unless_preload(preload, tmp_path):
    record = tmp_path / "imports"
    env = dict(os.environ, IMPORT_PID_FILE=str(record))
    srv = start_server("--workers", "2", *(["--preload"] if preload else []), app="import_pid_apps:application",
                       env=env)
    try:
        sup = srv.proc.pid
        if preload:
            assert wait_until(lambda: len(_workers(sup)) == 2, 20), srv.log_text()[-3000:]
            assert _imports(record) == [sup]
        else:
            # Each worker's import ran in that worker, and none in the supervisor.
            assert wait_until(lambda: len(_imports(record)) == 2 and sorted(_imports(record)) == _workers(sup),
                              20), (_imports(record), _workers(sup), srv.log_text()[-3000:])
            assert sup not in _imports(record)
        # A reload imports afresh in each new worker, in both modes.
        before = set(_workers(sup))
        os.kill(sup, signal.SIGHUP)
        assert wait_until(lambda: len(_workers(sup)) == 2 and not before & set(_workers(sup)), 30), \
            srv.log_text()[-3000:]
        assert wait_until(lambda: set(_workers(sup)) <= set(_imports(record)), 20), \
            (_imports(record), _workers(sup))
    finally:
        srv.close()


@pytest.mark.parametrize("preload", [False, True])
def test_an_app_that_cannot_be_imported_ends_the_start_with_exit_2(preload):
    args = [BIN, "--bind", f"127.0.0.1:{free_port()}", "--chdir", str(APPS), "raises_on_import:application", "--workers", "3"]
    r = subprocess.run(args + (["--preload"] if preload else []), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr[-3000:]
    assert "boom-on-import" in r.stderr
    # One import tried, not one per worker, and no worker respawned.
    assert r.stderr.count("cannot import app") == 1, r.stderr[-3000:]
    assert "respawning" not in r.stderr
