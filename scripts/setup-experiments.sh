#!/bin/sh
# The experiments' tier of scripts/setup.sh (the research toolchain, the
# paper's tools, oha), under the name the experiments' messages give.
exec "$(dirname "$0")/setup.sh" experiments
