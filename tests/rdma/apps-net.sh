#!/bin/bash
# Real programs over RDMA (issue 5), network tools: iperf3 (a control
# connection plus one data connection per stream; forward, -R and -P 4),
# nc.openbsd (a file both ways) and sockperf (ping-pong and throughput).
# Server on host B, client on host A (bound to A), both under librsockx
# (the client's rules say rdma); each checks the program's own output, the
# rsockx counters (upgraded on both ends, bytes over RDMA) and the rxe
# counters (both devices moved: the traffic crossed A <-> B over RDMA).
# vm-exclusive: yes
# vm-timeout: 240
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
APPS_MODE=rsockx
. "$abs_top_srcdir/tests/rdma/apps-lib.sh"

# iperf3: 4 MiB; the server's JSON and the client's agree on the bytes.
# Upgraded: the control connection and every data connection.  -w 64K
# (both ends' socket buffers): with the megabytes loopback autotunes them
# to, the sender could hand most of its 4 MiB to TCP before the receiver's
# CUTOVER came (-R, once: 1.6 MB over RDMA).
iperf() {
	local label=$1 conns=$2 s
	shift 2
	s=$(rxe_snap)
	check "$label: transfer completed, byte counts agree" app_iperf "$label" -n 4M -w 64K "$@"
	sed 's/^/# /' "$tmpdir/$label.client" | grep '^# iperf3 '
	# (the first data may cross on TCP before the cut-over)
	app_upgraded "$label" "$conns" 3500000
	rdma_crossed "$label: rxe0 and rxe1 both sent and received" "$s" 100
}
if command -v iperf3 >/dev/null; then
	iperf iperf3 2
	iperf iperf3-R 2 -R
	iperf iperf3-P4 5 -P 4
else
	skip "iperf3 not installed"
fi

# nc.openbsd (poll() on both ends), 6 MB each way.  down: the server
# speaks first; the client's HELLO arrives after the default 5 ms grace in
# this VM (its QP setup is slow), so the server waits up to 2 s for it.
if command -v nc.openbsd >/dev/null; then
	for dir in up down; do
		s=$(rxe_snap)
		[ $dir = down ] && APP_SRV_ENV=RSOCKX_HELLO_GRACE_MS=2000
		# More than the TCP buffers hold.  up: so that the server reads
		# (and answers the HELLO) before nc has sent it all and shut
		# down its side, which would keep TCP (librsockx(7), BUGS).
		# down: so that some of it must wait for the client's CUTOVER;
		# 2 MB all went over TCP once, in a slow run, before the
		# client's nc had read the ACK.
		n=6000000
		check "nc-$dir: $n-byte file arrived intact" app_nc nc-$dir $dir $n
		APP_SRV_ENV=
		# nc writes at once: what it sent before the server's ACK came
		# went over TCP (most of it in this slow VM), the rest over RDMA
		app_upgraded nc-$dir 1 100000
		rdma_crossed "nc-$dir: rxe0 and rxe1 both sent and received" "$s" 10
	done
else
	skip "nc.openbsd not installed"
fi

# sockperf over TCP: the client (bound to A) prints a summary that parses
if command -v sockperf >/dev/null; then
	for what in pp tp; do
		s=$(rxe_snap)
		check "sockperf-$what: 2 s run, summary parsed" app_sockperf sockperf-$what $what 2
		diag "sockperf $what: $(cat "$tmpdir/sockperf-$what.metric") $([ $what = pp ] && echo usec || echo MBps)"
		app_upgraded sockperf-$what 1 1000
		rdma_crossed "sockperf-$what: rxe0 and rxe1 both sent and received" "$s" 100
	done
else
	skip "sockperf not installed"
fi
done_testing
