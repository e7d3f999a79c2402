#!/bin/bash
# Runs inside the Soft-RoCE VM (tools/bench-rdma.sh boots it): the same
# workloads between hosts A and B over plain TCP, under librsockx, under
# rdma-core's librspreload, and the raw-verbs ceiling (perftest), in
# alternating rounds so that drift affects all alike.  Prints one line per
# measurement: "MODE METRIC VALUE", then nothing else on stdout.
set -u
. "$abs_top_srcdir/tests/lib.sh" >/dev/null
. "$abs_top_srcdir/tests/vm/lib.sh"
ulimit -l unlimited
STREAM=$abs_top_builddir/tests/stream/rsx-stream
rounds=${BENCH_ROUNDS:-3}
pp=${BENCH_PINGPONG:-2000}
bytes=${BENCH_BYTES:-100000000}
printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"

# run_mode MODE ARGS...: one server on B, one client bound to A
run_mode() {
	local mode=$1 port pre srvenv clienv
	shift
	port=$(vm_port)
	case $mode in
	tcp) pre= ;;
	rsockx) pre=$RSOCKX_PRELOAD ;;
	rspreload) pre=$RSPRELOAD ;;
	esac
	rm -f "$tmpdir/srv"
	env ${pre:+LD_PRELOAD=$pre} RSOCKX_CONF= timeout 120 \
		"$STREAM" server -l "$HOST_B" -p "$port" "$@" >"$tmpdir/srv" 2>&1 &
	# librspreload's listener is an rsocket, invisible in /proc/net/tcp:
	# wait for the server's own word
	for i in $(seq 200); do
		grep -q listening "$tmpdir/srv" 2>/dev/null && break
		sleep 0.05
	done
	grep -q listening "$tmpdir/srv" || { echo "$mode: no server" >&2; return 1; }
	env ${pre:+LD_PRELOAD=$pre} RSOCKX_CONF="$tmpdir/rdma.conf" timeout 120 \
		"$STREAM" client -c "$HOST_B" -b "$HOST_A" -p "$port" "$@" 2>&1
	wait
}

for r in $(seq "$rounds"); do
	for mode in tcp rsockx rspreload; do
		out=$(run_mode $mode -P "$pp")
		v=$(sed -n 's/.*p50_us=\([0-9.]*\).*/\1/p' <<<"$out")
		echo "$mode pingpong64_p50_us ${v:-fail}"
		v=$(sed -n 's/.*p99_us=\([0-9.]*\).*/\1/p' <<<"$out")
		echo "$mode pingpong64_p99_us ${v:-fail}"
		out=$(run_mode $mode -T "$bytes")
		v=$(sed -n 's/.*MBps=\([0-9.]*\).*/\1/p' <<<"$out")
		echo "$mode stream1M_MBps ${v:-fail}"
	done
	# the raw-verbs ceiling of the same rxe pair
	ib_write_lat -d rxe1 -x 1 -s 64 -n "$pp" >/dev/null 2>&1 &
	sleep 1
	v=$(ib_write_lat -d rxe0 -x 1 -s 64 -n "$pp" "$HOST_B" 2>/dev/null |
		awk '$1 == 64 { print $5 }')
	wait
	echo "verbs pingpong64_p50_us ${v:-fail}"
	ib_write_bw -d rxe1 -x 1 -s 1048576 -n 200 >/dev/null 2>&1 &
	sleep 1
	v=$(ib_write_bw -d rxe0 -x 1 -s 1048576 -n 200 "$HOST_B" 2>/dev/null |
		awk '$1 == 1048576 { print $4 }')
	wait
	echo "verbs stream1M_MBps ${v:-fail}"
done
