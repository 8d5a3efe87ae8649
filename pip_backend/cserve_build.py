"""A PEP 517 build backend for cserve, with no dependencies beyond the
standard library.

The distribution is cserve-wsgi (a project named cserve on the public index
is someone else's); the command it installs stays `cserve`.

cserve is a C program that embeds CPython, so a wheel of it is a compiled
binary tied to one interpreter: build_wheel runs the project's own Makefile
with PYTHON set to the interpreter pip runs this backend on (a virtualenv's
python, whose base installation the Makefile asks for headers, libpython and
prefix), in a private build directory, and packs the binary as a script:
pip puts it in that environment's bin/. The default app goes to
share/cserve/apps/. A cserve in VENV/bin/ finds VENV/pyvenv.cfg at start-up
and serves with that virtualenv's site-packages without any flag.

config_settings passes make variables through: ALLOC (jemalloc, the default
where its development files exist, or libc), PYTHON_LINK (auto, the default:
the installation's shared libpython where it has one, else its archive;
static; shared),
OPT, INSTRUMENTS, e.g.
    pip install . --config-settings ALLOC=libc
"""
import base64
import hashlib
import io
import os
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import zipfile

NAME = "cserve-wsgi"  # the distribution; the command is cserve
VERSION = "0.1.0"
# File names carry the name normalised (PEP 427, PEP 625): cserve_wsgi-0.1.0.
STEM = f"{NAME.replace('-', '_')}-{VERSION}"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAKE_VARS = ("ALLOC", "OPT", "INSTRUMENTS", "CC", "PYTHON_LINK")
DIST_INFO = f"{STEM}.dist-info"
DATA = f"{STEM}.data"


def _metadata():
    summary = "An instrumented WSGI server in C: one epoll loop thread, Python on pool threads"
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\nSummary: {summary}\n"
            "Requires-Python: >=3.9\n")


def _tag():
    # The binary links this interpreter's libpython and bakes in its prefix,
    # so it runs only where that installation is: the platform stays the
    # plain linux_x86_64, not a manylinux tag (docs/deploying.md says why).
    impl = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    abi = impl + getattr(sys, "abiflags", "")
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{impl}-{abi}-{plat}"


def _wheel_file():
    return (f"Wheel-Version: 1.0\nGenerator: cserve_build\nRoot-Is-Purelib: false\nTag: {_tag()}\n")


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, DIST_INFO)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write(_metadata())
    with open(os.path.join(d, "WHEEL"), "w") as f:
        f.write(_wheel_file())
    return DIST_INFO


def _make(build_dir, config_settings):
    # TEST_HOOKS=0 on the command line: a TEST_HOOKS in pip's environment
    # does not put the test suite's fault hooks into a wheel.
    args = ["make", "-C", ROOT, f"-j{os.cpu_count() or 1}", f"BUILD={build_dir}",
            f"PYTHON={sys.executable}", "TEST_HOOKS=0", f"{build_dir}/cserve"]
    for k, v in (config_settings or {}).items():
        if k in MAKE_VARS:
            args.insert(-1, f"{k}={v}")
        else:
            raise ValueError(f"cserve: unknown config setting {k!r} (known: {', '.join(MAKE_VARS)})")
    print("cserve_build: " + " ".join(args), flush=True)
    # The Makefile's own output says which allocator it links (and why not
    # jemalloc, when its development files are missing).
    subprocess.run(args, check=True, stdout=sys.stderr)
    return os.path.join(build_dir, "cserve")


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}\n"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with tempfile.TemporaryDirectory(prefix="cserve-build-") as tmp:
        binary = _make(os.path.join(tmp, "build"), config_settings)
        files = [(f"{DATA}/scripts/cserve", binary, 0o755)]
        apps = os.path.join(ROOT, "apps")
        for name in sorted(os.listdir(apps)):
            if name.endswith(".py"):
                files.append((f"{DATA}/data/share/cserve/apps/{name}", os.path.join(apps, name), 0o644))
        wheel_name = f"{STEM}-{_tag()}.whl"
        path = os.path.join(wheel_directory, wheel_name)
        record = ""
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            def add(arcname, data, mode):
                nonlocal record
                info = zipfile.ZipInfo(arcname, date_time=time.gmtime()[:6])
                info.external_attr = (0o100000 | mode) << 16  # pip keeps the x bit
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, data)
                record += _record_line(arcname, data)
            for arcname, src, mode in files:
                with open(src, "rb") as f:
                    add(arcname, f.read(), mode)
            add(f"{DIST_INFO}/METADATA", _metadata().encode(), 0o644)
            add(f"{DIST_INFO}/WHEEL", _wheel_file().encode(), 0o644)
            record += f"{DIST_INFO}/RECORD,,\n"
            zf.writestr(f"{DIST_INFO}/RECORD", record)
    return wheel_name


def _sdist_files():
    """The tracked files (`git ls-files`): a file the checkout has but git
    does not track (a .env.local, a scratch note) is never shipped. Outside
    a git checkout (an unpacked sdist), everything but build outputs."""
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached"], check=True,
                             capture_output=True).stdout
        return sorted(p for p in out.decode().split("\0") if p and os.path.isfile(os.path.join(ROOT, p)))
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", "__pycache__", ".pytest_cache"}
        found = []
        for d, dirs, names in os.walk(ROOT):
            rel = os.path.relpath(d, ROOT)
            dirs[:] = [x for x in dirs if x not in skip and not (rel == "." and x.startswith("build"))]
            for n in names:
                p = os.path.normpath(os.path.join(rel, n))
                if p != "cserve" and p != "PKG-INFO" and not n.endswith((".o", ".d")):
                    found.append(p)
        return sorted(found)


def build_sdist(sdist_directory, config_settings=None):
    base = STEM
    path = os.path.join(sdist_directory, base + ".tar.gz")
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tf:
        for rel in _sdist_files():
            tf.add(os.path.join(ROOT, rel), arcname=f"{base}/{rel}", recursive=False)
        pkg_info = _metadata().encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(pkg_info)
        info.mtime = int(time.time())
        info.mode = 0o644
        tf.addfile(info, io.BytesIO(pkg_info))
    return base + ".tar.gz"


