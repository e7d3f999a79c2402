#!/bin/bash
# The inetd pattern: a server accepts, forks, puts the connection on the
# child's stdin and stdout and executes the service (cat, echoing) before
# anybody read from it.  A client whose rules say rdma sends its HELLO at
# once; the service's own rsockx, told by the exec wrapper which
# descriptors it inherits (RSOCKX_INHERIT), takes the HELLO out: the echo
# holds the client's bytes and nothing else, and the connection stays TCP.
# vm-exclusive: yes
# vm-timeout: 120
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
done_testing
