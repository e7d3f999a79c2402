#!/bin/bash
# rsockx-stat on a live upgraded connection: a python pair between host A
# and host B (one kernel, one /dev/shm) exchanges bytes over RDMA and holds
# the connection open while rsockx-stat reads both processes: counters,
# and the connection entries (state upgraded, addresses).  Then both exit,
# and the regions they leave agree with RSOCKX_STATS_FILE.
# vm-exclusive: yes
# vm-timeout: 180
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
STAT=$abs_top_builddir/tools/rsockx-stat
[ -x "$STAT" ] || bail "$STAT not built"

printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"
cat >"$tmpdir/peer.py" <<'EOF'
import os, socket, sys, time
role, host, port, bind, ready = sys.argv[1:6]
n = 300000
def take(c):
    got = b""
    while len(got) < n:
        got += c.recv(65536)
    return got
# two rounds of echo: the first may go over TCP while the cut-over is under
# way (a slow VM), the second is over RDMA both ways
if role == "server":
    l = socket.create_server((host, int(port)))
    c, _ = l.accept()
    for r in range(2):
        c.sendall(take(c))
else:
    c = socket.create_connection((host, int(port)), source_address=(bind, 0))
    for r in range(2):
        data = os.urandom(n)
        c.sendall(data)
        if take(c) != data:
            sys.exit("echo differs")
open(ready, "w").write(str(os.getpid()))
while not os.path.exists(os.path.join(os.path.dirname(ready), "stop")):
    time.sleep(0.05)
EOF

# wait_for FILE: up to 60 s (python starts slowly under emulation)
wait_for() {
	local i
	for ((i = 0; i < 600; i++)); do
		[ -e "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

# jq_ PID EXPR: EXPR (python, on process object p) from rsockx-stat --json
jq_() {
	"$STAT" -p "$1" --json --keep >"$tmpdir/j.json" || return 1
	"$PYTHON" -c '
import json, sys
p = [p for p in json.load(open(sys.argv[1]))["processes"] if p["pid"] == int(sys.argv[2])][0]
c = p["counters"]
print(eval(sys.argv[3]))' "$tmpdir/j.json" "$1" "$2"
}

s=$(rxe_snap)
port=$(vm_port)
timeout 120 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= \
	RSOCKX_STATS_FILE="$tmpdir/server.stats" \
	"$PYTHON" "$tmpdir/peer.py" server $HOST_B $port - "$tmpdir/s.ready" &
spid=$!
wait_listen $port || bail "server did not listen"
timeout 120 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF="$tmpdir/rdma.conf" \
	RSOCKX_STATS_FILE="$tmpdir/client.stats" \
	"$PYTHON" "$tmpdir/peer.py" client $HOST_B $port $HOST_A "$tmpdir/c.ready" &
cpid=$!
wait_for "$tmpdir/s.ready" && wait_for "$tmpdir/c.ready" ||
	bail "the pair did not exchange its bytes"
# $! are the timeouts; the programs say who they are
spy=$(cat "$tmpdir/s.ready") cpy=$(cat "$tmpdir/c.ready")

# both "hosts" are one kernel: one /dev/shm holds both regions
check "both regions in /dev/shm" test -f /dev/shm/rsockx.$spy -a -f /dev/shm/rsockx.$cpy
"$STAT" -p $spy -p $cpy >"$tmpdir/table"
sed 's/^/  /' "$tmpdir/table" >&2
check "table: server live, 1 connection, upgraded 1, no fallback" \
	grep -Eq "^ *$spy python3 +live +1 +1 +0 " "$tmpdir/table"
check "table: client live, 1 connection, upgraded 1, no fallback" \
	grep -Eq "^ *$cpy python3 +live +1 +1 +0 " "$tmpdir/table"
check "server (live): upgraded=1, RDMA bytes both ways" \
	test "$(jq_ $spy 'p["state"], c["upgraded"], c["rdma_rx_bytes"] > 0, c["rdma_tx_bytes"] > 0')" = "('live', 1, True, True)"
check "client (live): upgraded=1, RDMA bytes both ways" \
	test "$(jq_ $cpy 'p["state"], c["upgraded"], c["rdma_rx_bytes"] > 0, c["rdma_tx_bytes"] > 0')" = "('live', 1, True, True)"
check "client: every byte sent, over RDMA or (before the cut-over) TCP" \
	test "$(jq_ $cpy 'c["rdma_tx_bytes"] + c["tcp_tx_bytes"]')" = 600000
check "what the client sent over RDMA the server received over RDMA" \
	test "$(jq_ $cpy 'c["rdma_tx_bytes"]')" = "$(jq_ $spy 'c["rdma_rx_bytes"]')"
check "queue pairs: one each, not destroyed while the connection is open" \
	test "$(jq_ $spy 'c["qps_created"] - c["qps_destroyed"]')$(jq_ $cpy 'c["qps_created"] - c["qps_destroyed"]')" = 11
"$STAT" -p $spy -p $cpy -C >"$tmpdir/conns"
sed 's/^/  /' "$tmpdir/conns" >&2
check "connections: the server's, accepted, upgraded, B <- A" \
	test "$(jq_ $spy '[(x["role"], x["state"], x["local"], x["remote"].split(":")[0]) for x in p["connections"]]')" = "[('accept', 'upgraded', '$HOST_B:$port', '$HOST_A')]"
check "connections: the client's, connected, upgraded, A -> B" \
	test "$(jq_ $cpy '[(x["role"], x["state"], x["local"].split(":")[0], x["remote"]) for x in p["connections"]]')" = "[('connect', 'upgraded', '$HOST_A', '$HOST_B:$port')]"
check "--connections table: both lines say upgraded" \
	test "$(grep -Ec '^ +fd [0-9]+ +(accept|connect) +upgraded ' "$tmpdir/conns")" = 2
rdma_crossed "rxe0 and rxe1 carried it" "$s" 10

touch "$tmpdir/stop"
check "server exited 0" reap $spid 60
check "client exited 0" wait $cpid
check "after exit: both regions say exited" \
	test "$(jq_ $spy 'p["state"]')$(jq_ $cpy 'p["state"]')" = exitedexited
same=1
for pid in $spy $cpy; do
	[ $pid = $spy ] && f=$tmpdir/server.stats || f=$tmpdir/client.stats
	for c in upgraded rdma_tx_bytes rdma_rx_bytes tcp_tx_bytes tcp_rx_bytes qps_created; do
		a=$(jq_ $pid "c['$c']") b=$(stat_of "$f" $c)
		[ "$a" = "$b" ] || { same=0; diag "pid $pid $c: region $a, RSOCKX_STATS_FILE $b"; }
	done
done
check "after exit: regions and RSOCKX_STATS_FILE agree" test $same = 1
"$STAT" -p $spy -p $cpy >/dev/null
check "shown once more, then removed" test ! -e /dev/shm/rsockx.$spy -a ! -e /dev/shm/rsockx.$cpy
done_testing
