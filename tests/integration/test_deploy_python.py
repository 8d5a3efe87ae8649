"""Which Python cserve runs: the installation it was built against, by
that installation's own prefix, whatever python3 is first on PATH;
virtualenvs as their own python sees them; a virtualenv of another Python
version refused before anything listens; a cserve built against a second
interpreter when there is one."""
import glob
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys

import pytest

import loadgen
import procfs
from conftest import APPS, BIN, PYTHON_LINK, ROOT, free_port
from deploy_support import EMBEDDED_PY, Proc, clean_env, embedded_sys_path, info, one_line_error, serve_info

BASE_PREFIX = sys.base_prefix  # the tests run on the interpreter cserve embeds (make PYTHON=...)


def _probe(exe):
    try:
        out = subprocess.run([exe, "-c", "import sys, json; print(json.dumps([sys.base_prefix, "
                              "'%d.%d' % sys.version_info[:2], sys.version_info >= (3, 9)]))"],
                             capture_output=True, text=True, timeout=20, env=clean_env())
        return json.loads(out.stdout) if out.returncode == 0 else None
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def auto_link(exe):
    """What make's PYTHON_LINK=auto should pick for interpreter exe, found
    another way than the Makefile's probe: the shared libpython on disk where
    sysconfig says the installation built one, else the archive."""
    so, archive = subprocess.run(
        [exe, "-c", "import os, sysconfig as s; g = s.get_config_var; "
                    "print(os.path.join(g('LIBDIR') or '', g('LDLIBRARY') or '') if g('Py_ENABLE_SHARED') else ''); "
                    "print(os.path.join(g('LIBPL') or '', g('LIBRARY') or ''))"],
        capture_output=True, text=True, env=clean_env()).stdout.split("\n")[:2]
    has_archive = archive.endswith(".a") and os.path.isfile(archive)
    return "shared" if (so and os.path.exists(so)) or not has_archive else "static"


def make_link_line(*knobs):
    """The command make would link cserve with, in a scratch BUILD folder
    (make -n: nothing is built)."""
    build = "build-linkcheck"
    out = subprocess.run(["make", "-n", f"BUILD={build}", *knobs, f"{build}/cserve"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"make -n {' '.join(knobs)}: {out.stderr[-2000:]}"
    lines = [ln for ln in out.stdout.splitlines() if f"-o {build}/cserve " in ln + " "]
    assert len(lines) == 1, f"no single link line for {build}/cserve in: {out.stdout[-3000:]}"
    return lines[0]


def _installation():
    """(shared libpython path or None, archive path or None) of the embedded Python."""
    out = subprocess.run(
        [EMBEDDED_PY, "-c", "import os, sysconfig as s; g = s.get_config_var; "
                            "print(os.path.join(g('LIBDIR') or '', g('LDLIBRARY') or '') if g('Py_ENABLE_SHARED') else '-'); "
                            "print(os.path.join(g('LIBPL') or '', g('LIBRARY') or ''))"],
        capture_output=True, text=True, env=clean_env()).stdout.split("\n")
    so = out[0] if out[0] != "-" and os.path.exists(out[0]) else None
    return so, (out[1] if out[1].endswith(".a") and os.path.isfile(out[1]) else None)


def test_default_build_links_the_shared_libpython():
    """Where the installation has a shared libpython (Debian's
    libpython3.X.so), the default build links it, so an update of it reaches
    cserve at restart; PYTHON_LINK=static links the archive instead."""
    so, archive = _installation()
    if so is None:
        pytest.skip(f"{EMBEDDED_PY} has no shared libpython: the default is the archive")
    default = make_link_line()
    assert f"-lpython{MY_VER}" in default and ".a " not in default + " " and "-no-pie" not in default, default
    if archive is None:
        pytest.skip(f"{EMBEDDED_PY} has no libpython archive installed (libpython{MY_VER}-dev)")
    static = make_link_line("PYTHON_LINK=static")
    assert archive in static and "-no-pie" in static and f"-lpython{MY_VER} " not in static + " ", static
    if PYTHON_LINK == "auto" and not loadgen.sanitizer(BIN):
        ldd = subprocess.run(["ldd", BIN], capture_output=True, text=True).stdout
        assert re.search(rf"libpython{re.escape(MY_VER)}\S*\.so", ldd), f"{BIN} is the default build, yet: {ldd}"


def linked(binary):
    """'static' or 'shared', as binary's --version says."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, env=clean_env()).stdout
    m = re.search(r"libpython (static|shared)", out)
    assert m, f"--version does not say how libpython is linked: {out!r}"
    return m.group(1)


def test_libpython_as_the_interpreter_links_it():
    """PYTHON_LINK=auto embeds the installation's shared libpython where it
    has one, else its archive; --version says which, and that is what the
    running server maps: no libpython*.so when static. C extension modules
    load against the executable's symbols either way."""
    how = linked(BIN)
    # make integration-test passes its PYTHON_LINK; run by hand, set it for a non-auto build
    knob = PYTHON_LINK
    if knob == "auto":
        want = "shared" if loadgen.sanitizer(BIN) else auto_link(EMBEDDED_PY)
        assert how == want, f"{BIN} links libpython {how}; for {EMBEDDED_PY} auto means {want}"
    elif knob in ("static", "shared"):
        assert how == knob
    p, addr = serve_info(env=clean_env())
    try:
        got = info(p, addr, imports=["_ssl", "_sqlite3", "_ctypes", "_decimal", "pyexpat", "zlib", "_json"])
        assert all(not v.startswith("ImportError") for v in got["imported"].values()), got["imported"]
        maps = procfs.read(p.proc.pid, "maps")
        assert maps is not None, f"the server exited: {p.text()[-2000:]}"
        mapped = re.findall(r"\S*/libpython[^\s]*\.so[^\s]*", maps)
        if how == "static":
            assert not mapped, f"a static build mapped {sorted(set(mapped))}: two interpreters in one process"
        else:
            assert mapped, "--version says shared, yet no libpython is mapped"
    finally:
        p.stop()


def other_pythons():
    """CPython >= 3.9 installations on this machine other than the embedded
    one: [(python exe, base prefix, "X.Y")]. pyenv's, then python3.X on PATH."""
    cands = sorted(glob.glob("/root/.pyenv/versions/3.*/bin/python3")) + \
        [shutil.which(f"python3.{m}") for m in range(9, 15)]
    seen, found = {BASE_PREFIX}, []
    for exe in filter(None, cands):
        p = _probe(exe)
        if p and p[2] and p[0] not in seen:
            seen.add(p[0])
            found.append((exe, p[0], p[1]))
    return found


MY_VER = "%d.%d" % sys.version_info[:2]


def test_version_and_startup_line_name_the_interpreter():
    out = subprocess.run([BIN, "--version"], capture_output=True, text=True, env=clean_env()).stdout
    v = "%d.%d.%d" % sys.version_info[:3]
    assert f"Python {v} at {BASE_PREFIX}" in out, out
    p, addr = serve_info(env=clean_env())
    try:
        assert info(p, addr)["version"] == v
        assert f"Python {v} at {BASE_PREFIX}" in p.text()
    finally:
        p.stop()


def _fake_python_dir(tmp_path):
    """A python3 that is not one, in front of what looks like an installation
    of the same version (a stdlib landmark whose os.py refuses to load): an
    interpreter that takes its prefix from PATH would start from there."""
    root = tmp_path / "fakepy"
    d = root / "bin"
    d.mkdir(parents=True)
    lib = root / "lib" / f"python{MY_VER}"
    (lib / "lib-dynload").mkdir(parents=True)
    (lib / "os.py").write_text("raise ImportError('the stdlib of the python3 on PATH was loaded')\n")
    for name in ("python3", "python"):
        f = d / name
        f.write_text("#!/bin/sh\necho 'not a python' >&2\nexit 1\n")
        f.chmod(0o755)
    return d


def test_fake_python3_first_on_path_changes_nothing(tmp_path):
    env = clean_env(PATH=f"{_fake_python_dir(tmp_path)}:{os.environ['PATH']}")
    p, addr = serve_info(env=env)
    try:
        got = info(p, addr)
        assert got["base_prefix"] == BASE_PREFIX and got["prefix"] == BASE_PREFIX
        # the interpreter's own python would see exactly this sys.path
        assert got["path"][1:] == embedded_sys_path(), got["path"]
    finally:
        p.stop()


def test_another_python3_first_on_path_still_imports_system_flask(tmp_path):
    """The reported bug: pyenv's python3 ahead on PATH made cserve load that
    installation's stdlib and no system site-packages; Flask went missing."""
    others = other_pythons()
    if not others:
        pytest.skip("no second Python installation on this machine")
    if subprocess.run([EMBEDDED_PY, "-c", "import flask"], capture_output=True).returncode != 0:
        pytest.skip("flask is not installed for the embedded Python")
    # Same minor version first: the case that loaded a foreign stdlib.
    exe, prefix, _ = sorted(others, key=lambda o: o[2] != MY_VER)[0]
    env = clean_env(PATH=f"{os.path.dirname(exe)}:{os.environ['PATH']}")
    p, addr = serve_info(env=env)
    try:
        got = info(p, addr, imports=["flask"])
        assert got["stdlib"].startswith(BASE_PREFIX) and not got["stdlib"].startswith(prefix), got
        assert not got["imported"]["flask"].startswith("ImportError"), got["imported"]
    finally:
        p.stop()


def _venv(path, *flags, python=EMBEDDED_PY):
    subprocess.run([python, "-m", "venv", "--without-pip", *flags, str(path)], check=True, env=clean_env())
    sp = glob.glob(str(path / "lib" / "python3.*" / "site-packages"))[0]
    (pathlib.Path(sp) / "only_in_this_venv.py").write_text("HERE = True\n")
    return path


def _venv_python_path(venv):
    out = subprocess.run([str(venv / "bin" / "python"), "-c", "import sys, json; print(json.dumps(sys.path[1:]))"],
                         capture_output=True, text=True, check=True, env=clean_env(), cwd="/").stdout
    return json.loads(out)


@pytest.mark.parametrize("how", ["VIRTUAL_ENV", "--virtualenv"])
def test_virtualenv_seen_as_its_own_python_sees_it(tmp_path, how):
    venv = _venv(tmp_path / "venv")
    env = clean_env(VIRTUAL_ENV=str(venv)) if how == "VIRTUAL_ENV" else clean_env()
    args = ["--virtualenv", str(venv)] if how == "--virtualenv" else []
    p, addr = serve_info(args, env=env)
    try:
        got = info(p, addr, imports=["only_in_this_venv", "flask"])
        assert got["prefix"] == str(venv) and got["base_prefix"] == BASE_PREFIX
        assert got["path"][1:] == _venv_python_path(venv)
        assert got["imported"]["only_in_this_venv"].startswith(str(venv))
        # include-system-site-packages = false: the system's flask is not there
        assert got["imported"]["flask"].startswith("ImportError")
        assert f"virtualenv {venv}" in p.text()
    finally:
        p.stop()


def test_virtualenv_with_system_site_packages(tmp_path):
    venv = _venv(tmp_path / "venv", "--system-site-packages")
    p, addr = serve_info(env=clean_env(VIRTUAL_ENV=str(venv)))
    try:
        got = info(p, addr, imports=["only_in_this_venv"])
        assert got["path"][1:] == _venv_python_path(venv)
        assert not got["imported"]["only_in_this_venv"].startswith("ImportError")
    finally:
        p.stop()


def _refused_before_listening(env, args=()):
    port = free_port()
    p = Proc([BIN, "--bind", f"127.0.0.1:{port}", "--chdir", str(APPS), *args, "deploy_info:application"],
             env=env)
    rc = p.wait_exit()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    return rc, one_line_error(p)


def test_virtualenv_of_another_version_refused(tmp_path):
    """A pyvenv.cfg of another minor version (written by hand: runs on every
    machine) is refused with one line naming both versions and the fix."""
    venv = tmp_path / "venv39"
    (venv / "lib" / "python3.99" / "site-packages").mkdir(parents=True)
    (venv / "bin").mkdir()
    (venv / "pyvenv.cfg").write_text("home = /opt/python3.99/bin\ninclude-system-site-packages = false\n"
                                     "version = 3.99.1\n")
    rc, line = _refused_before_listening(clean_env(VIRTUAL_ENV=str(venv)))
    assert rc == 2
    assert "3.99.1" in line and ("Python %d.%d" % sys.version_info[:2]) in line, line
    assert "make PYTHON=/opt/python3.99/bin/python3.99" in line, line


def test_real_virtualenv_of_another_python_refused(tmp_path):
    others = [o for o in other_pythons() if o[2] != MY_VER]
    if not others:
        pytest.skip("no Python of another minor version on this machine")
    exe, _, ver = others[0]
    venv = _venv(tmp_path / "other", python=exe)
    rc, line = _refused_before_listening(clean_env(), ["--virtualenv", str(venv)])
    assert rc == 2 and f"is Python {ver}." in line and "make PYTHON=" in line, line


def test_not_a_virtualenv_refused(tmp_path):
    rc, line = _refused_before_listening(clean_env(), ["--virtualenv", str(tmp_path)])
    assert rc == 2 and "pyvenv.cfg" in line, line


def test_build_against_a_second_interpreter(tmp_path):
    """make PYTHON=<another CPython> builds a cserve that embeds it and runs
    its virtualenvs. Incremental in build-other-python/ (gitignored)."""
    others = [o for o in other_pythons() if o[2] != MY_VER] or other_pythons()
    if not others:
        pytest.skip("no second Python installation on this machine")
    exe, prefix, ver = others[0]
    build = ROOT / "build-other-python"
    r = subprocess.run(["make", "-C", str(ROOT), "-j2", f"BUILD={build}", f"PYTHON={exe}", "OPT=-O1",
                        f"{build}/cserve"], capture_output=True, text=True, env=clean_env())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    other_bin = str(build / "cserve")
    assert linked(other_bin) == auto_link(exe), f"{other_bin} for {exe}"
    venv = _venv(tmp_path / "venv", python=exe)
    p, addr = serve_info(env=clean_env(VIRTUAL_ENV=str(venv)), bin_=other_bin)
    try:
        got = info(p, addr, imports=["only_in_this_venv", "json", "_ssl"])
        assert got["version"].startswith(ver + ".") and got["base_prefix"] == prefix, got
        assert got["prefix"] == str(venv)
        assert all(not v.startswith("ImportError") for v in got["imported"].values()), got["imported"]
    finally:
        p.stop()
