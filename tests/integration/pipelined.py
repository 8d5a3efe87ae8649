"""What the hold, doze and spin tests share (test_hold.py, test_knobs.py
and their counterparts in tests/perf/): a queue of pipelined requests on
the one pool thread, and the server's per-thread counters at its exit."""
import json

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


def thread_stats(srv, path):
    """Stop srv (exit 0 required) and return its --stats-json FILE's one
    worker's threads by role."""
    assert srv.stop() == 0
    with open(path) as f:
        (w,) = json.load(f)["workers"]
    return {t["role"]: t for t in w["threads"]}
