#!/bin/sh
# apt-install-missing.sh LABEL PACKAGE... — install the Debian packages that
# are not installed yet, and only those (used by setup.sh's tiers and
# build-freethreaded-python.sh). `apt-get update` runs only if something is
# missing.
# Runs as root, or with sudo -n where it exists; no TTY needed.
set -eu
label=$1
shift
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi

missing=""
for p in "$@"; do
    # "install ok installed" is the only state that means the files are there.
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
if [ -n "$missing" ]; then
    echo "$label: installing:$missing"
    $SUDO apt-get update -q
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -q --no-install-recommends $missing
else
    echo "$label: Debian packages present"
fi
