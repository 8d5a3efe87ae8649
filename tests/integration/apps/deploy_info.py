"""What the interpreter inside cserve looks like (test_deploy*.py): its
prefixes, sys.path, version, user, a few environment variables, and whether
a module given by ?import=NAME imports."""
import importlib
import json
import os
import sys
from urllib.parse import parse_qs


def application(environ, start_response):
    q = parse_qs(environ.get("QUERY_STRING", ""))
    imported = {}
    for name in q.get("import", []):
        try:
            mod = importlib.import_module(name)
            imported[name] = getattr(mod, "__file__", None) or "builtin"
        except ImportError as e:
            imported[name] = "ImportError: " + str(e)
    body = json.dumps({
        "prefix": sys.prefix, "base_prefix": sys.base_prefix, "executable": sys.executable,
        "path": sys.path, "version": "%d.%d.%d" % sys.version_info[:3], "stdlib": os.path.dirname(os.__file__),
        "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "egid": os.getegid(),
        "env": {k: os.environ.get(k) for k in ("LISTEN_FDS", "LISTEN_PID", "PYTHONHOME")},
        "imported": imported,
    }).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
