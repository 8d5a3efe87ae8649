"""`pip install .` into a fresh virtualenv: this checkout installed through
pyproject.toml and the in-repo build backend (no network: --no-index, no
build isolation needed since the backend has no requirements), then
VENV/bin/cserve with no flags serves an app that imports a module present
only in that virtualenv. The sdist the backend writes carries what a build
from it needs."""
import os
import subprocess
import sys
import tarfile

import pytest

from conftest import ROOT
from deploy_support import EMBEDDED_PY, clean_env, info, serve_info


def _has_pip():
    return subprocess.run([EMBEDDED_PY, "-m", "pip", "--version"], capture_output=True).returncode == 0 and \
        subprocess.run([EMBEDDED_PY, "-c", "import ensurepip"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _has_pip(), reason="pip/ensurepip missing (scripts/setup.sh test installs python3-venv)")
def test_pip_install_into_a_fresh_venv_serves_its_packages(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([EMBEDDED_PY, "-m", "venv", str(venv)], check=True, env=clean_env())
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-index", "--no-build-isolation",
                        str(ROOT)], capture_output=True, text=True, env=clean_env(PIP_DISABLE_PIP_VERSION_CHECK="1"),
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    cserve = venv / "bin" / "cserve"
    assert os.access(cserve, os.X_OK)
    v = "%d.%d" % sys.version_info[:2]
    (venv / "lib" / f"python{v}" / "site-packages" / "only_in_pip_venv.py").write_text("X = 1\n")
    out = subprocess.run([str(cserve), "--version"], capture_output=True, text=True, env=clean_env()).stdout
    assert f"virtualenv {venv}" in out, out
    # no VIRTUAL_ENV, no --virtualenv: the venv it is installed in
    p, addr = serve_info(env=clean_env(), bin_=str(cserve), cwd=str(tmp_path))
    try:
        got = info(p, addr, imports=["only_in_pip_venv"])
        assert got["prefix"] == str(venv)
        assert got["imported"]["only_in_pip_venv"].startswith(str(venv)), got["imported"]
    finally:
        p.stop()


def build_sdist(out_dir):
    r = subprocess.run([EMBEDDED_PY, "-c", "import sys; sys.path.insert(0, 'pip_backend'); import cserve_build as b; "
                        f"print(b.build_sdist({str(out_dir)!r}))"], cwd=str(ROOT), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with tarfile.open(out_dir / r.stdout.strip()) as tf:
        return set(tf.getnames())


def test_sdist_packs_only_tracked_files(tmp_path):
    """A file in the checkout that git does not track (here one that looks
    like a secrets file, not ignored) stays out of the sdist."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an unpacked sdist): no list of tracked files")
    stray = ROOT / f".env.local-{os.getpid()}"
    stray.write_text("SECRET=1\n")
    try:
        names = build_sdist(tmp_path)
    finally:
        stray.unlink()
    assert "cserve_wsgi-0.1.0/pyproject.toml" in names
    assert f"cserve_wsgi-0.1.0/{stray.name}" not in names, "an untracked file was packed"


def test_sdist_carries_the_build(tmp_path):
    r = subprocess.run([EMBEDDED_PY, "-c", "import sys; sys.path.insert(0, 'pip_backend'); import cserve_build as b; "
                        f"print(b.build_sdist({str(tmp_path)!r}))"], cwd=str(ROOT), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with tarfile.open(tmp_path / r.stdout.strip()) as tf:
        names = set(tf.getnames())
    base = "cserve_wsgi-0.1.0/"
    for need in ("pyproject.toml", "pip_backend/cserve_build.py", "Makefile", "core/server/main.c", "core/python/interp.c",
                 "handoffs/handoffs.mk", "tests/parser.mk", "apps/hello.py", "PKG-INFO"):
        assert base + need in names, need
    assert not any(n.startswith(base + "build/") or n == base + "cserve" for n in names)
