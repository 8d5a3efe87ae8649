"""A small raw-socket load client: N keep-alive connections, pipelining depth D,
every response checked byte for byte against the expected bytes (only the
29-byte Date value may differ).

How "expected" is fixed: for each kind of request the caller states the exact
status line, the exact header fields (name -> value, Date's value excepted) and
the exact body. One reference response per kind is fetched on its own
connection and checked against that statement field by field; its raw head,
with the Date value masked, then becomes the byte template every response of
that kind in the run must equal. Header order is the server's choice, so it is
learned; everything else is stated.

One thread, one epoll selector: Python's cost per response is three
startswith/match calls on the receive buffer, no copies, no parsing.

    python3 tests/integration/loadgen.py --port 8000 -n 100000 -c 64 -d 16
"""
import re
import selectors
import socket
import sys
import time

# IMF-fixdate, RFC 9110 §5.6.7: "Sun, 06 Nov 1994 08:49:37 GMT" (29 bytes).
DATE_RE = re.compile(rb"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-3]\d "
                     rb"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} "
                     rb"[0-2]\d:[0-5]\d:[0-6]\d GMT")
DATE_LEN = 29


class Kind:
    """What one kind of response must be: status line, header fields, body.
    headers: dict lower-case name -> exact value; "date" is always required
    (any valid IMF-fixdate) and must not be given. optional: dict of fields
    the server may add with exactly this value (e.g. connection: keep-alive)."""

    def __init__(self, status_line, headers, body, optional=None):
        self.status_line = status_line
        self.headers = {k.lower(): v for k, v in headers.items()}
        self.body = body
        self.optional = {k.lower(): v for k, v in (optional or {}).items()}


HELLO = Kind(b"HTTP/1.1 200 OK",
             {"content-type": "text/plain", "content-length": "13", "server": "cserve"},
             b"Hello, World!",
             optional={"connection": "keep-alive"})


class Template:
    """prefix + <29-byte date> + suffix is the head; the body follows."""

    def __init__(self, prefix, suffix):
        self.prefix = prefix
        self.suffix = suffix


def check_head(kind, raw_head):
    """Check one raw response head against kind; return a Template or raise
    AssertionError saying what differs."""
    assert raw_head.endswith(b"\r\n\r\n"), raw_head
    lines = raw_head[:-4].split(b"\r\n")
    assert lines[0] == kind.status_line, f"status line {lines[0]!r} != {kind.status_line!r}"
    seen = {}
    date_at = None
    offset = len(lines[0]) + 2
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        assert sep, f"malformed header line {line!r}"
        lname = name.decode("latin-1").lower()
        assert lname not in seen, f"duplicate header {lname!r} in {raw_head!r}"
        v = value.strip()
        seen[lname] = v.decode("latin-1")
        if lname == "date":
            assert DATE_RE.fullmatch(v), f"bad Date {v!r}"
            date_at = offset + line.index(v)
        offset += len(line) + 2
    assert date_at is not None, f"no Date header in {raw_head!r}"
    for k, v in kind.headers.items():
        assert seen.get(k) == v, f"header {k!r}: got {seen.get(k)!r}, want {v!r} in {raw_head!r}"
    for k, v in seen.items():
        if k == "date" or k in kind.headers:
            continue
        assert kind.optional.get(k) == v, f"unexpected header {k}: {v!r} in {raw_head!r}"
    return Template(raw_head[:date_at], raw_head[date_at + DATE_LEN:])


def learn_template(port, request, kind, timeout=10.0):
    """Send one request on its own connection, check the response against
    kind and return its Template."""
    from httpclient import Reader  # the strict reader; same directory
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        resp = Reader(s).read_response()
    tmpl = check_head(kind, resp.raw_head)
    assert resp.body == kind.body, f"body {resp.body[:80]!r} != {kind.body[:80]!r}"
    return tmpl


class Spec:
    """One request in a connection's cycle and the exact bytes it must get:
    prefix, then a valid date, then tail (suffix + body)."""
    __slots__ = ("request", "prefix", "tail", "total")

    def __init__(self, request, template, body):
        self.request = request
        self.prefix = template.prefix
        self.tail = template.suffix + body
        self.total = len(self.prefix) + DATE_LEN + len(self.tail)


class Result:
    def __init__(self):
        self.done = 0           # responses received and verified
        self.expected = 0       # responses that should have been received
        self.errors = []        # (conn, request index, message)
        self.elapsed = 0.0
        self.connections = 0

    @property
    def rps(self):
        return self.done / self.elapsed if self.elapsed else 0.0

    def __repr__(self):
        return (f"<Result done={self.done}/{self.expected} errors={len(self.errors)} "
                f"{self.elapsed:.2f}s {self.rps:.0f} rps>")


class _Conn:
    __slots__ = ("i", "sock", "to_send", "sent", "recvd", "quota", "out", "inbuf", "pos", "dead")

    def __init__(self, i, sock, quota):
        self.i = i
        self.sock = sock
        self.quota = quota      # requests this connection makes in all
        self.sent = 0
        self.recvd = 0
        self.out = b""
        self.inbuf = bytearray()
        self.pos = 0
        self.dead = False


def _snippet(buf, pos, n=160):
    return bytes(buf[pos:pos + n])


def run(port, specs, total, conns=64, depth=16, timeout=120.0, max_errors=20):
    """Send `total` requests over `conns` keep-alive connections with up to
    `depth` in flight on each. Connection i makes requests
    specs[(i + k) % len(specs)] for k = 0, 1, ... Every response is verified;
    a connection whose response differs, or that ends early, is closed and
    the mismatch recorded. Returns a Result."""
    res = Result()
    res.expected = total
    nspec = len(specs)
    sel = selectors.DefaultSelector()
    cs = []
    per, extra = divmod(total, conns)
    deadline = time.monotonic() + timeout
    for i in range(conns):
        quota = per + (1 if i < extra else 0)
        if quota == 0:
            continue
        s = socket.create_connection(("127.0.0.1", port), timeout=10.0)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        c = _Conn(i, s, quota)
        cs.append(c)
    res.connections = len(cs)
    live = len(cs)
    t0 = time.monotonic()

    def fail(c, msg):
        nonlocal live
        if len(res.errors) < max_errors:
            res.errors.append((c.i, c.recvd, msg))
        elif len(res.errors) == max_errors:
            res.errors.append((-1, -1, "further errors not recorded"))
        c.dead = True
        live -= 1
        try:
            sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        c.sock.close()

    def top_up(c):
        # keep `depth` requests in flight; send in one batch
        room = min(depth - (c.sent - c.recvd), c.quota - c.sent)
        if room > 0 and len(c.out) < 65536:
            base = c.i + c.sent
            c.out += b"".join(specs[(base + k) % nspec].request for k in range(room))
            c.sent += room
        if c.out:
            try:
                n = c.sock.send(c.out)
            except BlockingIOError:
                n = 0
            except OSError as e:
                fail(c, f"send: {e!r}")
                return
            c.out = c.out[n:]
        ev = selectors.EVENT_READ | (selectors.EVENT_WRITE if c.out else 0)
        sel.modify(c.sock, ev, c)

    for c in cs:
        sel.register(c.sock, selectors.EVENT_READ, c)
        top_up(c)

    while live > 0:
        now = time.monotonic()
        if now > deadline:
            for c in cs:
                if not c.dead and c.recvd < c.quota:
                    fail(c, f"timeout: {c.recvd}/{c.quota} responses, {c.sent} sent")
            break
        for key, ev in sel.select(timeout=min(1.0, deadline - now)):
            c = key.data
            if c.dead:
                continue
            if ev & selectors.EVENT_READ:
                try:
                    data = c.sock.recv(262144)
                except BlockingIOError:
                    data = None
                except OSError as e:
                    fail(c, f"recv: {e!r} after {c.recvd}/{c.quota} responses")
                    continue
                if data is not None:
                    if not data:
                        left = len(c.inbuf) - c.pos
                        fail(c, f"EOF after {c.recvd}/{c.quota} responses"
                                f" ({left} unparsed bytes: {_snippet(c.inbuf, c.pos)!r})")
                        continue
                    buf = c.inbuf
                    buf += data
                    pos = c.pos
                    avail = len(buf)
                    bad = None
                    while c.recvd < c.sent:
                        sp = specs[(c.i + c.recvd) % nspec]
                        if avail - pos < sp.total:
                            # partial: check the prefix bytes already here, so a
                            # wrong (e.g. shorter) response fails now instead of
                            # waiting for bytes that will never come
                            n = min(avail - pos, len(sp.prefix))
                            if buf[pos:pos + n] != sp.prefix[:n]:
                                bad = (f"response {c.recvd} differs: got {_snippet(buf, pos)!r} "
                                       f"want {(sp.prefix + b'<date>' + sp.tail)[:160]!r}")
                            break
                        d = pos + len(sp.prefix)
                        if not (buf.startswith(sp.prefix, pos)
                                and DATE_RE.match(buf, d, d + DATE_LEN)
                                and buf.startswith(sp.tail, d + DATE_LEN)):
                            bad = (f"response {c.recvd} differs: got {_snippet(buf, pos)!r} "
                                   f"want {(sp.prefix + b'<date>' + sp.tail)[:160]!r}")
                            break
                        pos += sp.total
                        c.recvd += 1
                    if bad:
                        fail(c, bad)
                        continue
                    done_now = c.recvd
                    if pos > 131072:
                        del buf[:pos]
                        pos = 0
                    c.pos = pos
                    if done_now == c.quota:
                        if len(buf) > pos:
                            fail(c, f"extra bytes after last response: {_snippet(buf, pos)!r}")
                            continue
                        sel.unregister(c.sock)
                        c.sock.close()
                        c.dead = True
                        live -= 1
                        continue
            if ev & selectors.EVENT_WRITE or (c.sent - c.recvd) <= depth // 2:
                top_up(c)
    res.elapsed = time.monotonic() - t0
    res.done = sum(c.recvd for c in cs)
    for c in cs:
        if not c.dead:
            c.sock.close()
    sel.close()
    return res


def hello_specs(port, path="/"):
    req = f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
    tmpl = learn_template(port, req, HELLO)
    return [Spec(req, tmpl, HELLO.body)]


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("-n", "--requests", type=int, default=100000)
    ap.add_argument("-c", "--connections", type=int, default=64)
    ap.add_argument("-d", "--depth", type=int, default=16)
    ap.add_argument("--path", default="/")
    ap.add_argument("--timeout", type=float, default=300.0)
    a = ap.parse_args(argv)
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    specs = hello_specs(a.port, a.path)
    res = run(a.port, specs, a.requests, a.connections, a.depth, a.timeout)
    print(res)
    for e in res.errors:
        print("error:", e)
    return 0 if not res.errors and res.done == res.expected else 1


if __name__ == "__main__":
    sys.exit(main())


# ---- waiting -----------------------------------------------------------------

def wait_until(cond, timeout, interval=0.05):
    """Poll cond() until it returns a true value or timeout passes; returns
    the last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(interval)


def sanitizer(binary):
    """'asan' / 'tsan' if the binary was built with that sanitizer, else None.
    Under a sanitizer RSS is not the program's memory (shadow memory, ASan's
    quarantine of freed blocks), so memory bounds are reported, not asserted."""
    try:
        with open(binary, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if b"__asan_init" in data:
        return "asan"
    if b"__tsan_init" in data:
        return "tsan"
    return None
