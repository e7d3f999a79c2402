#!/bin/bash
# An upgraded connection between A and B that nobody uses: the server
# waits in epoll_wait, the client in recv() (tests/passthrough/pyapps.py
# idle, as local.test runs it over shared memory).  rsockx's own threads
# (the CM thread, the readiness watcher) must sleep as the program does:
# before, the CM thread woke every 100 ms for as long as the process lived
# (issue 20, item 7).  Default configuration: the probe, then the
# out-of-band upgrade.
# vm-exclusive: no
# vm-timeout: 90
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"

export RSOCKX_PROBE_TIMEOUT_MS=10000
timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_STATS_FILE="$tmpdir/sstats" \
	IDLE_HOST=$HOST_B IDLE_BIND=$HOST_A "$PYTHON" \
	"$abs_top_srcdir/tests/passthrough/pyapps.py" idle 3 "$tmpdir/cstats" \
	>"$tmpdir/out" 2>&1
rc=$?
sed 's/^/  /' "$tmpdir/out" >&2
check "the talk went on after the wait, which nothing woke ($rc: $(head -n 1 "$tmpdir/out"))" \
	grep -qx "idle: epoll events 0, client True, rc 0" "$tmpdir/out"
read -r sw st cw ct <<<"$(sed -n 's/^idle: threads woke: server \([0-9]*\) .*, \([0-9]*\) ticks of CPU), client \([0-9]*\) .*, \([0-9]*\) ticks).*/\1 \2 \3 \4/p' "$tmpdir/out")"
check "rsockx's threads woke at most 3 times in 3 s in each process, and used at most 2 ticks of CPU ($(grep 'threads woke' "$tmpdir/out"))" \
	test "${sw:-9}" -le 3 -a "${st:-9}" -le 2 -a "${cw:-9}" -le 3 -a "${ct:-9}" -le 2
for e in s c; do
	check "$([ $e = s ] && echo server || echo client): upgraded, bytes over RDMA (upgraded $(stat_of $tmpdir/${e}stats upgraded), rdma_rx_bytes $(stat_of $tmpdir/${e}stats rdma_rx_bytes), conn_errors $(stat_of $tmpdir/${e}stats conn_errors))" \
		test "$(stat_of $tmpdir/${e}stats upgraded)" = 1 -a \
		"$(stat_of $tmpdir/${e}stats rdma_rx_bytes)" -ge 100 -a \
		"$(stat_of $tmpdir/${e}stats conn_errors)" = 0
done
done_testing
