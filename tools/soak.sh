#!/bin/bash
# The long soak of issue 7: tests/rdma/load.sh in the Soft-RoCE VM with a
# soak of SECONDS (default 600) instead of the suite's 60, and a small hold
# part.  Run from the build tree:
#
#   tools/soak.sh [SECONDS [CONCURRENT]]
#
# Prints the test's TAP output; exit status 0 when every check passed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
secs=${1:-600}
export RSOCKX_LOAD_SOAK=$secs RSOCKX_LOAD_CONC=${2:-16}
export RSOCKX_LOAD_N=${RSOCKX_LOAD_N:-50}
exec "$here/../tests/vm/run.sh" --timeout $((secs + 600)) "$here/../tests/rdma/load.sh"
