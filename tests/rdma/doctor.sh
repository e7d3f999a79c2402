#!/bin/bash
# rsockx-doctor with Soft-RoCE devices (issue 22): on the healthy pair every
# machine check is OK, and a destination served by a librsockx server (B)
# answers the probe as rsockx and is upgraded, from A; the live server is
# seen in the processes section.  Then each fault is reported with its
# reason and fix: rules that say tcp, a memlock limit too small (CAP_IPC_LOCK
# dropped: root is not bound by it), a port whose netdev is down (restored
# afterwards).
# vm-exclusive: yes
# vm-timeout: 420
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
DOCTOR=$abs_top_builddir/tools/rsockx-doctor
[ -x "$DOCTOR" ] || bail "$DOCTOR not built"

# dr ARGS...: the doctor, JSON to $tmpdir/j, its table to the log; status.
dr() {
	local rc=0
	COLUMNS=500 "$PYTHON" "$DOCTOR" --lib "$RSOCKX_PRELOAD" --json "$@" \
		>"$tmpdir/j" 2>"$tmpdir/err" || rc=$?
	"$PYTHON" -c '
import json, sys
for c in json.load(open(sys.argv[1]))["checks"]:
    print("  %-4s %-22s %s%s" % (c["status"], c["check"], c["found"],
          " | fix: " + c["fix"] if c["fix"] else ""))' "$tmpdir/j" >&2 ||
		cat "$tmpdir/err" >&2
	return $rc
}

# verdict CHECK STATUS [PATTERN]: in $tmpdir/j, a check named CHECK has
# STATUS, its finding matches PATTERN (python regex), and a fix if it is
# WARN or FAIL.
verdict() {
	"$PYTHON" - "$tmpdir/j" "$@" <<-'PY'
	import json, re, sys
	f, check, status = sys.argv[1:4]
	pat = sys.argv[4] if len(sys.argv) > 4 else ""
	hits = [c for c in json.load(open(f))["checks"] if c["check"] == check]
	if not any(c["status"] == status and re.search(pat, c["found"]) and
	           (status not in ("WARN", "FAIL") or c["fix"]) for c in hits):
	    print("# %s: %s" % (check, hits or "no such check"))
	    sys.exit(1)
	PY
}

# machine_ok: every check of the Machine section is OK or INFO
machine_ok() {
	"$PYTHON" -c '
import json, sys
bad = [c for c in json.load(open(sys.argv[1]))["checks"]
       if c["section"] == "Machine" and c["status"] not in ("OK", "INFO")]
for c in bad:
    print("# %(status)s %(check)s: %(found)s" % c)
sys.exit(bool(bad))' "$tmpdir/j"
}

# port_state DEV: ACTIVE, DOWN, ...
port_state() { sed 's/^[0-9]*: //' "/sys/class/infiniband/$1/ports/1/state"; }
wait_state() {
	local i
	for ((i = 0; i < 100; i++)); do
		[ "$(port_state "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# Healthy pair ---------------------------------------------------------------------
check "healthy: exit 0" dr --no-processes
check "healthy: every machine check OK (or INFO)" machine_ok
check "... both devices found" verdict "RDMA devices" OK 'rxe0 .*rxe1 '
check "... port rxe0/1 ACTIVE" verdict "port rxe0/1" OK 'ACTIVE, LinkUp, Ethernet on vethA'
check "... port rxe1/1 ACTIVE" verdict "port rxe1/1" OK 'ACTIVE, LinkUp, Ethernet on vethB'
check "... A's address has its RoCE v2 GID" verdict "GIDs rxe0/1" OK "$HOST_A: RoCE v2"
check "... MTU: RoCE 4096 on a 9000 netdev" verdict "MTU rxe0/1" OK 'active MTU 4096, vethA MTU 9000'
check "... device files usable" verdict "device files" OK rdma_cm
check "... memlock OK" verdict memlock OK 'need about'

# A librsockx server on B, held connections; the doctor's client from A.
# serve: one in the background, its pid in $spid, its port in $port.
serve() {
	port=$(vm_port)
	timeout 300 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= "$PYTHON" -c '
import socket, sys
l = socket.create_server((sys.argv[1], int(sys.argv[2])))
conns = []
while True:
    conns.append(l.accept()[0])' $HOST_B $port &
	spid=$!
	wait_listen $port || bail "server did not listen"
}
serve

check "destination served by rsockx: exit 0" dr --bind $HOST_A $HOST_B:$port
check "... the route's RDMA port: rxe0, by A's address" verdict "RDMA port" OK "by its source address $HOST_A: rxe0/1"
check "... rules: probe, by the default" verdict rules OK 'action probe .*no rule matched'
check "... the peer answered as rsockx" verdict probe OK 'answered as rsockx in [0-9]+ ms'
check "... and the connection was upgraded, with its time" verdict upgrade OK 'upgraded to RDMA [0-9]+ ms after'

# the live server, in the processes section (it holds the upgraded connection)
dr --bind $HOST_A
spy=$(pgrep -P $spid -f create_server || echo $spid)
check "processes: the server is listed with its RDMA connection" \
	verdict "python3[$spy]" OK 'rdma 1 .*upgraded so far 1'
check "processes: its queue pair, RTS (rdma resource)" \
	verdict "python3[$spy] QPs" OK 'queue pairs: RTS 1'
check "processes: its pinned memory against its limits" \
	verdict "python3[$spy] pinned" OK 'pinned; RSOCKX_PIN_MAX 1 GiB'
check "processes: the device counters of both ports" \
	bash -c 'grep -q "\"counters rxe0/1\"" "$0" && grep -q "\"counters rxe1/1\"" "$0"' "$tmpdir/j"

# Rules that forbid ---------------------------------------------------------------------
printf 'tcp connect * %s\n' $HOST_B >"$tmpdir/never.conf"
RSOCKX_CONF=$tmpdir/never.conf dr --no-processes --bind $HOST_A $HOST_B:$port
check "rules that say tcp: the rules check warns, naming the rule" \
	verdict rules WARN "rules forbid RDMA.*never.conf line 1: \"tcp connect \* $HOST_B\""
check "... and says that the peer runs rsockx: only the rules keep it on TCP" \
	verdict probe INFO 'peer runs rsockx .*only the rules'

# Memlock too small ---------------------------------------------------------------------------
nocap=(setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock)
"${nocap[@]}" prlimit --memlock=65536:65536 env COLUMNS=500 "$PYTHON" "$DOCTOR" \
	--lib "$RSOCKX_PRELOAD" --no-processes --json >"$tmpdir/j" 2>"$tmpdir/err"
check "memlock 64 KiB without CAP_IPC_LOCK: exit 1" test $? = 1
check "... FAIL: not even one connection fits" verdict memlock FAIL 'less than one connection needs'
"${nocap[@]}" prlimit --memlock=4194304:4194304 env COLUMNS=500 "$PYTHON" "$DOCTOR" \
	--lib "$RSOCKX_PRELOAD" --no-processes --json >"$tmpdir/j" 2>"$tmpdir/err"
check "memlock 4 MiB: WARN, about 5 of 64 connections" verdict memlock WARN 'about 5 of 64'

# A down port ------------------------------------------------------------------------------
ip link set $NETDEV_B down
wait_state $DEV_B DOWN || diag "rxe1 still $(port_state $DEV_B)"
# Machine checks only: an RDMA CM request sent while the port is down
# leaves the guest's CM answering no request to B afterwards, for any
# process (seen here: every VM script after this one failed), which a
# real network's link flap may do as well (noted in issue 20).
dr --no-processes
rc=$?
check "vethB down: exit 1" test $rc = 1
check "... port rxe1/1 FAIL: its netdev is administratively down" \
	verdict "port rxe1/1" FAIL 'DOWN .*vethB is administratively down'
check "... with the fix" bash -c 'grep -q "ip link set vethB up" "$0"' "$tmpdir/j"
ip link set $NETDEV_B up
check "restored: rxe1 ACTIVE again" wait_state $DEV_B ACTIVE
wait_state $DEV_A ACTIVE
# The link's down took the routes and neighbours through it: back, once
# the link is up (a route through a link without carrier is refused, and
# one failed line ends the batch), so that the scripts after this one find
# the network as guest.sh left it.
vm_net_paths
check "restored: the routes between A and B are back" \
	bash -c 'ip route show table 11 | grep -q "^$0 " &&
		 ip -6 route show table 11 | grep -q "^$1 "' $HOST_A $HOST_A6
check "restored: exit 0 again" dr --no-processes
dr --no-processes --bind $HOST_A $HOST_B:$port
check "restored: a connection upgrades again" \
	verdict upgrade OK 'upgraded to RDMA'

kill $spid 2>/dev/null
wait $spid 2>/dev/null
done_testing
