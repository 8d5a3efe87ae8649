"""A minimal, strict HTTP/1.1 response reader for tests: no library in between
the test and the bytes on the wire."""
import json
import socket
import time


class Response:
    def __init__(self, status, reason, headers, body, raw_head, version):
        self.status = status
        self.reason = reason
        self.headers = headers  # list of (name-lower, value)
        self.body = body
        self.raw_head = raw_head
        self.version = version

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k == name:
                return v
        return default

    def header_all(self, name):
        return [v for k, v in self.headers if k == name.lower()]

    def __repr__(self):
        return f"<Response {self.status} {self.headers} {self.body[:80]!r}>"


class Reader:
    """Reads responses off one socket, keeping bytes that belong to the next one."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.eof = False

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            self.eof = True
            raise EOFError("connection closed")
        self.buf += data

    def _read_until(self, sep):
        while sep not in self.buf:
            self._fill()
        i = self.buf.index(sep) + len(sep)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def buffer_until(self, sep):
        """Receive until sep is in the buffer, consuming nothing (a response
        can still be read whole after)."""
        while sep not in self.buf:
            self._fill()

    def _read_exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_response(self, method="GET"):
        """One final response (1xx interim responses are skipped and returned in .interim)."""
        interim = []
        while True:
            head = self._read_until(b"\r\n\r\n")
            lines = head[:-4].split(b"\r\n")
            version, _, rest = lines[0].partition(b" ")
            code, _, reason = rest.partition(b" ")
            status = int(code)
            headers = []
            for line in lines[1:]:
                k, _, v = line.partition(b":")
                headers.append((k.decode("latin-1").lower(), v.strip().decode("latin-1")))
            if 100 <= status < 200:
                interim.append(status)
                continue
            break
        resp = Response(status, reason.decode("latin-1"), headers, b"", head, version.decode())
        resp.interim = interim
        if method == "HEAD" or status in (204, 304):
            return resp
        te = resp.header("transfer-encoding")
        cl = resp.header("content-length")
        if te is not None:
            assert te.lower() == "chunked", te
            body = b""
            while True:
                line = self._read_until(b"\r\n")
                size = int(line.split(b";")[0], 16)
                if size == 0:
                    # trailers until empty line
                    while self._read_until(b"\r\n") != b"\r\n":
                        pass
                    break
                body += self._read_exact(size)
                assert self._read_exact(2) == b"\r\n"
            resp.body = body
        elif cl is not None:
            resp.body = self._read_exact(int(cl))
        else:
            # close-delimited
            try:
                while True:
                    self._fill()
            except EOFError:
                pass
            resp.body, self.buf = self.buf, b""
        return resp

    def closed(self, timeout=2.0):
        """True if the peer closes (EOF or reset) within timeout with no further bytes."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
        return data == b""


def request(port, raw, method="GET", timeout=5.0):
    """Send raw bytes on a fresh connection, read one response."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        return Reader(s).read_response(method)


def get(port, path="/", headers=(), timeout=5.0):
    hdrs = "".join(f"{k}: {v}\r\n" for k, v in headers)
    raw = f"GET {path} HTTP/1.1\r\nHost: localhost\r\n{hdrs}\r\n".encode("latin-1")
    return request(port, raw, timeout=timeout)


def stats_json(port, timeout=10.0):
    """The server's published figures (/stats.json on its --metrics-bind
    port), parsed. OSError while the listener is not up yet."""
    r = get(port, "/stats.json", timeout=timeout)
    assert r.status == 200, r.status
    return json.loads(r.body)


def worker_stats(port):
    """The first worker's published figures (stats_json's workers[0]), or
    None while the listener is not up or no worker has published yet."""
    try:
        w = stats_json(port)["workers"]
    except OSError:
        return None
    return w[0] if w else None


def bytes_read(port):
    """The bytes the first worker's loop has read from clients (/stats.json
    on the metrics port), -1 while it has published none."""
    w = worker_stats(port)
    return w["bytes_in"] if w else -1


def raw_exchange(port, raw, timeout=3.0, split=None):
    """Send raw (optionally in pieces given by split: list of chunk sizes, sent
    with small pauses) and return every byte received until the server closes
    or timeout passes."""
    out = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if split:
            pos = 0
            for n in split:
                s.sendall(raw[pos:pos + n])
                pos += n
                time.sleep(0.001)
            if pos < len(raw):
                s.sendall(raw[pos:])
        else:
            s.sendall(raw)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                s.settimeout(max(0.05, deadline - time.monotonic()))
                data = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not data:
                break
            out += data
    return out


# ---------------------------------------------------------------- additions
# (test_http/test_wsgi/test_cli/test_process/test_flask helpers; additive only)

def _parse_head(head):
    lines = head[:-4].split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    code, _, reason = rest.partition(b" ")
    headers = []
    for line in lines[1:]:
        k, _, v = line.partition(b":")
        headers.append((k.decode("latin-1").lower(), v.strip().decode("latin-1")))
    return Response(int(code), reason.decode("latin-1"), headers, b"", head, version.decode())


def read_head(reader):
    """Read exactly one response head (interim 1xx included) off a Reader;
    the body stays in reader.buf / the socket."""
    return _parse_head(reader._read_until(b"\r\n\r\n"))


def read_chunk(reader):
    """Read one chunk of a chunked body: returns its data (b"" for the last
    chunk, whose trailer section is consumed too)."""
    line = reader._read_until(b"\r\n")
    size = int(line.split(b";")[0], 16)
    if size == 0:
        while reader._read_until(b"\r\n") != b"\r\n":
            pass
        return b""
    data = reader._read_exact(size)
    assert reader._read_exact(2) == b"\r\n"
    return data


def read_all(reader, timeout=5.0):
    """Every byte until EOF/reset or timeout (returns (bytes, eof_seen))."""
    out, reader.buf = reader.buf, b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reader.sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            data = reader.sock.recv(65536)
        except socket.timeout:
            return out, False
        except ConnectionResetError:
            return out, True
        if not data:
            return out, True
        out += data
    return out, False


def chunked(body, sizes=None, ext=False, trailers=()):
    """Encode body with the chunked coding: chunks of the given sizes (cycled),
    optional chunk extensions on every size line, optional trailer fields."""
    sizes = sizes or [len(body) or 1]
    out, pos, i = [], 0, 0
    while pos < len(body):
        n = sizes[i % len(sizes)]
        i += 1
        piece = body[pos:pos + n]
        pos += n
        e = b';name=value;flag' if ext else b""
        out.append(b"%x%s\r\n%s\r\n" % (len(piece), e, piece))
    out.append(b"0\r\n")
    for k, v in trailers:
        out.append(f"{k}: {v}\r\n".encode("latin-1"))
    out.append(b"\r\n")
    return b"".join(out)


def req(method, path, headers=(), body=b"", version="1.1", host=True):
    """Raw request bytes. headers: (name, value) pairs sent as given."""
    lines = [f"{method} {path} HTTP/{version}"]
    if host:
        lines.append("Host: localhost")
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def post(port, path, body, headers=(), timeout=10.0):
    raw = req("POST", path, [("Content-Length", str(len(body)))] + list(headers), body)
    return request(port, raw, timeout=timeout)
