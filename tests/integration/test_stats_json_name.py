"""--stats-json is valid JSON whatever the app's name holds (core/stats.c).

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
        deadline = time.monotonic() + 15
        while True:
            try:
                assert get(port, "/").status == 200
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "did not start"
                time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    doc = json.loads(out.read_text())
    assert doc["app"] == f"{odd}/apps/hello.py:application", doc["app"]
