"""What the pipelining, hold, doze and spin tests share (test_pipelining.py,
test_hold.py, test_knobs.py and their counterparts in tests/perf/): a
queue of pipelined requests on the one pool thread, a long pipeline read
while it is written, and the server's per-thread counters at its exit."""
import json
import threading

from httpclient import Reader


def pipelined(srv, batches, depth, path):
    """batches times: depth requests for path (an app answering "worked")
    in one write on one connection, then all their responses, each
    checked: the pool thread has a queue of depth jobs each time."""
    one = f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    with srv.connect() as s:
        rd = Reader(s)
        for _ in range(batches):
            s.sendall(one * depth)
            for _ in range(depth):
                r = rd.read_response()
                assert r.status == 200 and r.body == b"worked"


def long_pipeline(srv, n):
    """n requests for /hello on one connection, sent in writes of 100 by a
    thread of their own while every response is read and checked."""
    req = b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
    s = srv.connect(timeout=30)

    def send():
        for i in range(0, n, 100):
            s.sendall(req * min(100, n - i))

    t = threading.Thread(target=send)
    t.start()
    r = Reader(s)
    for _ in range(n):
        resp = r.read_response()
        assert resp.status == 200 and resp.body == b"hello"
    t.join()
    s.close()


def thread_stats(srv, path):
    """Stop srv (exit 0 required) and return its --stats-json FILE's one
    worker's threads by role."""
    assert srv.stop() == 0
    with open(path) as f:
        (w,) = json.load(f)["workers"]
    return {t["role"]: t for t in w["threads"]}
