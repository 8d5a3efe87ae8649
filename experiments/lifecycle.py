"""What hyperfine times for start-up and graceful stop (experiments/startup.py).

    python3 -m experiments.lifecycle up SERVER PORT PIDFILE
        start SERVER, return at its first 200 response
    python3 -m experiments.lifecycle down PIDFILE
        SIGTERM, return when the process is gone
    python3 -m experiments.lifecycle kill PIDFILE
        SIGKILL leftovers (untimed tidy-up)
    python3 -m experiments.lifecycle noop
        this interpreter's own start: the baseline startup.py subtracts

SERVER is a key of startup.SERVERS (e.g. "cserve-ring", "granian")."""
import json
import os
import signal
import socket
import subprocess
import sys
import time



def first_response(port, deadline):
    req = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(req)
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    return True
        except OSError:
            time.sleep(0.002)
    return False


def up(server, port, pidfile):
    from experiments.startup import SERVERS
    from experiments.lib.serverctl import server_cmd
    cmd = server_cmd(SERVERS[server], int(port))
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    with open(pidfile, "w") as f:
        json.dump({"pid": p.pid}, f)
    if not first_response(int(port), time.monotonic() + 30):
        os.killpg(p.pid, signal.SIGKILL)
        sys.exit("lifecycle: no first response")


def _pid(pidfile):
    try:
        return json.load(open(pidfile))["pid"]
    except (OSError, ValueError):
        return None


def down(pidfile):
    pid = _pid(pidfile)
    os.killpg(pid, signal.SIGTERM)
    # The server is not our child here (hyperfine's prepare started it), so
    # we cannot wait(): poll until it has exited. An exited process lingers
    # as a zombie until its new parent reaps it, which can take long — its
    # state 'Z' already means it is done.
    while alive(pid):
        time.sleep(0.001)
    os.unlink(pidfile)


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def kill(pidfile):
    pid = _pid(pidfile)
    if pid:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        while alive(pid):
            time.sleep(0.005)
        os.unlink(pidfile)


if __name__ == "__main__":
    op, args = sys.argv[1], sys.argv[2:]
    {"up": up, "down": down, "kill": kill, "noop": lambda: None}[op](*args)
