#!/bin/bash
# tools/bench-instr.sh, the callgrind benchmark of the RDMA path, in a quick
# run (a few hundred round trips) of two of its columns, plain TCP and
# "rsockx, no spin" (the other two differ only in their environment, and
# each column costs about 40 s here): it must finish, print per round trip
# instruction counts of both ends, say which path each column took (rsockx
# from both ends' counters), and break rsockx's count down by function.
# The numbers are the benchmark's, checked here only for plausibility:
# rsockx's user-space work per round trip is far above plain TCP's, whose
# stack runs in the kernel.
# Not in the default run (vm-default: no): under emulation, beside the
# suite's other parallel scripts, it outlasted all of them, and CI's VM
# neared its limit; RSOCKX_VM_TESTS=instr or make bench-instr run it.
# vm-default: no
# vm-timeout: 300
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
command -v valgrind >/dev/null || skip_all "valgrind not installed"

start=$SECONDS
rc=0
bash "$abs_top_srcdir/tools/bench-instr.sh" --quick --annotate --columns "tcp nospin" \
	>"$tmpdir/out" 2>&1 || rc=$?
sed 's/^/  /' "$tmpdir/out" >&2
check "bench-instr --quick --annotate, exit 0 (after $((SECONDS - start)) s)" test $rc = 0

# row TITLE: "CLIENT SERVER PATH..." of that column
row() { sed -n "s/^$1  *\([0-9][0-9]*\)  *\([0-9][0-9]*\)  \(.*\)/\1 \2 \3/p" "$tmpdir/out"; }
read -r tc ts tp _ <<<"$(row "plain TCP")"
read -r c s p _ <<<"$(row "rsockx, no spin")"
check "plain TCP: two counts ($(row "plain TCP"))" test "$tp" = tcp
check "rsockx, no spin: two counts, over RDMA ($(row "rsockx, no spin"))" test "$p" = rdma
check "rsockx: more user-space work per round trip than plain TCP ($c, $s > $tc, $ts)" \
	test "${c:-0}" -gt "${tc:-0}" -a "${s:-0}" -gt "${ts:-0}"
check "--annotate: rsockx's own functions in the breakdown" \
	grep -q 'librsockx.so\]$' "$tmpdir/out"
done_testing
