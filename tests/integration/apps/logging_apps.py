"""An app that records every request it runs, for tests that must prove a
request was never run (test_backpressure.py). The log file is named by the
LOGGING_APPS_RUNLOG environment variable; ?s=SECONDS makes the request slow;
?gate=PATH makes it wait instead until PATH exists (at most s=, 30 s by
default), so the test decides when it ends."""
import os
import time
from urllib.parse import parse_qs


def application(environ, start_response):
    path = environ.get("PATH_INFO", "")
    with open(os.environ["LOGGING_APPS_RUNLOG"], "a") as f:
        f.write(path + "\n")
    q = parse_qs(environ.get("QUERY_STRING", ""))
    if "gate" in q:
        deadline = time.monotonic() + float(q.get("s", ["30"])[0])
        while not os.path.exists(q["gate"][0]) and time.monotonic() < deadline:
            time.sleep(0.01)
    else:
        time.sleep(float(q.get("s", ["0"])[0]))
    body = path.encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
