"""The test's side of apps/auto_apps.py's gated requests: `?gate=PATH`
waits while the test holds PATH's lock, and `?mark=PATH` appends "start"
to PATH when the request reaches the app."""
import fcntl


class Gate:
    """A file the app's ?gate= requests wait on while the test holds its
    lock; open() lets every one of them through."""

    def __init__(self, path):
        self.path = str(path)
        self.f = open(self.path, "wb")
        fcntl.flock(self.f, fcntl.LOCK_EX)

    def open(self):
        if not self.f.closed:
            fcntl.flock(self.f, fcntl.LOCK_UN)
            self.f.close()


def marks(path):
    """How many gated requests have started, by the marks file at path."""
    try:
        with open(path) as f:
            return f.read().count("start")
    except FileNotFoundError:
        return 0
