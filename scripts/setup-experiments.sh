#!/bin/sh
# What the experiments need beyond `make deps` (scripts/setup.sh), only when
# missing. Not part of `make test`: the quick run skips what is absent here.
#
#   oha      open-loop HTTP load with coordinated-omission correction
#            (a Rust crate: `cargo install oha --locked`, ~7 min to build)
#   pandoc + weasyprint   `make paper` -> paper/paper.pdf (Markdown -> HTML -> PDF)
#
# Idempotent; runs as root or with sudo -n, without a TTY.
set -eu
export DEBIAN_FRONTEND=noninteractive
"$(dirname "$0")/apt-install-missing.sh" setup-experiments pandoc weasyprint

if command -v oha >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/oha" ]; then
    echo "setup-experiments: oha present"
elif command -v cargo >/dev/null 2>&1; then
    echo "setup-experiments: cargo install oha --locked (several minutes)"
    # --locked: the crate's own lock file; newer dependency releases may need a newer rustc.
    cargo install oha --locked
else
    echo "setup-experiments: WARNING: no cargo; open-loop runs are skipped (install rustup, then re-run)" >&2
fi
