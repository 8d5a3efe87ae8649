"""Replay every request in tests/corpus/ against the real server over real
sockets, three ways: in one piece, byte by byte, and in seeded random pieces.
Asserts the statuses of the responses (NAME.expect; see tests/corpus/README.md),
the hello body on every 200, and the connection's fate: "close" means the
server closes after the last response, "open" means it still answers a
further request on the same connection, "any" checks nothing more."""
import pathlib
import random
import time

import pytest

import conftest
from httpclient import Reader

CORPUS = pathlib.Path(__file__).resolve().parents[1] / "corpus"
CASES = sorted(p.stem for p in CORPUS.glob("*.http"))
FOLLOW_UP = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
BYTE_BY_BYTE_MAX = 512  # longer cases send their first 512 bytes one at a time
HANG_S = 30  # only detects a hang: nothing here legitimately takes this long


@pytest.fixture(scope="module")
def server():
    # The oversized cases (414/431) are sized against an 8 KiB head limit.
    # No case expects a timeout: the head and idle timeouts are hang-sized, so
    # a slowly paced byte-by-byte send or a late follow-up on a busy machine
    # meets the parser, not a timer.
    srv = conftest.start_server("--max-header-size", "8192", "--header-timeout", "120",
                                "--keepalive-timeout", "120", handoff="ring")
    yield srv
    srv.close()


def load(name):
    raw = (CORPUS / f"{name}.http").read_bytes()
    words = (CORPUS / f"{name}.expect").read_text().split()
    statuses, fate = [int(w) for w in words[:-1]], words[-1]
    assert statuses and fate in ("open", "close", "any"), f"bad {name}.expect"
    return raw, statuses, fate


def pieces(raw, how, name):
    """Sizes of the pieces to send (the rest goes in one piece)."""
    if how == "whole":
        return [len(raw)]
    if how == "bytes":
        return [1] * min(len(raw), BYTE_BY_BYTE_MAX)
    rng = random.Random(f"{name}:{len(raw)}")  # seeded: a failure reproduces
    sizes, total = [], 0
    while total < len(raw):
        n = rng.randint(1, 64)
        sizes.append(n)
        total += n
    return sizes


def send_pieces(sock, raw, sizes):
    pos = 0
    try:
        for n in sizes:
            sock.sendall(raw[pos:pos + n])
            pos += n
            if len(sizes) > 1:
                time.sleep(0.0005)  # the stimulus: let each piece arrive as its own segment
        if pos < len(raw):
            sock.sendall(raw[pos:])
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server may close after an early error; the reads decide


@pytest.mark.parametrize("how", ["whole", "bytes", "random"])
@pytest.mark.parametrize("name", CASES)
def test_corpus_case(server, name, how):
    raw, statuses, fate = load(name)
    with server.connect(timeout=HANG_S) as sock:
        send_pieces(sock, raw, pieces(raw, how, name))
        reader = Reader(sock)
        method = raw.lstrip(b"\r\n").split(b" ", 1)[0].decode("latin-1")
        for i, want in enumerate(statuses):
            try:
                resp = reader.read_response(method)
            except EOFError:
                pytest.fail(f"{name} ({how}): closed before response {i + 1} (want {want})")
            assert resp.status == want, f"{name} ({how}): response {i + 1}: {resp!r}"
            if want == 200:
                assert resp.body == b"Hello, World!", f"{name} ({how}): {resp!r}"
        if fate == "close":
            assert reader.buf == b"", f"{name} ({how}): bytes after the last response"
            assert reader.closed(timeout=HANG_S), f"{name} ({how}): connection left open"
        elif fate == "open":
            sock.sendall(FOLLOW_UP)
            resp = reader.read_response()
            assert resp.status == 200 and resp.body == b"Hello, World!", \
                f"{name} ({how}): follow-up on the kept-alive connection: {resp!r}"


def test_corpus_is_complete():
    """Every case has its .expect, and the corpus covers what it claims."""
    assert len(CASES) >= 80
    for name in CASES:
        load(name)
    statuses = {s for name in CASES for s in load(name)[1]}
    assert {200, 400, 414, 417, 431, 501, 505} <= statuses
