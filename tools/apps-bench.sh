#!/bin/bash
# Real programs over plain TCP, rsockx and rdma-core's librspreload, side by
# side, in the Soft-RoCE test VM (a record, not a pass/fail test):
#
#   cd $builddir && $srcdir/tests/vm/run.sh --timeout 900 $srcdir/tools/apps-bench.sh [MODE...]
#
# MODE: tcp rsockx rspreload (default all three).  Every program pair of
# tests/rdma/apps-lib.sh runs server on B, client on A (bound to A where the
# program can), with the same checks as the VM tests; one line per program
# and mode says whether the output was right, the program's own measure,
# and under rsockx whether both ends upgraded.  Numbers come from qemu's
# software emulation (TCG) on a shared machine: compare them with each
# other, never with hardware.
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
. "$abs_top_srcdir/tests/rdma/apps-lib.sh"
in_vm || { echo "runs only in the test VM (tests/vm/run.sh)" >&2; exit 2; }
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(tcp rsockx rspreload)
SECS=${APPS_BENCH_SECS:-3}
# a program that hangs under librspreload costs this much, not more
APP_CLI_TIME=30 APP_SRV_TIME=60

# one LABEL UNIT CMD...: run one case in the current mode, print its line.
one() {
	local label=$1 unit=$2 res up="" t0 t1 m
	shift 2
	t0=$(date +%s.%N)
	if "$@" 2>"$tmpdir/$label.why"; then res=ok; else res=FAIL; fi
	t1=$(date +%s.%N)
	m=$(head -n1 "$tmpdir/$label.metric" 2>/dev/null)
	if [ "$APPS_MODE" = rsockx ]; then
		up="upgraded s=$(stat_of "$tmpdir/$label.sstats" upgraded)"
		up+=" c=$(stat_of "$tmpdir/$label.cstats" upgraded)"
		up+=" rdma_rx=$(app_rdma_bytes "$label")"
	fi
	printf '%-10s %-22s %-5s %12s %-8s %6.1fs %s\n' "$APPS_MODE" "$label" "$res" \
		"${m:--}" "$unit" "$(echo "$t1 - $t0" | bc)" "$up"
	if [ $res = FAIL ]; then sed 's/^/    | /' "$tmpdir/$label.why" | tail -n 25; fi
}

redis_all() {
	local label=$1
	app_redis_start "$label" || { app_stop KILL; app_fail "$label"; return 1; }
	app_redis_bench "$label" 5000 && app_redis_value "$label" 1000000
	local rc=$?
	app_stop TERM || rc=1
	[ $rc = 0 ] || app_fail "$label"
}

nginx_curl() {
	local label=$1 master=$2
	app_nginx_start "$label" "$master" || { app_stop KILL; app_fail "$label"; return 1; }
	app_curl "$label"
	local rc=$?
	app_stop QUIT || rc=1
	[ $rc = 0 ] || app_fail "$label"
}

nginx_wrk() {
	local label=$1 master=$2
	app_nginx_start "$label" "$master" || { app_stop KILL; app_fail "$label"; return 1; }
	app_wrk "$label" "$SECS"
	local rc=$?
	app_stop QUIT || rc=1
	[ $rc = 0 ] || app_fail "$label"
}

# server speaks first (nc down): give the client's slow QP setup time
APP_SRV_ENV=RSOCKX_HELLO_GRACE_MS=2000

printf '%-10s %-22s %-5s %12s %-8s %7s %s\n' mode program ok measure unit time "rsockx counters"
for APPS_MODE in "${modes[@]}"; do
	one iperf3 Gbit/s app_iperf iperf3 -t "$SECS"
	one iperf3-R Gbit/s app_iperf iperf3-R -t "$SECS" -R
	one iperf3-P4 Gbit/s app_iperf iperf3-P4 -t "$SECS" -P 4
	one iperf3-n4M Gbit/s app_iperf iperf3-n4M -n 4M
	one redis get/s redis_all redis
	one memcached ops/s app_memcached memcached 30
	one nginx-curl MB/s nginx_curl nginx-curl off
	one nginx-curl-master MB/s nginx_curl nginx-curl-master on
	one nginx-wrk req/s nginx_wrk nginx-wrk off
	one nginx-wrk-master req/s nginx_wrk nginx-wrk-master on
	one nc-up - app_nc nc-up up 2000000
	one nc-down - app_nc nc-down down 2000000
	one sockperf-pp usec app_sockperf sockperf-pp pp "$SECS"
	one sockperf-tp MBps app_sockperf sockperf-tp tp "$SECS"
done
