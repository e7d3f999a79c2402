#!/bin/bash
# RSOCKX_PIN_MAX: a server that every client can reach cannot be made to
# pin more than it allows (issue 20 item 2).  The server holds six
# connections open at once (default 256 KiB rings: about 530 KiB pinned
# each); the client's rules say rdma.  The first ones upgrade, the rest
# stay TCP with a NAK (fallback_pinned on the server, fallback_nak on the
# client), every byte echoed right on all six.  Two budgets: RSOCKX_PIN_MAX
# set to 2 MiB, and the default one of a process without CAP_IPC_LOCK,
# three quarters of its RLIMIT_MEMLOCK (3 MiB here); past the limit itself
# the kernel would refuse the registrations, counted as anything else.
# vm-exclusive: yes
# vm-timeout: 300
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"

printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"
export RSOCKX_PROBE_TIMEOUT_MS=10000
N=6

# pinned_case NAME COMMAND-PREFIX...: the server run under the prefix
pinned_case() {
	local name=$1 port rc spid up pinned
	shift
	port=$(vm_port)
	rm -f "$tmpdir/sstats" "$tmpdir/cstats"
	timeout 60 "$@" env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= \
		RSOCKX_STATS_FILE="$tmpdir/sstats" "$PYTHON" -c '
import socket, sys
l = socket.create_server((sys.argv[1], int(sys.argv[2])))
conns = []
for _ in range(int(sys.argv[3])):
    c, _ = l.accept()
    conns.append(c)
    n = 0
    while n < 200000:                # echo, the connection kept open
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
        n += len(b)
for c in conns:
    c.close()' $HOST_B $port $N >"$tmpdir/server" 2>&1 &
	spid=$!
	wait_listen $port || bail "server did not listen"
	timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF="$tmpdir/rdma.conf" \
		RSOCKX_STATS_FILE="$tmpdir/cstats" "$PYTHON" -c '
import os, socket, sys
socks, bad = [], 0
for i in range(int(sys.argv[4])):
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])),
                                 source_address=(sys.argv[3], 0))
    socks.append(s)
    data = os.urandom(200000)
    back = b""
    for off in range(0, len(data), 20000):
        s.sendall(data[off:off + 20000])
        while len(back) < off + 20000:
            back += s.recv(65536)
    bad += back != data
print("client: %d of %d connections echoed wrong" % (bad, len(socks)))
sys.exit(1 if bad else 0)' $HOST_B $port $HOST_A $N >"$tmpdir/client" 2>&1
	rc=$?
	reap $spid 30
	sed 's/^/  /' "$tmpdir/client" "$tmpdir/server" >&2

	check "$name: every byte echoed right on all $N connections ($rc)" test $rc = 0
	up=$(stat_of $tmpdir/sstats upgraded) pinned=$(stat_of $tmpdir/sstats fallback_pinned)
	check "$name: the first upgraded, the rest stayed TCP for the cap (upgraded $up, fallback_pinned $pinned)" \
		test "$up" -ge 1 -a "$pinned" -ge 1 -a $((up + pinned)) = $N
	check "$name: the client heard a NAK for each of those (fallback_nak $(stat_of $tmpdir/cstats fallback_nak))" \
		test "$(stat_of $tmpdir/cstats fallback_nak)" = "$pinned"
}

pinned_case "RSOCKX_PIN_MAX=2m" env RSOCKX_PIN_MAX=2m
pinned_case "RLIMIT_MEMLOCK 3 MiB, no CAP_IPC_LOCK" \
	setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock \
	prlimit --memlock=3145728:3145728
done_testing
