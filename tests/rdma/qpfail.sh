#!/bin/bash
# A queue pair that fails before the peer's CUTOVER, while the peer's data
# still comes over TCP (RSOCKX_TEST_QP_ERR_AFTER=1 breaks the client's QP
# after its first byte over it): the client must not spin on the broken
# QP, and must not read a stream with a hole as if it had ended.  The
# server (under rsockx, its probe answering) sends 4 MB; its bytes after
# its own cut-over are lost with the client's QP.  The client's read
# ends with ECONNRESET (or, should everything have come over TCP, with
# every byte), never with an early EOF; its CPU time stays well under the
# wall time of the read; and the server hears of it too (its send fails).
# vm-exclusive: yes
# vm-timeout: 200
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"

printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"
export RSOCKX_PROBE_TIMEOUT_MS=10000
TOTAL=4000000

for mode in block nonblock; do
	port=$(vm_port)
	timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= \
		RSOCKX_STATS_FILE="$tmpdir/$mode.sstats" "$PYTHON" -c '
import socket, sys
l = socket.create_server((sys.argv[1], int(sys.argv[2])))
c, _ = l.accept()
c.recv(100)
try:
    c.sendall(b"s" * int(sys.argv[3]))
    print("server: all sent")
except OSError as e:
    print("server: send failed: %s" % e.strerror)
c.close()' $HOST_B $port $TOTAL >"$tmpdir/$mode.server" 2>&1 &
	spid=$!
	wait_listen $port || bail "$mode: server did not listen"
	timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" \
		RSOCKX_CONF="$tmpdir/rdma.conf" RSOCKX_TEST_QP_ERR_AFTER=1 \
		RSOCKX_STATS_FILE="$tmpdir/$mode.cstats" "$PYTHON" -c '
import resource, select, socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])),
                             source_address=(sys.argv[3], 0))
s.sendall(b"c" * 10)
t, r0 = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
got, end = len(s.recv(65536)), "eof"    # the answer to the HELLO is in
s.send(b"x")                            # on the ring: the QP breaks
if sys.argv[5] == "nonblock":
    s.setblocking(False)
while True:
    try:
        if sys.argv[5] == "nonblock":
            select.select([s], [], [], 30)
        b = s.recv(65536)
    except BlockingIOError:
        continue
    except OSError as e:
        end = e.strerror
        break
    if not b:
        break
    got += len(b)
r1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
print("client: %d of %s bytes, %s, %.2f s, cpu %.2f s" %
      (got, sys.argv[4], end, time.monotonic() - t, cpu))' \
		$HOST_B $port $HOST_A $TOTAL $mode >"$tmpdir/$mode.client" 2>&1
	rc=$?
	reap $spid 30
	sed "s/^/  $mode: /" "$tmpdir/$mode.server" "$tmpdir/$mode.client" >&2
	line=$(grep '^client:' "$tmpdir/$mode.client")
	check "$mode: the client ended ($rc: $line)" test $rc = 0 -a -n "$line"
	check "$mode: upgraded, and the QP broke (conn_errors $(stat_of $tmpdir/$mode.cstats conn_errors))" \
		test "$(stat_of $tmpdir/$mode.cstats upgraded)" = 1 -a \
		"$(stat_of $tmpdir/$mode.cstats conn_errors)" -ge 1
	check "$mode: every byte, or a reset, never an early end" \
		awk -v t=$TOTAL '/^client:/ { ok = ($2 == t && $6 == "eof,") || $6 == "Connection" } END { exit !ok }' "$tmpdir/$mode.client"
	check "$mode: no spin on the broken QP" \
		awk '/^client:/ { w = $(NF-4); c = $(NF-1); ok = c < 0.5 || c < w / 3 } END { exit !ok }' "$tmpdir/$mode.client"
done
done_testing
