"""A flood of connections, each with a request answered and then left open,
grows a worker by tens of MB (their structures and read buffers). Once they
close, the worker gives that memory back to the system: its RSS returns to
within a few MB of where it was idle, without any other traffic to trigger
the allocator (core/README.md, "what a connection costs")."""
import resource
import socket
import time

import loadgen
from conftest import BIN
from httpclient import Reader
from procfs import rss_kib

# Under a sanitizer RSS is not the program's memory: reported, not asserted.
SAN = loadgen.sanitizer(BIN)
FLOOD = 4000
AFTER_BOUND_MB = 6
HANG_S = 30


def nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n if hard == resource.RLIM_INFINITY else min(n, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    return want


def test_memory_goes_back_after_a_flood_of_connections(server_factory):
    limit = nofile(FLOOD + 512)
    n = min(FLOOD, limit - 256)
    srv = server_factory("--keepalive-timeout", "300", preexec_fn=lambda: nofile(FLOOD + 512))
    pid = srv.proc.pid
    for _ in range(3):  # warm what every request touches before the baseline
        with srv.connect(timeout=HANG_S) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert Reader(s).read_response().status == 200
    base = rss_kib(pid)
    conns = []
    try:
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=HANG_S)
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            conns.append(s)
        for s in conns:
            assert Reader(s).read_response().status == 200
        peak = rss_kib(pid)
    finally:
        for s in conns:
            s.close()
    deadline = time.monotonic() + HANG_S
    now = rss_kib(pid)
    while (now - base) / 1024 >= AFTER_BOUND_MB and time.monotonic() < deadline:
        time.sleep(0.25)
        now = rss_kib(pid)
    print(f"\n  {n} connections: RSS idle {base} KiB, with them open {peak} KiB, after {now} KiB")
    assert SAN or (peak - base) / 1024 > 2 * AFTER_BOUND_MB, "the flood grew too little to tell"
    assert SAN or (now - base) / 1024 < AFTER_BOUND_MB, \
        f"RSS {now} KiB {HANG_S} s after {n} connections left, idle {base} KiB (peak {peak})"
