"""Apps that fork (test_app_fork.py): a child that outlives the request
holding every descriptor it inherited, multiprocessing's fork start method,
subprocess under load, and an exec'd child that lists what it inherited.

The server's descriptors are duplicated into every child a fork makes; the
server must still work when those copies outlive its own."""
import multiprocessing
import os
import subprocess
import time
from urllib.parse import parse_qs


def _square(x):
    return x * x


def _send_square(conn, x):
    conn.send(_square(x))
    conn.close()


def _reply(start_response, body, status="200 OK"):
    body = body.encode() if isinstance(body, str) else body
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def sleeper(environ, start_response):
    """A child that sleeps ?secs= seconds holding all it inherited, then
    exits without running anything of the parent's (os._exit). The body is
    its pid, so the test can end it early."""
    secs = float(parse_qs(environ.get("QUERY_STRING", "")).get("secs", ["10"])[0])
    pid = os.fork()
    if pid == 0:
        try:
            time.sleep(secs)
        finally:
            os._exit(0)
    return _reply(start_response, str(pid))


def pool(environ, start_response):
    """multiprocessing with the fork start method inside a request: a Pool
    (worker processes forked from this thread) and one Process answering
    through a Pipe. The Process's exit status is not reported: CPython 3.11
    fails threading._shutdown in a child forked from a thread it did not
    create (a pool thread), so that child exits 1 after doing its work."""
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as p:
        squares = p.map(_square, range(8))
    theirs, ours = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_send_square, args=(ours, 3))
    proc.start()
    ours.close()
    got = theirs.recv() if theirs.poll(30) else None
    theirs.close()
    proc.join(30)
    return _reply(start_response, "%s %s" % (sum(squares), got))


def spawn(environ, start_response):
    """subprocess.run of `true`: a fork (or vfork) and an exec per request.
    close_fds=False so that only close-on-exec keeps the server's
    descriptors out of the child."""
    rc = subprocess.run(["true"], close_fds=False).returncode
    return _reply(start_response, "true %d" % rc)


def fds(environ, start_response):
    """What an exec'd child inherits: a shell lists its own /proc/PID/fd
    (close_fds=False: nothing but close-on-exec filters them), one line per
    descriptor, "N -> TARGET"."""
    out = subprocess.run(["/bin/sh", "-c", 'cd /proc/$$/fd && for f in *; do '
                          'echo "$f -> $(readlink "$f")"; done'],
                         close_fds=False, stdout=subprocess.PIPE, check=True).stdout
    return _reply(start_response, out)


def terminate(environ, start_response):
    """A forked Process that would sleep a minute, ended with terminate()
    (SIGTERM): the body is its exit code and how long the join took."""
    ctx = multiprocessing.get_context("fork")
    proc = ctx.Process(target=time.sleep, args=(60,))
    proc.start()
    t0 = time.monotonic()
    proc.terminate()
    proc.join(10)
    code = proc.exitcode
    if code is None:
        proc.kill()
        proc.join()
    return _reply(start_response, "%s %.1f" % (code, time.monotonic() - t0))


def sigblk(environ, start_response):
    """The signal mask a forked child starts with (SigBlk of
    /proc/self/status, hex), read in the child and sent back on a pipe."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            with open("/proc/self/status") as f:
                line = next(x for x in f if x.startswith("SigBlk:"))
            os.write(w, line.split()[1].encode())
        finally:
            os._exit(0)
    os.close(w)
    mask = os.read(r, 64)
    os.close(r)
    os.waitpid(pid, 0)
    return _reply(start_response, mask)


def exec_sigblk(environ, start_response):
    """The signal mask a program the app runs starts with (subprocess execs
    straight from vfork, past any fork handler)."""
    out = subprocess.run(["grep", "^SigBlk:", "/proc/self/status"], capture_output=True, text=True,
                         check=True).stdout
    return _reply(start_response, out.split()[1])


def exec_terminate(environ, start_response):
    """A program the app runs, ended with Popen.terminate() (SIGTERM): its
    return code (-15 when SIGTERM reached it)."""
    p = subprocess.Popen(["sleep", "60"])
    p.terminate()
    try:
        code = p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        code = "still running"
    return _reply(start_response, str(code))
