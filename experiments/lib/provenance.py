"""What every run record carries so a number can be traced: the commit (full
runs refuse a dirty tree), versions of every server, library and client, the
compiler and flags, the allocator, the CPU and kernel — and, per run, the
foreign CPU and steal time during the measured window (/proc/stat deltas
minus the CPU the server and the client used themselves)."""
import os
import platform
import re
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = "/usr/bin/python3"


def _out(cmd, timeout=15):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return (p.stdout + p.stderr).strip()
    except (OSError, subprocess.TimeoutExpired):
        return None


def git_commit(root=ROOT):
    """(full sha, dirty?) of the checkout that holds root (the harness's own
    by default); ("unknown", True) where git cannot say. Untracked files
    count: a new source file changes the build. Recorded results
    (experiments/results, this very run's among them) do not: they change
    no build."""
    def git(*args):
        return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=15)
    try:
        head = git("rev-parse", "HEAD")
        st = git("status", "--porcelain", "--", ":(top)", ":(top,exclude)experiments/results")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown", True
    if head.returncode or st.returncode:
        return "unknown", True
    return head.stdout.strip(), bool(st.stdout.strip())


def short_commit(root=ROOT):
    """git_commit(root) as a record's stamp: the short sha, with -dirty."""
    sha, dirty = git_commit(root)
    return sha[:7] + ("-dirty" if dirty else "")


def _pyver(mod):
    return _out([PY, "-c", f"import importlib.metadata as m; print(m.version({mod!r}))"])


def _first_line(s):
    return (s or "").splitlines()[0][:120] if s else None


def cpu_info():
    model, flags = "", ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name") and not model:
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = line.split(":", 1)[1].strip()
    except OSError:
        pass
    hyp = "hypervisor" in flags.split()
    return {"model": model, "nproc": os.cpu_count(), "hypervisor": hyp, "flags": flags}


def build_info(binary):
    """Compiler, flags and allocator of the cserve binary, from the Makefile's
    own variables (make -pn) and from what the binary links."""
    info = {"cc": _first_line(_out(["cc", "--version"]))}
    db = _out(["make", "-C", ROOT, "-pn", "all"], timeout=30) or ""
    for var in ("CFLAGS", "ALLOC", "OPT", "INSTRUMENTS", "LDLIBS"):
        m = re.search(rf"^{var} :?= (.*)$", db, re.M)
        if m:
            info[var.lower()] = m.group(1).strip()
    ldd = _out(["ldd", binary]) or ""
    info["allocator"] = "jemalloc" if "jemalloc" in ldd else "glibc malloc"
    info["libpython"] = next((ln.split()[0] for ln in ldd.splitlines() if "libpython" in ln), None)
    return info


def oha_path():
    p = shutil.which("oha")
    if p:
        return p
    p = os.path.expanduser("~/.cargo/bin/oha")
    return p if os.access(p, os.X_OK) else None


def versions(binary):
    v = {"cserve": _out([binary, "--version"]),
         "cpython": _out([PY, "-c", "import sys; print(sys.version.split()[0])"]),
         "granian": _pyver("granian"), "gunicorn": _pyver("gunicorn"),
         "flask": _pyver("flask"), "django": _pyver("django"),
         "uwsgi": _out(["uwsgi", "--version"]),
         "wrk": (_first_line(_out(["wrk", "-v"])) or "").split(" Copyright")[0] or None,
         "hyperfine": _out(["hyperfine", "--version"]),
         "perf": _out(["perf", "--version"])}
    oha = oha_path()
    v["oha"] = _out([oha, "--version"]) if oha else None
    for k, s in list(v.items()):
        if s and ("No module" in s or "PackageNotFound" in s or "Traceback" in s):
            v[k] = None
    return v


def machine(binary):
    c = cpu_info()
    return {"host": platform.node(), "kernel": platform.release(), "cpu_model": c["model"],
            "nproc": c["nproc"], "hypervisor": c["hypervisor"], "cpu_flags": c["flags"],
            "build": build_info(binary), "versions": versions(binary)}


# ------------------------------------------------------------ the window's CPU

def proc_stat():
    """Aggregate CPU times (seconds) from /proc/stat: busy (user+nice+system+irq+
    softirq; guest time is already inside user), idle (idle+iowait), steal."""
    tck = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    v += [0] * (10 - len(v))
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    return {"busy": (user + nice + system + irq + softirq) / tck,
            "idle": (idle + iowait) / tck, "steal": steal / tck}


def window_cpu(before, after, seconds, own_cpu_s):
    """CPU of the whole machine during the window, in cores (1.0 = one vCPU busy
    all window): total busy, steal, and foreign = busy - what the server and the
    client used (own_cpu_s, from their threads' /proc stat deltas)."""
    if not seconds:
        return None
    busy = (after["busy"] - before["busy"]) / seconds
    steal = (after["steal"] - before["steal"]) / seconds
    own = own_cpu_s / seconds
    return {"busy_cores": round(busy, 3), "steal_cores": round(steal, 3), "own_cores": round(own, 3),
            # tick quantisation makes small negative values possible: clamp.
            "foreign_cores": round(max(0.0, busy - own), 3)}
