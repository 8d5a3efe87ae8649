#!/bin/sh
# Install what the build, the tests and the experiments need, only when missing.
# python3-venv and python3-pip: the virtualenv and `pip install .` tests;
# python3-pytest-xdist: make integration-test spreads the modules over
# several processes (TEST_JOBS); nginx-light: the reverse-proxy test
# (tests/integration/test_nginx.py). A Debian nginx package may start its
# own service on install; the tests run their own nginx with a private
# prefix and never touch that one.
#
# Idempotent and fast when everything is present: `dpkg -s` checks each
# package, and `apt-get update` runs only if something has to be installed.
# Runs as root with no TTY (DEBIAN_FRONTEND=noninteractive); uses sudo only if
# not root and sudo exists. granian (a peer for the experiments, PyPI only) is
# installed for /usr/bin/python3 — the interpreter cserve embeds — and a
# failure there is a warning, not an error: only experiments/ needs it. The
# same for prometheus_client (its parser reads /metrics in
# tests/integration/test_metrics.py), prometheus (for promtool, which lints
# /metrics there; Debian ships promtool only in that package, about 100 MB
# installed; its service is enabled, where systemd runs, like nginx's) and
# chromium (the dashboard test loads the page headless): where they cannot
# be installed those tests skip.
set -eu

PY=${PYTHON:-/usr/bin/python3}
export DEBIAN_FRONTEND=noninteractive
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1

PKGS="build-essential pkg-config python3-dev libjemalloc-dev libbenchmark-dev
clang libclang-rt-14-dev spin wrk hyperfine python3-pytest python3-pytest-xdist python3-flask
python3-django python3-matplotlib gunicorn uwsgi uwsgi-plugin-python3
linux-perf strace python3-venv python3-pip nginx-light"

# shellcheck disable=SC2086
"$(dirname "$0")/apt-install-missing.sh" setup $PKGS

SUDO="" # for pip's Debian package below
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi

# granian, for the peer rows of the experiments.
if "$PY" -c "import granian" >/dev/null 2>&1; then
    echo "setup: granian present ($("$PY" -c 'import granian; print(granian.__version__)' 2>/dev/null || echo '?'))"
else
    echo "setup: installing granian for $PY (pip)"
    if ! "$PY" -m pip --version >/dev/null 2>&1; then
        # pip for the system interpreter comes from Debian.
        if ! dpkg-query -W -f='${Status}' python3-pip 2>/dev/null | grep -q "install ok installed"; then
            $SUDO apt-get install -y -q --no-install-recommends python3-pip || true
        fi
    fi
    if ! "$PY" -m pip install -q --break-system-packages granian; then
        echo "setup: WARNING: granian could not be installed; the experiments skip its peer rows" >&2
    fi
fi

# prometheus_client, whose own text parser checks /metrics.
if "$PY" -c "import prometheus_client" >/dev/null 2>&1; then
    echo "setup: prometheus_client present"
elif ! "$PY" -m pip install -q --break-system-packages prometheus_client; then
    echo "setup: WARNING: prometheus_client could not be installed; test_metrics skips its /metrics checks" >&2
fi

# chromium, headless, for the dashboard test.
if command -v chromium >/dev/null 2>&1; then
    echo "setup: chromium present"
elif ! "$(dirname "$0")/apt-install-missing.sh" setup chromium; then
    echo "setup: WARNING: chromium could not be installed; test_metrics skips the dashboard test" >&2
fi

# promtool (Debian's prometheus package), for `promtool check metrics`.
if command -v promtool >/dev/null 2>&1; then
    echo "setup: promtool present"
elif ! "$(dirname "$0")/apt-install-missing.sh" setup prometheus; then
    echo "setup: WARNING: prometheus (promtool) could not be installed; test_metrics skips its promtool check" >&2
fi
