#!/bin/bash
# The inetd pattern: a server accepts, forks, puts the connection on the
# child's stdin and stdout and executes the service (cat, echoing) before
# anybody read from it.  A client whose rules say rdma sends its HELLO at
# once; the service's own rsockx, told by the exec wrapper which
# descriptors it inherits (RSOCKX_INHERIT), takes the HELLO out: the echo
# holds the client's bytes and nothing else, and the connection stays TCP.
# Then an upgraded connection across exec (below), with the peer blocking
# or on epoll, and an exec that fails.
# vm-exclusive: yes
# vm-timeout: 400
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"

printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"
port=$(vm_port)
timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= \
	RSOCKX_STATS_FILE="$tmpdir/server.stats" "$PYTHON" -c '
import os, socket, sys
l = socket.create_server((sys.argv[1], int(sys.argv[2])))
c, _ = l.accept()
if os.fork() == 0:
    os.dup2(c.fileno(), 0)
    os.dup2(c.fileno(), 1)
    os.execv("/bin/cat", ["cat"])
c.close()
os.wait()' $HOST_B $port &
spid=$!
wait_listen $port || bail "server did not listen"
timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF="$tmpdir/rdma.conf" \
	RSOCKX_STATS_FILE="$tmpdir/client.stats" "$PYTHON" -c '
import os, socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])),
                             source_address=(sys.argv[3], 0))
data = os.urandom(200000)
s.sendall(data)
s.shutdown(socket.SHUT_WR)
got = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    got += b
sys.exit(0 if got == data else 1)' $HOST_B $port $HOST_A
check "the service echoed exactly the client's bytes" [ $? -eq 0 ]
reap $spid 20
check "the client offered an upgrade (HELLO)" \
	test "$(stat_of $tmpdir/client.stats hello_sent)" = 1
check "the service took the HELLO out" \
	test "$(stat_of $tmpdir/server.stats hello_received)" = 1
check "nothing upgraded" \
	test "$(stat_of $tmpdir/client.stats upgraded)$(stat_of $tmpdir/server.stats upgraded)" = 00

# An upgraded connection across exec: the client reads the head of a
# 3 MiB stream, sends 300 kB, and executes a new program on the same
# descriptor, which reads the rest and sends 200 kB more.  Its library
# takes the connection back to TCP first: the server reads its ring to
# the client's last byte and TCP after it, and sends again over TCP the
# ring bytes the client had not read.  Both streams must arrive whole.
# "fail": the exec fails and the client goes on itself, over TCP.
"$PYTHON" "$abs_top_srcdir/tests/rdma/exec.py" expect down >"$tmpdir/down"
"$PYTHON" "$abs_top_srcdir/tests/rdma/exec.py" expect up >"$tmpdir/up"
for run in block:exec epoll:exec block:fail; do
	smode=${run%:*} cmode=${run#*:}
	rm -f "$tmpdir"/x.*
	port=$(vm_port)
	timeout 120 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= \
		RSOCKX_HELLO_GRACE_MS=2000 RSOCKX_STATS_FILE="$tmpdir/x.sstats" \
		"$PYTHON" "$abs_top_srcdir/tests/rdma/exec.py" server \
		$HOST_B $port $smode "$tmpdir/x.sout" &
	spid=$!
	wait_listen $port || bail "server did not listen"
	timeout 120 env LD_PRELOAD="$RSOCKX_PRELOAD" \
		RSOCKX_CONF="$tmpdir/rdma.conf" \
		RSOCKX_STATS_FILE="$tmpdir/x.cstats" \
		"$PYTHON" "$abs_top_srcdir/tests/rdma/exec.py" client \
		$HOST_B $port $HOST_A $cmode "$tmpdir/x.cout"
	check "$run: the client ended well" [ $? -eq 0 ]
	reap $spid 60
	check "$run: the client got the server's 3 MiB exactly" \
		cmp -s "$tmpdir/down" "$tmpdir/x.cout"
	check "$run: the server got the client's 500 kB exactly" \
		cmp -s "$tmpdir/up" "$tmpdir/x.sout"
	check "$run: the connection was upgraded" \
		test "$(stat_of $tmpdir/x.cstats upgraded)" = 1
	check "$run: bytes went over RDMA both ways before the exec" \
		test "$(stat_of $tmpdir/x.cstats rdma_rx_bytes)" -gt 0 -a \
		     "$(stat_of $tmpdir/x.sstats rdma_rx_bytes)" -gt 0
	check "$run: the client went back to TCP before the exec" \
		test "$(stat_of $tmpdir/x.cstats exec_downgraded)" = 1
	check "$run: nothing lost at the exec" \
		test "$(stat_of $tmpdir/x.cstats exec_lost)" = 0
	check "$run: the server went back to TCP too" \
		test "$(stat_of $tmpdir/x.sstats peer_downgrades)" = 1
	check "$run: the server sent the unread ring bytes again" \
		test "$(stat_of $tmpdir/x.sstats down_resent_bytes)" -gt 0
	check "$run: no connection error" \
		test "$(stat_of $tmpdir/x.sstats conn_errors)$(stat_of $tmpdir/x.cstats conn_errors)" = 00
	[ "${RSOCKX_EXEC_SHOW:-}" = 1 ] && sed "s/^/  $run: /" $tmpdir/x.sstats $tmpdir/x.cstats >&2
done

# An exec that fails while another thread sleeps on the upgraded
# connection: the connection the exec kept for that thread is freed once
# the process is back (before, it was kept for good).
rm -f "$tmpdir"/x.*
port=$(vm_port)
timeout 120 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= \
	RSOCKX_HELLO_GRACE_MS=2000 RSOCKX_STATS_FILE="$tmpdir/x.sstats" \
	"$PYTHON" "$abs_top_srcdir/tests/rdma/exec.py" server \
	$HOST_B $port quiet "$tmpdir/x.sout" &
spid=$!
wait_listen $port || bail "server did not listen"
timeout 120 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF="$tmpdir/rdma.conf" \
	RSOCKX_STATS_FILE="$tmpdir/x.cstats" \
	"$PYTHON" "$abs_top_srcdir/tests/rdma/exec.py" client \
	$HOST_B $port $HOST_A failsleep "$tmpdir/x.cout"
check "failsleep: the sleeping thread got the server's answer" [ $? -eq 0 ]
reap $spid 60
check "failsleep: the server got every byte" \
	test "$(cat "$tmpdir/x.sout")" = hellogo
check "failsleep: upgraded, then back to TCP for the exec" \
	test "$(stat_of $tmpdir/x.cstats upgraded)$(stat_of $tmpdir/x.cstats exec_downgraded)" = 11
check "failsleep: its queue pair freed after the failed exec (created $(stat_of $tmpdir/x.cstats qps_created), destroyed $(stat_of $tmpdir/x.cstats qps_destroyed))" \
	test "$(stat_of $tmpdir/x.cstats qps_created)" = 1 -a \
	     "$(stat_of $tmpdir/x.cstats qps_destroyed)" = 1
done_testing
