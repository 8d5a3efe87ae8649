#!/bin/sh
# build-freethreaded-python.sh [PREFIX] — build and install a free-threaded
# CPython 3.13 ("3.13t", PEP 703) under PREFIX (default /opt/cserve-py313t),
# for `make BUILD=build-ft PYTHON=PREFIX/bin/python3.13t build-ft/cserve`.
#
# Debian 12 ships no free-threaded interpreter, so the source comes from
# Debian trixie's python3.13 source package (the upstream tarball inside it,
# without Debian's layout patches, so that PREFIX is a plain upstream
# install). apt runs with a private sources list, lists directory and cache
# under a temporary directory: the machine's apt configuration and state are
# not touched.
#
# Idempotent: does nothing when PREFIX/bin/python3.13t already runs and is
# a free-threaded build. Exit status 3 means the source could not be
# obtained (no mirror, no network, no trixie); callers such as the CI use
# it to tell "cannot build here" from a failed build.
#
# Environment: CSERVE_DEBIAN_MIRROR overrides the mirror (default: the
# first Debian mirror in the machine's own apt sources); JOBS overrides
# make's -j (default: nproc).
set -eu

PREFIX=${1:-/opt/cserve-py313t}
PY="$PREFIX/bin/python3.13t"
here=$(cd "$(dirname "$0")/.." && pwd)

is_ft() {
    [ -x "$PY" ] && "$PY" -c 'import sys, sysconfig
sys.exit(0 if sysconfig.get_config_var("Py_GIL_DISABLED") else 1)' 2>/dev/null
}

if is_ft; then
    echo "build-freethreaded-python: $PY already works ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"
    echo "$PY"
    exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi

# Build dependencies of the stdlib's C modules (ssl, zlib, ctypes, bz2,
# lzma, sqlite3, readline, uuid, dbm.gnu). Missing ones only disable a
# module, so a failure to install them is not fatal.
"$here/scripts/apt-install-missing.sh" build-freethreaded-python \
    build-essential pkg-config dpkg-dev xz-utils libssl-dev zlib1g-dev \
    libffi-dev libbz2-dev liblzma-dev libsqlite3-dev libreadline-dev \
    uuid-dev libgdbm-dev ||
    echo "build-freethreaded-python: warning: could not install every build dependency; some stdlib modules may be missing" >&2

mirror=${CSERVE_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
    # The first non-security Debian URI of the machine's own sources
    # (deb822 "URIs:" lines or one-line "deb URI suite ..." entries).
    mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
        sed -n 's/^URIs:[[:space:]]*//p' | tr ' ' '\n' |
        grep -E '/debian/?$' | head -n 1 || true)
fi
if [ -z "$mirror" ]; then
    mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        sed -n 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]*\).*/\2/p' |
        grep -E '/debian/?$' | head -n 1 || true)
fi
if [ -z "$mirror" ]; then
    echo "build-freethreaded-python: no Debian mirror found in /etc/apt sources (set CSERVE_DEBIAN_MIRROR)" >&2
    exit 3
fi

work=$(mktemp -d /var/tmp/cserve-py313t.XXXXXX)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM # through the EXIT trap: the temporary tree goes too
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/src"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
echo "deb-src [signed-by=$keyring] $mirror trixie main" >"$work/sources.list"
# apt drops privileges to _apt for downloads; let it write the private dirs.
chmod 755 "$work"
chown -R _apt "$work/lists" "$work/src" 2>/dev/null || true
apt_private() {
    $SUDO apt-get -q \
        -o Dir::Etc::SourceList="$work/sources.list" \
        -o Dir::Etc::SourceParts=/dev/null \
        -o Dir::State::Lists="$work/lists" \
        -o Dir::Cache="$work/cache" \
        "$@"
}
if ! apt_private update >"$work/update.log" 2>&1 ||
    ! (cd "$work/src" && apt_private source --download-only python3.13) \
        >"$work/source.log" 2>&1; then
    cat "$work/update.log" "$work/source.log" 2>/dev/null | tail -n 15 >&2
    echo "build-freethreaded-python: could not download python3.13's source package from $mirror (trixie)" >&2
    exit 3
fi
orig=$(ls "$work"/src/python3.13_*.orig.tar.* 2>/dev/null | head -n 1)
if [ -z "$orig" ]; then
    echo "build-freethreaded-python: no upstream tarball in the source package" >&2
    exit 3
fi
echo "build-freethreaded-python: building $(basename "$orig") into $PREFIX"
mkdir "$work/build"
tar -xf "$orig" -C "$work/build" --strip-components=1

cd "$work/build"
# No PGO/LTO: a plain -O3 build takes minutes, not an hour. The rpath lets
# PREFIX/bin/python3.13t find libpython3.13t.so without LD_LIBRARY_PATH.
./configure -q --disable-gil --enable-shared --with-ensurepip=no \
    --prefix="$PREFIX" LDFLAGS="-Wl,-rpath,$PREFIX/lib" >"$work/configure.log" 2>&1 ||
    { tail -n 30 "$work/configure.log" >&2; exit 1; }
make -s -j"${JOBS:-$(nproc)}" >"$work/make.log" 2>&1 ||
    { tail -n 40 "$work/make.log" >&2; exit 1; }
grep -A3 'necessary bits to build these optional modules' "$work/make.log" >&2 || true
$SUDO make -s install >"$work/install.log" 2>&1 ||
    { tail -n 30 "$work/install.log" >&2; exit 1; }

if ! is_ft; then
    echo "build-freethreaded-python: $PY was installed but is not a free-threaded build" >&2
    exit 1
fi
echo "build-freethreaded-python: installed $("$PY" -c 'import sys; print(sys.version.split()[0])') free-threaded at $PY"
echo "$PY"
