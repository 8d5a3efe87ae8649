"""A file served through wsgi.file_wrapper: `?kb=N` answers with N KiB
(default 64) from a regular file, with Content-Length. cserve sends such a
response from the loop with sendfile, so the pool's part is a few µs
whatever the size, while the loop's grows with it.

The files are made once per process, under the temporary directory, with
fixed contents (written to a temporary name and renamed, so two processes
never see a half-written file)."""
import os
import tempfile

DIR = os.path.join(tempfile.gettempdir(), f"cserve-files-{os.getuid()}")
_paths = {}


def _path(kb):
    p = _paths.get(kb)
    if p:
        return p
    os.makedirs(DIR, exist_ok=True)
    p = os.path.join(DIR, f"{kb}k.bin")
    if not os.path.exists(p) or os.path.getsize(p) != kb * 1024:
        tmp = f"{p}.{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write((b"0123456789abcdef" * 64) * kb)
        os.replace(tmp, p)
    _paths[kb] = p
    return p


def _kb(environ):
    for part in environ.get("QUERY_STRING", "").split("&"):
        if part.startswith("kb="):
            try:
                return max(0, min(1 << 20, int(part[3:])))
            except ValueError:
                break
    return 64


def application(environ, start_response):
    kb = _kb(environ)
    start_response("200 OK", [("Content-Type", "application/octet-stream"),
                              ("Content-Length", str(kb * 1024))])
    f = open(_path(kb), "rb")
    return environ["wsgi.file_wrapper"](f, 65536)
