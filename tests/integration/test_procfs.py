"""The tests' /proc helpers (procfs.py) when the process they read exits
in the middle of a walk: between listing /proc/PID/task (or fd) and reading
an entry, the way a draining worker exits during a reload test. The walks
and probes answer as for a process that is gone; the measures of a process
expected alive fail with an AssertionError naming it. No server runs; each
case forks a process and reaps it at the chosen moment."""
import os
import subprocess

import pytest

import procfs
from loadgen import wait_until


@pytest.fixture
def doomed():
    """A running process, and a function that ends and reaps it."""
    p = subprocess.Popen(["sleep", "60"])

    def end():
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)
    yield p, end
    end()


def exit_after_listing(monkeypatch, end):
    """os.listdir as procfs calls it, except that the process ends right
    after the first listing, before any entry of it is read."""
    real = os.listdir

    def listdir(path):
        names = real(path)
        monkeypatch.setattr(procfs.os, "listdir", real)
        end()
        return names
    monkeypatch.setattr(procfs.os, "listdir", listdir)


def test_a_running_process_is_read(doomed):
    p, _ = doomed
    assert procfs.alive(p.pid)
    # Popen can return while the child is still in execve, its new
    # cmdline not yet set (seen under a loaded ASan run): wait for it.
    assert wait_until(lambda: procfs.cmdline(p.pid) == ["sleep", "60"], 30), procfs.cmdline(p.pid)
    # Asleep, running, or faulting its pages in from disk ("D", seen
    # under a loaded ASan run): any letter of a live, unstopped process.
    assert procfs.state(p.pid) in ("S", "R", "D")
    assert procfs.thread_names(p.pid) == ["sleep"]
    assert procfs.fd_count(p.pid) >= 3 and procfs.rss_kib(p.pid) > 0
    assert p.pid in procfs.children(os.getpid())


def test_children_of_a_process_that_exits_during_the_walk(doomed, monkeypatch):
    p, end = doomed
    exit_after_listing(monkeypatch, end)
    assert procfs.children(p.pid) == []


def test_descendants_leave_out_a_child_that_exits_during_the_walk(doomed, monkeypatch):
    p, end = doomed
    me = os.getpid()
    real_children = procfs.children

    def children(pid):
        kids = real_children(pid)
        if pid == me:  # our child is listed, then ends before its own children are read
            exit_after_listing(monkeypatch, end)
        return kids
    monkeypatch.setattr(procfs, "children", children)
    assert p.pid in procfs.descendants(me)


def test_thread_names_of_a_process_that_exits_during_the_walk(doomed, monkeypatch):
    p, end = doomed
    exit_after_listing(monkeypatch, end)
    assert procfs.thread_names(p.pid) == []


def test_descriptors_of_a_process_that_exits_during_the_walk(doomed, monkeypatch):
    p, end = doomed
    exit_after_listing(monkeypatch, end)
    with pytest.raises(AssertionError, match=f"pid {p.pid} exited"):
        procfs.fd_targets(p.pid)


def test_a_process_that_has_exited(doomed):
    p, end = doomed
    end()
    assert not procfs.alive(p.pid)
    assert procfs.state(p.pid) is None and procfs.cmdline(p.pid) is None
    assert procfs.read(p.pid, "status") is None
    assert procfs.children(p.pid) == [] and procfs.descendants(p.pid) == []
    assert p.pid not in procfs.children(os.getpid())
    for measure in (procfs.rss_kib, procfs.fd_count, procfs.fd_targets, procfs.status_ids, procfs.thread_names):
        with pytest.raises(AssertionError, match=f"pid {p.pid} exited"):
            measure(p.pid)


def test_a_zombie_is_not_running(doomed):
    p, _ = doomed
    p.kill()
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)  # exited, left unreaped: a zombie
    assert procfs.state(p.pid) == "Z"
    assert not procfs.alive(p.pid)
    assert p.pid not in procfs.children(os.getpid())
