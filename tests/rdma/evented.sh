#!/bin/bash
# python's http.server waits with selectors on its listener and reads each
# connection with blocking calls: the connection is upgraded, and urllib
# downloads over RDMA (B to B: urllib cannot bind to A).  Event loops on
# upgraded connections themselves: ready.sh.
# vm-exclusive: yes
# vm-timeout: 180
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"

printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"
head -c 3000000 /dev/urandom >"$tmpdir/in"

# python's http.server (selectors) and a blocking urllib client
mkdir "$tmpdir/www" && cp "$tmpdir/in" "$tmpdir/www/file"
port=$(vm_port)
# --foreground: timeout passes our SIGINT to Python alone; without, it also
# signals its process group, and a second SIGINT during Python's orderly
# exit kills it before the library writes the counters.
(cd "$tmpdir/www" && exec timeout --foreground 60 env LD_PRELOAD="$RSOCKX_PRELOAD" \
	RSOCKX_CONF= RSOCKX_STATS_FILE="$tmpdir/py.s" \
	"$PYTHON" -m http.server -b $HOST_B $port >/dev/null 2>&1) &
spid=$!
wait_listen $port || bail "http.server did not listen"
s=$(rxe_snap)
for i in 1 2; do
	timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF="$tmpdir/rdma.conf" \
		RSOCKX_STATS_FILE="$tmpdir/py.c" "$PYTHON" -c '
import sys, urllib.request
sys.stdout.buffer.write(urllib.request.urlopen(sys.argv[1]).read())' \
		"http://$HOST_B:$port/file" >"$tmpdir/got$i"
	check "http.server: download $i intact" cmp -s "$tmpdir/in" "$tmpdir/got$i"
done
kill -INT $spid 2>/dev/null	# a clean exit writes the server's counters
reap $spid 30
rdma_only_dev "http.server: rxe1 carried it (loopback in one device)" "$s" rxe1
check "http.server: both downloads upgraded on both ends (server $(stat_of $tmpdir/py.s upgraded), client $(stat_of $tmpdir/py.c upgraded))" \
	test "$(stat_of $tmpdir/py.s upgraded)" = 2 -a "$(stat_of $tmpdir/py.c upgraded)" = 2
# Under ASan the server's QP may reach RTS after its first writes of the
# body, which then go over TCP before its CUTOVER (as the protocol allows):
# most of the file, not all of it.
# The server's first writes of a body may go over TCP before the client's
# CUTOVER reaches it (64 KiB each, up to 256 KiB seen in this VM).
min=4500000
check "http.server: the file went over RDMA ($(stat_of $tmpdir/py.c rdma_rx_bytes) bytes, at least $min)" \
	test "$(stat_of $tmpdir/py.c rdma_rx_bytes)" -ge $min
done_testing
