# Shared helpers for shell tests: TAP output and small utilities.
# Source it: . "$abs_top_srcdir/tests/lib.sh"
# Tests run from make check with RSOCKX_LIB, RSOCKX_PRELOAD, abs_top_srcdir, abs_top_builddir
# and PYTHON exported (tests/local.am).

: "${RSOCKX_LIB:?run through make check, or export RSOCKX_LIB}"
tap_n=0
tap_failed=0

plan() { echo "1..$1"; }
diag() { printf '# %s\n' "$*"; }
ok() { tap_n=$((tap_n + 1)); echo "ok $tap_n - $*"; }
not_ok() { tap_n=$((tap_n + 1)); tap_failed=$((tap_failed + 1)); echo "not ok $tap_n - $*"; }
skip() { tap_n=$((tap_n + 1)); echo "ok $tap_n - # SKIP $*"; }
skip_all() { echo "1..0 # SKIP $*"; exit 0; }
bail() { echo "Bail out! $*"; exit 1; }
# check DESCRIPTION COMMAND...: one test point from a command's exit status
check() {
	local _desc=$1; shift
	if "$@"; then ok "$_desc"; else not_ok "$_desc"; fi
}
done_testing() { echo "1..$tap_n"; exit 0; }

# A free TCP port on loopback (kernel-chosen, so parallel tests do not collide).
free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_port PORT [HOST] [TRIES]: wait until something listens on HOST:PORT
wait_port() {
	local port=$1 host=${2:-127.0.0.1} tries=${3:-100}
	while [ "$tries" -gt 0 ]; do
		if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then return 0; fi
		sleep 0.05
		tries=$((tries - 1))
	done
	return 1
}

# preload CMD...: run CMD under librsockx (the library under test).
# RSOCKX_PRELOAD has the sanitizer runtime in front in ASan builds.
: "${RSOCKX_PRELOAD:=$RSOCKX_LIB}"
preload() { LD_PRELOAD="$RSOCKX_PRELOAD${LD_PRELOAD:+:$LD_PRELOAD}" "$@"; }

tmpdir=$(mktemp -d "${TMPDIR:-/tmp}/rsockx-test.XXXXXX")
# at_exit: one more command for the end (a network namespace to delete)
at_exit=
trap 'rc=$?; kill $(jobs -p) 2>/dev/null; eval "$at_exit"; rm -rf "$tmpdir"; exit $rc' EXIT
