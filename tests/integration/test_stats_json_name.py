"""--stats-json is valid JSON whatever the app's name holds (core/base/stats.c).

The default app's name is a path (the apps/ folder next to the binary), and a
path may hold '"' or '\\': they must be escaped (RFC 8259 §7), not written as
they are."""
import json
import os
import shutil
import signal
import subprocess
import time

from conftest import BIN, ROOT, free_port
from httpclient import get


def test_stats_json_escapes_a_quote_and_backslash_in_the_app_path(tmp_path):
    odd = tmp_path / 'we"ird\\dir'
    (odd / "apps").mkdir(parents=True)
    shutil.copy(BIN, odd / "cserve")
    shutil.copy(ROOT / "apps" / "hello.py", odd / "apps" / "hello.py")
    out = tmp_path / "stats.json"
    port = free_port()
    proc = subprocess.Popen([str(odd / "cserve"), "--bind", f"127.0.0.1:{port}",
                             "--stats-json", str(out)], cwd=str(tmp_path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                assert get(port, "/", timeout=30).status == 200
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "did not start"
                time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    doc = json.loads(out.read_text())
    assert doc["app"] == f"{odd}/apps/hello.py:application", doc["app"]


def run_odd_named(tmp_path, dirname, *extra):
    """Serve the default app from a folder called dirname, make one request,
    stop, and return the --stats-json document and the expected app name."""
    odd = tmp_path / dirname
    (odd / "apps").mkdir(parents=True)
    shutil.copy(BIN, odd / "cserve")
    shutil.copy(ROOT / "apps" / "hello.py", odd / "apps" / "hello.py")
    out = tmp_path / "stats.json"
    port = free_port()
    proc = subprocess.Popen([str(odd / "cserve"), "--bind", f"127.0.0.1:{port}",
                             "--stats-json", str(out), *extra], cwd=str(tmp_path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                assert get(port, "/", timeout=30).status == 200
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "did not start"
                time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    return out.read_bytes(), f"{odd}/apps/hello.py:application"


def test_stats_json_from_the_supervisor_escapes_quote_backslash_and_control_chars(tmp_path):
    # With --workers the supervisor writes the document's head itself.
    raw, name = run_odd_named(tmp_path, 'we"ird\\dir\x01\ttab\nline', "--workers", "2")
    doc = json.loads(raw.decode("utf-8"))
    assert doc["app"] == name, doc["app"]
    assert len(doc["workers"]) == 2


def test_stats_json_escapes_control_chars_in_one_worker(tmp_path):
    raw, name = run_odd_named(tmp_path, 'ctl\x1f\x7fdir')
    assert json.loads(raw.decode("utf-8"))["app"] == name


def test_stats_json_is_utf8_when_the_app_path_is_not(tmp_path):
    # A path is bytes: a Latin-1 'é' (0xE9) alone is no UTF-8, and a JSON
    # text must be UTF-8. The byte becomes U+FFFD; valid UTF-8 stays as it is.
    raw, name = run_odd_named(tmp_path, "lat\udce9-caf\u00e9")
    doc = json.loads(raw.decode("utf-8"))
    assert doc["app"] == name.replace("\udce9", "\ufffd"), doc["app"]
