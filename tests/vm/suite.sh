#!/bin/bash
# The RDMA suite, run inside the test VM (by tests/vm/rdma.test through
# run.sh).  Prints TAP: one line per test script of tests/rdma/, its whole
# output as "#" comments below it.
#
#   suite.sh [PATTERN...]     (default: $RSOCKX_VM_TESTS, else all)
#
# PATTERN: shell globs matched against the test name without ".sh"
# (e.g. 'preload*' 'loopback').  The self-checks always run.  Files named
# *lib.sh are helpers that tests source, not tests.
# Phases, so that rxe counter assertions can be trusted:
#   1. tests/rdma/selfcheck*.sh, one at a time.  If any fails, "Bail out!":
#      a broken test bed must never look like a broken (or working) rsockx.
#   2. tests marked "# vm-exclusive: yes", one at a time (nothing else runs,
#      so the rxe counters move only because of that test).
#   3. all others in parallel, $RSOCKX_VM_JOBS at once (default 3).
# A test marked "# vm-default: no" runs only when a PATTERN is its very
# name (a benchmark's smoke test, too slow under emulation for every run).
# Each test has a timeout: "# vm-timeout: SECONDS" in the test, else
# $RSOCKX_VM_TEST_TIMEOUT (default 120).  Logs: /vmrun/logs/NAME.log, which is
# the run directory on the host (tests/vm/rdma.run/logs).
set -uo pipefail
. "$abs_top_srcdir/tests/vm/lib.sh"

testdir=$abs_top_srcdir/tests/rdma
logdir=/vmrun/logs
mkdir -p "$logdir"
jobs_max=${RSOCKX_VM_JOBS:-3}
default_timeout=${RSOCKX_VM_TEST_TIMEOUT:-120}
if [ $# -gt 0 ]; then patterns=("$@")
else read -r -a patterns <<<"${RSOCKX_VM_TESTS:-*}"; fi

n=0
failed=0

selected() {
	local p
	for p in "${patterns[@]}"; do
		# shellcheck disable=SC2053 # a glob on purpose
		[[ $1 == $p ]] && return 0
	done
	return 1
}

# named NAME: a pattern is NAME itself, not a glob that happens to match
named() {
	local p
	for p in "${patterns[@]}"; do [ "$p" = "$1" ] && return 0; done
	return 1
}

header() { sed -n "s/^# $2: *\\([^ ]*\\).*/\\1/p" "$1" | head -n1; }

# start NAME: run one test in the background; its pid goes to pids[NAME].
declare -A pids names
start() {
	local name=$1 file=$testdir/$1.sh t
	t=$(header "$file" vm-timeout)
	t=${t:-$default_timeout}
	echo "$t" >"$logdir/$name.timeout"
	rxe_snap >"$logdir/$name.rxe"
	rxe_all >"$logdir/$name.rxeall"
	(
		cd /tmp
		# Own process group, so that timeout kills everything it started.
		exec timeout -k 5 "$t" /usr/bin/bash "$file"
	) >"$logdir/$name.log" 2>&1 </dev/null &
	pids[$name]=$!
	names[$!]=$name
	started=$(date +%s.%N)
	echo "$started" >"$logdir/$name.start"
}

# verdict NAME RC [alone]: judge the test by its exit status and its TAP output;
# print the result line and the log.
verdict() {
	local name=$1 rc=$2 log=$logdir/$1.log t s e
	t=$(cat "$logdir/$name.timeout")
	s=$(cat "$logdir/$name.start")
	e=$(date +%s.%N)
	local secs
	secs=$(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.1f", e - s }')
	# rxe packets during the test (rxe0 sent/rcvd, rxe1 sent/rcvd); exact
	# only for tests that ran alone.
	local rxe
	rxe=$(rxe_delta "$(<"$logdir/$name.rxe")")
	rxe="rxe ${rxe// //}"
	[ "${3:-}" = alone ] || rxe="$rxe, shared"
	local why
	why=$(awk -v rc="$rc" -v t="$t" '
		/^1\.\.0 *# *[Ss][Kk][Ii][Pp]/ { skip = $0; sub(/^1\.\.0 *# *[Ss][Kk][Ii][Pp] */, "", skip); skipped = 1 }
		/^1\.\.[0-9]+/ { plan = substr($1, 4) + 0; planned = 1 }
		/^ok / { ok++ }
		/^not ok / { if ($0 ~ /# *TODO/) ok++; else notok++ }
		/^Bail out!/ { bail = 1 }
		END {
			if (rc == 124 || rc == 137) { print "fail: timed out after " t " s (killed)"; exit }
			if (bail) { print "fail: bailed out"; exit }
			if (skipped && rc == 0) { print "skip: " skip; exit }
			if (rc != 0) { print "fail: exit status " rc; exit }
			if (!planned) { print "fail: no TAP plan"; exit }
			if (notok) { print "fail: " notok " of " ok + notok " failed"; exit }
			if (ok != plan) { print "fail: planned " plan ", ran " ok; exit }
			print "pass: " ok " checks"
		}' "$log")
	n=$((n + 1))
	case $why in
	pass:*) echo "ok $n - $name (${why#pass: }, ${secs}s, $rxe)" ;;
	skip:*) echo "ok $n - $name # SKIP ${why#skip: }" ;;
	*) echo "not ok $n - $name (${why#fail: }, ${secs}s, $rxe)"; failed=$((failed + 1))
		echo "# $name: other rxe counters that moved meanwhile:$(rxe_moved "$logdir/$name.rxeall")" ;;
	esac
	sed 's/^/#   /' "$log"
}

run_serial() {
	local name rc
	for name in "$@"; do
		start "$name"
		rc=0
		wait "${pids[$name]}" || rc=$?
		verdict "$name" "$rc" alone
	done
}

run_parallel() {
	local name pid rc
	local -a queue=("$@")
	local running=0
	while [ ${#queue[@]} -gt 0 ] || [ $running -gt 0 ]; do
		while [ ${#queue[@]} -gt 0 ] && [ $running -lt "$jobs_max" ]; do
			start "${queue[0]}"
			queue=("${queue[@]:1}")
			running=$((running + 1))
		done
		rc=0
		wait -n -p pid || rc=$?
		running=$((running - 1))
		verdict "${names[$pid]}" "$rc" "$([ "$jobs_max" = 1 ] && echo alone)"
	done
}

selfchecks=() exclusive=() parallel=() late=()
for f in "$testdir"/*.sh; do
	[ -e "$f" ] || continue
	name=$(basename "$f" .sh)
	case $name in
	*lib) continue ;; # helpers sourced by tests (e.g. stream-lib.sh)
	selfcheck*) selfchecks+=("$name"); continue ;;
	esac
	selected "$name" || continue
	# vm-default: no: only when asked for by its own name
	[ "$(header "$f" vm-default)" != no ] || named "$name" || continue
	if [ "$(header "$f" vm-exclusive)" != yes ]; then parallel+=("$name")
	elif [ "$(header "$f" vm-late)" = yes ]; then late+=("$name")
	else exclusive+=("$name"); fi
done
# vm-late: the exclusive scripts whose numbers suffer from load on the
# host (make check's other tests, the sanitizer build beside the VM) run
# last of them, when that is likely over
exclusive+=("${late[@]}")

echo "# Soft-RoCE VM: kernel $(uname -r), $(nproc) CPUs; A=$HOST_A/$HOST_A6 (rxe0) B=$HOST_B/$HOST_B6 (rxe1)"
echo "# self-checks: ${selfchecks[*]:-none}; exclusive: ${exclusive[*]:-none}; parallel ($jobs_max at once): ${parallel[*]:-none}"
[ ${#selfchecks[@]} -gt 0 ] || { echo "Bail out! no self-check in $testdir"; exit 1; }
run_serial "${selfchecks[@]}"
if [ $failed -gt 0 ]; then
	echo "Bail out! Soft-RoCE test bed self-check failed: rsockx tests not run (see the log above)"
	exit 1
fi
[ ${#exclusive[@]} -eq 0 ] || run_serial "${exclusive[@]}"
[ ${#parallel[@]} -eq 0 ] || run_parallel "${parallel[@]}"
echo "1..$n"
echo "# rsockx-vm-suite: done, $failed failed"
exit 0
