#!/bin/bash
# More of rdma-core's verbs examples between A (rxe0) and B (rxe1): UC, UD and
# SRQ ping-pong.  No counter assertions, so this runs in the parallel phase.
# (perftest's ib_*_lat/bw are not used: under TCG their CPU clock calibration
# fails now and then, "Can't produce a report", exit 1.)
# vm-timeout: 120
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
plan 3

# pp PROG ARGS...: server on B, client on A; both must finish cleanly.
pp() {
	local prog=$1 port rc=0
	shift
	port=$(vm_port)
	"$prog" -d $DEV_B -g $GID_INDEX -p "$port" "$@" >"$tmpdir/$prog.server" 2>&1 &
	local spid=$!
	wait_listen "$port"
	"$prog" -d $DEV_A -g $GID_INDEX -p "$port" "$@" "$HOST_B" >"$tmpdir/$prog.client" 2>&1 || rc=1
	reap $spid || rc=1
	sed "s/^/  $prog: /" "$tmpdir/$prog.client"
	grep -q ' iters in ' "$tmpdir/$prog.client" || rc=1
	return $rc
}
check "ibv_uc_pingpong A -> B" pp ibv_uc_pingpong -n 100
check "ibv_ud_pingpong A -> B" pp ibv_ud_pingpong -n 100 -s 1024
check "ibv_srq_pingpong A -> B (4 QPs)" pp ibv_srq_pingpong -n 100 -q 4
