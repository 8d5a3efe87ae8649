"""The deployment options: --socket-mode; unix: binds that refuse a
non-socket or a live socket, replace a stale one and remove their own at
exit; --user/--group after binding, and a warning naming it when root
runs the app without it; a listening socket inherited from systemd
(LISTEN_FDS/LISTEN_PID)."""
import os
import pwd
import grp
import signal
import socket
import stat
import subprocess
import time

import pytest

from conftest import APPS, BIN, ROOT, free_port
from deploy_support import (Proc, build_preload, clean_env, info, one_line_error, preload_env, serve_info,
                            wait_connect)
from procfs import fd_targets, status_ids


def test_help_lists_the_deployment_options():
    out = subprocess.run([BIN, "--help"], capture_output=True, text=True).stdout
    for opt in ("--socket-mode", "--user", "--group", "--virtualenv", "LISTEN_FDS"):
        assert opt in out, opt


@pytest.mark.parametrize("workers", [1, 2])
def test_socket_mode_and_removed_at_exit(tmp_path, workers):
    path = str(tmp_path / "s.sock")
    p, _ = serve_info(["--socket-mode", "660", "--workers", str(workers)], env=clean_env(), addr=path)
    try:
        assert info(p, path)["prefix"]
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o660
        assert stat.S_ISSOCK(os.stat(path).st_mode)
        assert p.stop() == 0, p.text()
        assert not os.path.exists(path), "the socket file was left behind after a graceful exit"
    finally:
        p.close()


def test_a_relative_unix_socket_is_removed_after_the_app_changes_directory(tmp_path):
    """unix:NAME is relative to the directory cserve starts in (after
    --chdir); with one worker the app runs in the server's process, and its
    os.chdir does not stop the socket's removal at exit."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = Proc([BIN, "--bind", "unix:s.sock", "--chdir", str(tmp_path), f"{APPS / 'wsgi_apps.py'}:application"],
             env=clean_env())
    try:
        with wait_connect(p, str(tmp_path / "s.sock")) as s:
            s.sendall(f"GET /chdir?to={elsewhere} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(str(elsewhere).encode()), reply
        assert p.stop() == 0, p.text()
        assert not (tmp_path / "s.sock").exists(), "the socket file was left behind after a graceful exit"
    finally:
        p.close()


def test_socket_mode_needs_a_unix_bind():
    p = Proc([BIN, "--bind", f"127.0.0.1:{free_port()}", "--socket-mode", "660"], env=clean_env())
    assert p.wait_exit() == 2 and "--socket-mode" in one_line_error(p)


def test_bad_socket_mode():
    p = Proc([BIN, "--bind", "unix:/tmp/x.sock", "--socket-mode", "999"], env=clean_env())
    assert p.wait_exit() == 2 and "999" in one_line_error(p)


def test_unix_bind_refuses_a_regular_file(tmp_path):
    path = tmp_path / "not-a-socket"
    path.write_text("precious")
    p, _ = serve_info(env=clean_env(), addr=str(path))
    assert p.wait_exit() == 2
    line = one_line_error(p)
    assert "not a socket" in line and str(path) in line, line
    assert path.read_text() == "precious"


def test_unix_bind_refuses_a_live_socket(tmp_path):
    path = str(tmp_path / "live.sock")
    live = socket.socket(socket.AF_UNIX)
    live.bind(path)
    live.listen(8)
    try:
        p, _ = serve_info(env=clean_env(), addr=path)
        assert p.wait_exit() == 2
        assert "listening" in one_line_error(p)
        # the first server still owns the path
        c = socket.socket(socket.AF_UNIX)
        c.connect(path)
        c.close()
        assert os.path.exists(path)
    finally:
        live.close()


def test_unix_bind_replaces_a_stale_socket(tmp_path):
    path = str(tmp_path / "stale.sock")
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(path)
    dead.close()  # the file stays, nobody listens: what a killed server leaves
    assert stat.S_ISSOCK(os.stat(path).st_mode)
    p, _ = serve_info(env=clean_env(), addr=path)
    try:
        assert info(p, path)["prefix"]
        assert "stale" in p.text()
    finally:
        assert p.stop() == 0
        p.close()


@pytest.mark.parametrize("target", ["dangling", "stale-socket", "live-socket"])
def test_unix_bind_refuses_a_symlink_and_leaves_it(tmp_path, target):
    """A symlink at the path is never followed (to probe, chmod or remove
    what it points at) nor removed, whatever it points at."""
    path, where = str(tmp_path / "link.sock"), str(tmp_path / "target.sock")
    keep = None
    if target != "dangling":
        keep = socket.socket(socket.AF_UNIX)
        keep.bind(where)
        if target == "live-socket":
            keep.listen(8)
        else:
            keep.close()
    os.symlink(where, path)
    try:
        p, _ = serve_info(["--socket-mode", "666"], env=clean_env(), addr=path)
        assert p.wait_exit() == 2
        assert "not a socket" in one_line_error(p)
        assert os.readlink(path) == where
        if target != "dangling":
            assert stat.S_ISSOCK(os.stat(where).st_mode)
            assert stat.S_IMODE(os.stat(where).st_mode) != 0o666
        assert sorted(os.listdir(tmp_path)) == sorted(["link.sock"] + ([] if target == "dangling" else ["target.sock"]))
    finally:
        if keep:
            keep.close()


def test_stale_socket_replaced_leaves_nothing_else(tmp_path):
    """Replacing a stale socket (moved aside into a private directory,
    checked, removed) and removing our own at exit leave the directory as
    it was: no private directory or moved node behind."""
    path = str(tmp_path / "stale.sock")
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(path)
    dead.close()
    p, _ = serve_info(["--socket-mode", "600"], env=clean_env(), addr=path)
    try:
        assert info(p, path)["prefix"]
        st = os.lstat(path)
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
        assert os.listdir(tmp_path) == ["stale.sock"]
        assert p.stop() == 0
        assert os.listdir(tmp_path) == []
    finally:
        p.close()


# Wins the races a unix: bind has with whoever else can write to the
# socket's directory, at the worst moment, deterministically: preloaded
# into cserve, it swaps the path right after the stale-socket probe is
# refused, or the name just bound right after bind.
_RACER_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const char *unix_path(const struct sockaddr *a)
{
    return a->sa_family == AF_UNIX ? ((const struct sockaddr_un *)a)->sun_path : "";
}

/* A name in the same directory as path: the socket is bound under a
 * temporary name beside its path, then renamed into place. */
static int beside(const char *name, const char *path)
{
    const char *a = strrchr(name, '/'), *b = strrchr(path, '/');
    return a && b && a - name == b - path && strncmp(name, path, (size_t)(a - name)) == 0;
}

int bind(int fd, const struct sockaddr *a, socklen_t len)
{
    int (*real)(int, const struct sockaddr *, socklen_t) = dlsym(RTLD_NEXT, "bind");
    int rc = real(fd, a, len);
    const char *path = getenv("RACE_PATH"), *victim = getenv("RACE_SYMLINK_AFTER_BIND");
    const char *sun = unix_path(a);
    if (rc == 0 && path && victim && beside(sun, path)) {
        unlink(sun);
        symlink(victim, sun);
    }
    return rc;
}

int connect(int fd, const struct sockaddr *a, socklen_t len)
{
    static int done;
    int (*real)(int, const struct sockaddr *, socklen_t) = dlsym(RTLD_NEXT, "connect");
    int rc = real(fd, a, len), err = errno;
    const char *path = getenv("RACE_PATH"), *sun = unix_path(a);
    if (rc != 0 && err == ECONNREFUSED && !done && path && getenv("RACE_FILE_AFTER_PROBE")
        && (strcmp(sun, path) == 0 || strncmp(sun, "/proc/self/fd/", 14) == 0)) {
        done = 1;
        unlink(path);
        int f = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (f >= 0) {
            write(f, "precious", 8);
            close(f);
        }
    }
    errno = err;
    return rc;
}
"""


def _racer(tmp_path):
    return build_preload(tmp_path, _RACER_C)


def _racer_env(lib, **race):
    return preload_env(lib, **race)


def test_stale_socket_swapped_for_a_file_after_the_probe_is_not_removed(tmp_path):
    """The stale socket is replaced by a regular file between the probe
    and the removal: the file survives and the bind is refused."""
    racer = _racer(tmp_path)
    d = tmp_path / "run"
    d.mkdir()
    path = str(d / "stale.sock")
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(path)
    dead.close()
    p, _ = serve_info(env=_racer_env(racer, RACE_PATH=path, RACE_FILE_AFTER_PROBE="1"), addr=path)
    try:
        assert p.wait_exit(timeout=HANG_S) == 2, p.text()
        assert "changed" in p.text()
        with open(path) as f:
            assert f.read() == "precious"
        assert os.listdir(d) == ["stale.sock"]
    finally:
        p.close()


def test_socket_mode_is_not_applied_through_a_symlink_swapped_in_after_bind(tmp_path):
    """The socket just bound is replaced by a symlink to another file
    before --socket-mode is applied: that file's mode stays, nothing
    listens, and the symlink is not followed at exit either."""
    racer = _racer(tmp_path)
    d = tmp_path / "run"
    d.mkdir()
    path, victim = str(d / "s.sock"), tmp_path / "victim"
    victim.write_text("secret")
    victim.chmod(0o600)
    p, _ = serve_info(["--socket-mode", "666"],
                      env=_racer_env(racer, RACE_PATH=path, RACE_SYMLINK_AFTER_BIND=str(victim)),
                      addr=path)
    try:
        assert p.wait_exit(timeout=HANG_S) != 0, p.text()
        assert "no longer holds a socket" in p.text()
        assert stat.S_IMODE(victim.stat().st_mode) == 0o600
        assert victim.read_text() == "secret"
    finally:
        p.close()


def test_a_second_cserve_cannot_take_over_a_live_one(tmp_path):
    path = str(tmp_path / "one.sock")
    first, _ = serve_info(env=clean_env(), addr=path)
    try:
        info(first, path)
        second, _ = serve_info(env=clean_env(), addr=path)
        assert second.wait_exit() == 2 and "listening" in one_line_error(second)
        info(first, path)  # still reachable
    finally:
        first.stop()
        first.close()


# Holds listen() on a unix: socket until the file LISTEN_GATE exists (at
# most 30 s): the moment between bind() and listen(), made as long as a test
# needs, where a loaded machine could preempt the server. With LISTEN_MARK
# it first creates that file, so a test knows the server is in that moment.
_GATE_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int listen(int fd, int backlog)
{
    int (*real)(int, int) = dlsym(RTLD_NEXT, "listen");
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    const char *gate = getenv("LISTEN_GATE"), *mark = getenv("LISTEN_MARK");
    if (gate && getsockname(fd, (struct sockaddr *)&ss, &len) == 0 && ss.ss_family == AF_UNIX) {
        if (mark) {
            int m = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
            if (m >= 0)
                close(m);
        }
        for (int i = 0; i < 3000 && access(gate, F_OK) != 0; i++)
            usleep(10000);
    }
    return real(fd, backlog);
}
"""

HANG_S = 30  # only detects a hang: nothing here legitimately takes this long


def _wait_for(cond, timeout=HANG_S):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


@pytest.mark.parametrize("flag", ["--bind", "--metrics-bind"])
def test_unix_path_appears_only_once_it_accepts(tmp_path, flag):
    """While the socket is bound but listen() has not come yet, its path
    is not there: a client that connects as soon as the path exists is
    accepted, never refused (both listeners share the binder)."""
    lib = build_preload(tmp_path, _GATE_C)
    d, gate, mark = tmp_path / "run", tmp_path / "gate", tmp_path / "in-listen"
    d.mkdir()
    path = str(d / "s.sock")
    env = preload_env(lib, LISTEN_GATE=str(gate), LISTEN_MARK=str(mark))
    if flag == "--bind":
        p, _ = serve_info(env=env, addr=path)
    else:
        p, _ = serve_info(["--metrics-bind", f"unix:{path}"], env=env)
    try:
        _wait_for(lambda: mark.exists() or p.proc.poll() is not None)  # bound: listen() waits
        assert p.proc.poll() is None, p.text()
        assert os.listdir(d) and not os.path.exists(path), os.listdir(d)
        gate.touch()
        _wait_for(lambda: os.path.exists(path))
        c = socket.socket(socket.AF_UNIX)
        c.connect(path)  # refused if the path came before listen()
        c.close()
        assert os.listdir(d) == ["s.sock"]
        assert p.stop() == 0, p.text()
        assert os.listdir(d) == []
    finally:
        p.close()


def test_a_second_cserve_between_bind_and_listen_leaves_one_serving(tmp_path):
    """A second server that starts while the first one's socket is bound
    but not yet listening cannot replace it as stale and leave the first
    running unreachable: one of the two serves the path, the other exits."""
    lib = build_preload(tmp_path, _GATE_C)
    d, gate = tmp_path / "run", tmp_path / "gate"
    d.mkdir()
    path = str(d / "s.sock")
    first, _ = serve_info(env=preload_env(lib, LISTEN_GATE=str(gate)), addr=path)
    second = None
    try:
        _wait_for(lambda: os.listdir(d) or first.proc.poll() is not None)
        second, _ = serve_info(env=clean_env(), addr=path)

        def second_settled():
            if second.proc.poll() is not None:
                return True
            with socket.socket(socket.AF_UNIX) as c:
                try:
                    c.connect(path)
                    return True
                except OSError:
                    return False
        _wait_for(second_settled)
        gate.touch()
        _wait_for(lambda: first.proc.poll() is not None or second.proc.poll() is not None)
        alive = [p for p in (first, second) if p.proc.poll() is None]
        assert len(alive) == 1, first.text() + second.text()
        info(alive[0], path)
        gone = first if alive[0] is second else second
        assert gone.proc.returncode == 2, gone.text()
    finally:
        for p in (first, second):
            if p:
                p.stop()
                p.close()


root_only = pytest.mark.skipif(os.geteuid() != 0, reason="switching user needs root")


def _privileged_port():
    for port in range(990, 1024):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    pytest.skip("no free port below 1024")


@root_only
@pytest.mark.parametrize("workers", [1, 2])
def test_user_group_drop_after_binding_a_privileged_port(workers):
    nobody = pwd.getpwnam("nobody")
    nogroup = grp.getgrnam("nogroup")
    port = _privileged_port()
    p, addr = serve_info(["--user", "nobody", "--group", "nogroup", "--workers", str(workers)],
                         env=clean_env(), addr=("127.0.0.1", port))
    try:
        got = info(p, addr)
        assert (got["uid"], got["euid"], got["gid"], got["egid"]) == (nobody.pw_uid,) * 2 + (nogroup.gr_gid,) * 2
        ids = status_ids(p.proc.pid)  # real, effective, saved, filesystem
        assert ids["Uid"] == [nobody.pw_uid] * 4 and ids["Gid"] == [nogroup.gr_gid] * 4, ids
        assert "as nobody:nogroup" in p.text()
        assert p.stop() == 0, p.text()
    finally:
        p.close()


@root_only
def test_user_owns_its_unix_socket_and_removes_it():
    import tempfile
    d = tempfile.mkdtemp(prefix="cserve-user-")  # in /tmp: nobody can reach it
    os.chmod(d, 0o777)  # ... and unlink in it
    path = os.path.join(d, "u.sock")
    p, _ = serve_info(["--user", "nobody", "--socket-mode", "600"], env=clean_env(), addr=path)
    try:
        assert info(p, path)["uid"] == pwd.getpwnam("nobody").pw_uid
        st = os.stat(path)
        assert st.st_uid == pwd.getpwnam("nobody").pw_uid and stat.S_IMODE(st.st_mode) == 0o600
        assert p.stop() == 0
        assert not os.path.exists(path), p.text()
    finally:
        p.close()
        if os.path.exists(path):
            os.unlink(path)
        os.rmdir(d)


ROOT_WARNING = "running as root without --user"


@root_only
def test_as_root_without_user_a_warning_names_the_fix():
    p, addr = serve_info(env=clean_env())
    try:
        assert info(p, addr)["euid"] == 0
        lines = [l for l in p.text().splitlines() if ROOT_WARNING in l]
        assert len(lines) == 1 and "warning" in lines[0] and "--user USER" in lines[0], p.text()
        assert p.stop() == 0, p.text()
    finally:
        p.close()


@root_only
@pytest.mark.parametrize("how", ["--user", "not root"])
def test_no_root_warning_when_the_app_does_not_run_as_root(how):
    # --user drops root before the app runs; a server started as another
    # user never had it.
    kw = {} if how == "--user" else {"user": "nobody", "group": "nogroup", "extra_groups": []}
    p, addr = serve_info(["--user", "nobody"] if how == "--user" else [], env=clean_env(), **kw)
    try:
        assert info(p, addr)["euid"] == pwd.getpwnam("nobody").pw_uid
        assert ROOT_WARNING not in p.text(), p.text()
        assert p.stop() == 0, p.text()
    finally:
        p.close()


def test_unknown_user_refused_before_listening():
    port = free_port()
    p = Proc([BIN, "--bind", f"127.0.0.1:{port}", "--user", "no-such-user-xyz"], env=clean_env())
    assert p.wait_exit() == 2 and "no-such-user-xyz" in one_line_error(p)


@root_only
def test_uid_without_passwd_entry_is_refused_without_a_group():
    """A uid with no passwd entry has no primary group: serving with the
    gid cserve started with (root's) would be wrong, so it asks for one."""
    p, _ = serve_info(["--user", "54321"], env=clean_env())
    try:
        assert p.wait_exit(timeout=HANG_S) == 2
        line = one_line_error(p)
        assert "54321" in line and "--group" in line, line
    finally:
        p.close()


@root_only
def test_uid_without_passwd_entry_serves_with_the_given_group():
    p, addr = serve_info(["--user", "54321", "--group", "54322"], env=clean_env())
    try:
        got = info(p, addr)
        assert (got["uid"], got["euid"], got["gid"], got["egid"]) == (54321, 54321, 54322, 54322)
        groups = status_ids(p.proc.pid)["Groups"]
        assert groups == [], groups  # root's supplementary groups are gone too
        assert p.stop() == 0, p.text()
    finally:
        p.close()


@pytest.mark.parametrize("args", [["--user", "4294967295", "--group", "0"],
                                  ["--user", "0", "--group", "4294967295"],
                                  ["--user", "4294967296", "--group", "0"],
                                  ["--user", "99999999999999999999999"]])
def test_numeric_ids_out_of_range_are_refused(args):
    """-1 means "leave unchanged" to setuid/setgid; 2**32 would wrap to
    uid 0 and serve as root."""
    p, _ = serve_info(args, env=clean_env())
    try:
        assert p.wait_exit(timeout=HANG_S) == 2
        assert "out of range" in one_line_error(p)
    finally:
        p.close()


_EXEC_WITH_FD3 = """
import os, sys
fd = int(sys.argv[1])
if fd != 3:
    os.dup2(fd, 3)
    os.close(fd)
os.set_inheritable(3, True)
os.environ.setdefault("LISTEN_PID", str(os.getpid()))
os.execv(sys.argv[2], sys.argv[2:])
"""


def _spawn_with_inherited(listener, extra_env, bind_port):
    """cserve with `listener` as fd 3 and LISTEN_PID set to its own pid, as
    systemd starts it (a Python shim puts the fd in place, then execs cserve:
    the pid stays)."""
    import sys
    fd = listener.fileno()
    env = clean_env(LISTEN_FDS="1", **extra_env)
    return Proc([sys.executable, "-c", _EXEC_WITH_FD3, str(fd), BIN, "--bind", f"127.0.0.1:{bind_port}",
                 "--chdir", str(APPS), "deploy_info:application"], env=env, pass_fds=(fd,))


@pytest.mark.parametrize("family", ["tcp", "unix"])
def test_systemd_socket_activation(tmp_path, family):
    if family == "tcp":
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        addr = listener.getsockname()
    else:
        addr = str(tmp_path / "sd.sock")
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(addr)
    listener.listen(64)
    other_port = free_port()
    p = _spawn_with_inherited(listener, {}, other_port)
    listener.close()  # only cserve holds it now
    try:
        got = info(p, addr)
        assert got["env"]["LISTEN_FDS"] is None and got["env"]["LISTEN_PID"] is None
        assert "systemd socket fd 3" in p.text()
        with pytest.raises(ConnectionRefusedError):  # --bind was not used
            socket.create_connection(("127.0.0.1", other_port), timeout=HANG_S).close()
        assert p.stop() == 0
        if family == "unix":
            assert os.path.exists(addr), "cserve removed a socket systemd owns"
    finally:
        p.close()


_EXEC_WITH_FDS = """
import fcntl, os, sys
n = int(sys.argv[1])
fds = [int(x) for x in sys.argv[2:2 + n]]
moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in fds]
for fd in fds:
    os.close(fd)
for i, fd in enumerate(moved):
    os.dup2(fd, 3 + i)  # inheritable, as systemd passes them
    os.close(fd)
os.environ["LISTEN_PID"] = str(os.getpid())
os.environ["LISTEN_FDS"] = str(n)
os.execv(sys.argv[2 + n], sys.argv[2 + n:])
"""


def test_extra_systemd_sockets_are_closed():
    """With LISTEN_FDS=3 cserve serves on fd 3; the sockets at fds 4 and 5
    are not kept, so neither the server nor a program the app runs holds
    them."""
    import sys
    listeners = []
    for _ in range(3):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        listeners.append(s)
    addr = listeners[0].getsockname()
    extra = {f"socket:[{os.fstat(s.fileno()).st_ino}]" for s in listeners[1:]}
    fds = [s.fileno() for s in listeners]
    p = Proc([sys.executable, "-c", _EXEC_WITH_FDS, "3", *map(str, fds), BIN, "--bind",
              f"127.0.0.1:{free_port()}", "--chdir", str(APPS), "fork_apps:fds"],
             env=clean_env(), pass_fds=fds)
    for s in listeners:
        s.close()
    try:
        from deploy_support import http_get
        status, body = http_get(wait_connect(p, addr), "/")
        assert status == 200, p.text()
        held = fd_targets(p.proc.pid)
        assert not held & extra, held
        child = dict(line.split(" -> ", 1) for line in body.decode().splitlines())
        assert not [t for t in child.values() if t.startswith("socket:")], child
        assert "serving on the first" in p.text()
        assert p.stop() == 0, p.text()
    finally:
        p.close()


def test_listen_fds_for_another_pid_are_ignored():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = free_port()
    p = _spawn_with_inherited(listener, {"LISTEN_PID": "1"}, port)
    try:
        assert info(p, ("127.0.0.1", port))["prefix"]
    finally:
        listener.close()
        p.stop()
        p.close()
