#!/usr/bin/env python3
"""Take docs/dashboard.png: cserve serving apps/gil_release.py with
--metrics-bind, a load in three phases (sleeping requests on 32 connections,
then CPU-bound ones holding the GIL, then none), and headless Chromium
loading the dashboard through all of it and saving what it shows.

    /usr/bin/python3 scripts/dashboard_screenshot.py [OUT.png] [--seconds 75]

Needs ./cserve built and chromium installed (scripts/setup.sh test)."""
import argparse
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def client(port, path_of, stop):
    """One keep-alive connection asking for path_of() until stop is set."""
    while not stop.is_set():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            while not stop.is_set():
                path = path_of()
                if path is None:
                    time.sleep(0.2)
                    continue
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
                buf = b""
                while b"\r\n\r\n" not in buf:
                    d = s.recv(65536)
                    if not d:
                        raise OSError("closed")
                    buf += d
                head, _, body = buf.partition(b"\r\n\r\n")
                cl = int([ln.split(b":")[1] for ln in head.split(b"\r\n")
                          if ln.lower().startswith(b"content-length")][0])
                while len(body) < cl:
                    body += s.recv(65536)
        except OSError:
            time.sleep(0.1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", default=str(ROOT / "docs" / "dashboard.png"))
    ap.add_argument("--seconds", type=float, default=100.0, help="the page's virtual time budget")
    ap.add_argument("--phase", type=float, default=15.0, help="real seconds of each load phase")
    a = ap.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        sys.exit("chromium is not installed (scripts/setup.sh test installs it)")
    port, mport = free_port(), free_port()
    srv = subprocess.Popen([str(ROOT / "cserve"), "--bind", f"127.0.0.1:{port}", "--metrics-bind",
                            f"127.0.0.1:{mport}", "--blocking-threads", "4", "--chdir", str(ROOT / "apps"),
                            "gil_release:application"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    third = a.phase

    def path_of(i):
        def pick():
            t = time.monotonic() - t0
            if t < third:
                return "/?us=20000&mode=sleep"      # waits on "I/O": the threads are short
            if t < 2 * third:
                return "/?us=3000&mode=sleep" if i % 8 == 0 else None  # a lighter load
            return None
        return pick

    stop = threading.Event()
    try:
        time.sleep(1.0)
        ts = [threading.Thread(target=client, args=(port, path_of(i), stop), daemon=True) for i in range(32)]
        for t in ts:
            t.start()
        with tempfile.TemporaryDirectory() as profile:
            subprocess.run([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            f"--user-data-dir={profile}", "--window-size=1400,1120",
                            f"--virtual-time-budget={int(a.seconds * 1000)}", f"--screenshot={a.out}",
                            f"http://127.0.0.1:{mport}/"], capture_output=True, timeout=a.seconds * 4 + 60)
    finally:
        stop.set()
        srv.terminate()
        srv.wait(timeout=30)
    print(a.out, os.path.getsize(a.out), "bytes")


if __name__ == "__main__":
    main()
