"""The wheel is the deploy path: built once with `pip wheel .` where the
compiler is, it installs into a fresh virtualenv with no compiler, make or
C headers on PATH (no build happens), and VENV/bin/cserve serves with that
virtualenv's packages and no flags. The distribution is cserve-wsgi (the
`cserve` on the public index is another project) and its platform tag the
plain linux one; the command stays cserve."""
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import HOOK_VARIABLES, ROOT
from deploy_support import EMBEDDED_PY, clean_env, info, serve_info

TOOLCHAIN = ("cc", "gcc", "clang", "make", "ld", "x86_64-linux-gnu-gcc", "python3-config")


def _has_pip():
    return subprocess.run([EMBEDDED_PY, "-m", "pip", "--version"], capture_output=True).returncode == 0 and \
        subprocess.run([EMBEDDED_PY, "-c", "import ensurepip"], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not _has_pip(), reason="pip/ensurepip missing (scripts/setup.sh installs python3-venv)")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """One wheel for the module, built as docs/deploying.md says."""
    out = tmp_path_factory.mktemp("wheelhouse")
    r = subprocess.run([EMBEDDED_PY, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index", "--no-build-isolation",
                        "-w", str(out), str(ROOT)], capture_output=True, text=True,
                       env=clean_env(PIP_DISABLE_PIP_VERSION_CHECK="1"), cwd=str(out))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    wheels = sorted(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_the_wheel_is_named_cserve_wsgi_with_the_plain_linux_tag(wheel):
    cp = "cp%d%d" % sys.version_info[:2]
    assert wheel.name == f"cserve_wsgi-0.1.0-{cp}-{cp}-linux_x86_64.whl", wheel.name


def test_the_wheels_cserve_is_a_release_build_without_the_test_hooks(wheel):
    with zipfile.ZipFile(wheel) as z:
        [name] = [n for n in z.namelist() if n.endswith(".data/scripts/cserve")]
        data = z.read(name)
    assert [v for v in HOOK_VARIABLES if v.encode() in data] == []


def test_the_wheel_installs_and_serves_with_no_compiler_on_path(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([EMBEDDED_PY, "-m", "venv", str(venv)], check=True, env=clean_env())
    path = str(venv / "bin")  # the venv's python and pip, and nothing to build with
    for tool in TOOLCHAIN:
        assert shutil.which(tool, path=path) is None, tool
    env = clean_env(PATH=path, PIP_DISABLE_PIP_VERSION_CHECK="1")
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-index", str(wheel)],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r = subprocess.run([str(venv / "bin" / "python"), "-c",
                        "import importlib.metadata as m; print(m.distribution('cserve-wsgi').metadata['Name'])"],
                       capture_output=True, text=True, env=env)
    assert r.stdout.strip() == "cserve-wsgi", r.stdout + r.stderr
    cserve = venv / "bin" / "cserve"
    assert os.access(cserve, os.X_OK)
    out = subprocess.run([str(cserve), "--version"], capture_output=True, text=True, env=env).stdout
    assert f"virtualenv {venv}" in out, out
    v = "%d.%d" % sys.version_info[:2]
    (venv / "lib" / f"python{v}" / "site-packages" / "only_in_wheel_venv.py").write_text("X = 1\n")
    p, addr = serve_info(env=env, bin_=str(cserve), cwd=str(tmp_path))
    try:
        got = info(p, addr, imports=["only_in_wheel_venv"])
        assert got["prefix"] == str(venv)
        assert got["imported"]["only_in_wheel_venv"].startswith(str(venv)), got["imported"]
    finally:
        p.stop()
