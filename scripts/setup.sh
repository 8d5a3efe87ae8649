#!/bin/sh
# setup.sh [TIER...] — install what a tier needs, only what is missing.
#
#   run          build and serve (make run, make)
#   test         run's, and what the tests use (make test and the other test-* targets)
#   paper        what builds the PDF (make paper)
#   experiments  run's and paper's, and the research toolchain (make experiments,
#                make bench, make profile, make micro)
#   (none)       every tier (make deps)
#
# Each package below says what uses it. Idempotent and fast when everything
# is present: `dpkg-query` checks each package and `apt-get update` runs only
# if one is missing (apt-install-missing.sh); a pip package or a cargo crate
# is installed only if its import or command is missing. Runs as root with no
# TTY, or with sudo -n where it exists.
#
# Where a tool that only some tests or experiments use cannot be installed
# (chromium, promtool, granian, oha), this prints a warning and goes on: those tests
# and experiment steps skip, saying what they lack.
set -eu

here=$(dirname "$0")
PY=${PYTHON:-/usr/bin/python3}
export DEBIAN_FRONTEND=noninteractive
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1

# run: a C compiler and make (build-essential); pkg-config, which gives the
# Makefile python3-embed's flags; CPython's headers and libpython, static and
# shared, with the zlib and expat the static one needs (python3-dev); the
# allocator (libjemalloc-dev; without it the build links libc's malloc).
RUN_PKGS="build-essential pkg-config python3-dev libjemalloc-dev"

# test: pytest and pytest-xdist (make integration-test spreads the modules
# over TEST_JOBS processes); clang and its libFuzzer runtime (make
# fuzz-short); spin (the ring's Promela model: make handoff-test, test-long);
# wrk (test_reload's and test_nginx's load, experiments/tests/test_placement,
# make experiments-quick); matplotlib (experiments-quick's figures); Flask and
# Django (test_flask, test_proxy_headers, test_deploy_python); venv and pip
# (test_deploy_pip and the virtualenv tests); nginx-light (test_nginx: the
# tests run their own nginx with a private prefix, and never touch the
# service a Debian nginx package may start on install). Also
# prometheus_client, below.
TEST_PKGS="clang libclang-rt-14-dev spin wrk python3-pytest python3-pytest-xdist python3-matplotlib
python3-flask python3-django python3-venv python3-pip nginx-light"

# paper: experiments/paper.py renders paper/paper.out.md to HTML (pandoc)
# and the HTML to paper/paper.pdf (weasyprint). Its figures are PNGs the
# experiments' report already drew.
PAPER_PKGS="pandoc weasyprint"

# experiments: wrk (every closed-loop run's client); hyperfine (startup,
# lifecycle); perf (profiles, timeline, sampler_trap, seed, make profile);
# strace (strace_per_request); matplotlib (figures); Flask, Django, gunicorn
# and uWSGI (the apps and the peers: run, production, bench); Google
# Benchmark (make micro); pip, for granian below. Also granian (PyPI only)
# and oha (a Rust crate, ~7 min to build: openloop).
EXPERIMENTS_PKGS="wrk hyperfine linux-perf strace python3-matplotlib python3-flask python3-django
gunicorn uwsgi uwsgi-plugin-python3 libbenchmark-dev python3-pip"

# Each tier once, whichever tiers ask for it.
done_tiers=""
tier() {
    case " $done_tiers " in *" $1 "*) return 0 ;; esac
    done_tiers="$done_tiers $1"
    "tier_$1"
}

apt_missing() {
    # shellcheck disable=SC2086
    "$here/apt-install-missing.sh" "setup $1" $2
}

tier_run() {
    apt_missing run "$RUN_PKGS"
}

tier_test() {
    tier run
    apt_missing test "$TEST_PKGS"
    # prometheus_client, whose parser test_metrics reads /metrics with: from
    # Debian, unless the interpreter already imports one (pip's, say).
    if "$PY" -c "import prometheus_client.parser" >/dev/null 2>&1; then
        echo "setup test: prometheus_client present"
    else
        apt_missing test python3-prometheus-client
    fi
    # chromium, headless, for the dashboard test; a large package that some
    # machines cannot take: test_metrics then skips that test.
    if command -v chromium >/dev/null 2>&1; then
        echo "setup test: chromium present"
    elif ! "$here/apt-install-missing.sh" "setup test" chromium; then
        echo "setup test: WARNING: chromium could not be installed; test_metrics skips the dashboard test" >&2
    fi
    # promtool, which lints /metrics in test_metrics: Debian ships it only in
    # the prometheus package (about 100 MB installed; where systemd runs, its
    # service is enabled, as nginx's is).
    if command -v promtool >/dev/null 2>&1; then
        echo "setup test: promtool present"
    elif ! "$here/apt-install-missing.sh" "setup test" prometheus; then
        echo "setup test: WARNING: prometheus (promtool) could not be installed; test_metrics skips its promtool check" >&2
    fi
}

tier_paper() {
    apt_missing paper "$PAPER_PKGS"
}

tier_experiments() {
    tier run
    tier paper
    apt_missing experiments "$EXPERIMENTS_PKGS"
    # granian, a peer of the experiments, for the interpreter cserve embeds;
    # PyPI only, hence pip into the system interpreter.
    if "$PY" -c "import granian" >/dev/null 2>&1; then
        echo "setup experiments: granian present ($("$PY" -c 'import granian; print(granian.__version__)' 2>/dev/null || echo '?'))"
    elif ! "$PY" -m pip install -q --break-system-packages granian; then
        echo "setup experiments: WARNING: granian could not be installed for $PY; the experiments skip its rows" >&2
    fi
    # oha, open-loop load with coordinated-omission correction (openloop).
    if command -v oha >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/oha" ]; then
        echo "setup experiments: oha present"
    elif command -v cargo >/dev/null 2>&1; then
        echo "setup experiments: cargo install oha --locked (several minutes)"
        # --locked: the crate's own lock file; newer dependency releases may need a newer rustc.
        cargo install oha --locked
    else
        echo "setup experiments: WARNING: no cargo; the open-loop runs are skipped (install rustup, then re-run)" >&2
    fi
}

[ $# -gt 0 ] || set -- run test paper experiments
for t in "$@"; do
    case $t in
    run | test | paper | experiments) ;;
    *)
        echo "usage: scripts/setup.sh [run|test|paper|experiments]... (none: every tier)" >&2
        exit 2
        ;;
    esac
done
for t in "$@"; do tier "$t"; done
