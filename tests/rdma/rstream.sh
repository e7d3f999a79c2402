#!/bin/bash
# rdma-core's rstream (native rsockets, no preload) A -> B.  No counter
# assertions, so it runs in the parallel phase.
# vm-timeout: 120
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
plan 2

# rstream_pair LABEL ARGS...: server bound to B, client bound to A.
rstream_pair() {
	local label=$1 port rc=0
	shift
	port=$(vm_port)
	rstream -b "$HOST_B" -p "$port" "$@" >"$tmpdir/$label.server" 2>&1 &
	local spid=$!
	wait_cm_listen "$port"
	rstream -s "$HOST_B" -b "$HOST_A" -p "$port" "$@" >"$tmpdir/$label.client" 2>&1 || rc=1
	reap $spid || rc=1
	sed "s/^/  $label: /" "$tmpdir/$label.client"
	return $rc
}
check "rstream A -> B, 64 KiB x 100" rstream_pair bw -S 65536 -C 100
check "rstream A -> B, ping-pong 64 B x 500" rstream_pair lat -S 64 -C 500
