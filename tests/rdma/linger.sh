#!/bin/bash
# close() and exit() are bounded, and sleep, when the peer does not
# answer: the client's rules say rdma, so its HELLO leads the stream, and
# the server (under rsockx too) reads nothing, so its library never
# answers.  At close and exit the client waits for that answer (which
# must not be left for the kernel to reset the connection with) at most
# RSOCKX_LINGER_MS, 2 s here (tests/rdma/linger.py).
#   close: after a send that timed out (SO_SNDTIMEO 0.2 s): at most the
#          linger, asleep (CPU time of the close well under its wall time).
#   exit:  four such connections open at exit: one RSOCKX_LINGER_MS for
#          all of them, not one each (8 s before).
#   nbclose: a non-blocking socket whose peer reads nothing for 3 s is
#          closed with its HELLO unanswered: close() returns at once (it
#          waited for the peer before), the answer is awaited in the
#          background, and the peer gets every byte and the end of the
#          stream while the client still runs.
#   norecv: an upgraded socket whose FIN cannot land: tests/vm/evil cuts
#          over but posts no receive, so every message of the server's
#          gets an RNR NAK and is retried for ever (rnr_retry 7).  The
#          server's non-blocking close returns at once and the socket
#          lingers until RSOCKX_LINGER_MS (2 s), asleep, then the TCP
#          connection closes.
# vm-exclusive: yes
# vm-timeout: 240
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"

py=$abs_top_srcdir/tests/rdma/linger.py
printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"
export RSOCKX_PROBE_TIMEOUT_MS=10000

for run in close:1 exit:4; do
	how=${run%:*} n=${run#*:}
	port=$(vm_port)
	timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= \
		RSOCKX_STATS_FILE="$tmpdir/$how.sstats" \
		"$PYTHON" "$py" server $HOST_B $port $n 15 &
	spid=$!
	wait_listen $port || bail "$how: server did not listen"
	timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" \
		RSOCKX_CONF="$tmpdir/rdma.conf" RSOCKX_LINGER_MS=2000 \
		"$PYTHON" "$py" client $HOST_B $port $HOST_A $n $how \
		>"$tmpdir/$how.out" 2>&1
	rc=$?
	end=$(date +%s.%N)
	reap $spid 30
	sed "s/^/  $how: /" "$tmpdir/$how.out" >&2
	check "$how: the client ended well ($rc)" test $rc = 0
	check "$how: the client's sends filled TCP on all $n" \
		test "$(grep -c '^sent [1-9]' "$tmpdir/$how.out")" = $n
	check "$how: the server's library never saw a HELLO" \
		test "$(stat_of $tmpdir/$how.sstats hello_received)" = 0
	if [ $how = close ]; then
		wall=$(awk '/^close wall/ { print $3 }' "$tmpdir/$how.out")
		cpu=$(awk '/^close wall/ { print $5 }' "$tmpdir/$how.out")
		check "close: waited for the answer, at most RSOCKX_LINGER_MS and some (${wall:-?} s)" \
			awk -v w="${wall:-99}" 'BEGIN { exit !(w >= 1.9 && w < 3.5) }'
		check "close: it slept, it did not spin (${cpu:-?} s of CPU in ${wall:-?} s)" \
			awk -v w="${wall:-0}" -v c="${cpu:-99}" 'BEGIN { exit !(c < 0.5 && c < w / 3) }'
	else
		t0=$(awk '/^exiting/ { print $2 }' "$tmpdir/$how.out")
		took=$(awk -v a="${t0:-0}" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
		check "exit: one RSOCKX_LINGER_MS for all four, not one each ($took s)" \
			awk -v t="$took" 'BEGIN { exit !(t < 4.5) }'
	fi
done

port=$(vm_port)
timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= \
	RSOCKX_STATS_FILE="$tmpdir/nb.sstats" \
	"$PYTHON" "$py" drain $HOST_B $port 3 >"$tmpdir/nb.server" 2>&1 &
spid=$!
wait_listen $port || bail "nbclose: server did not listen"
timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF="$tmpdir/rdma.conf" \
	RSOCKX_LINGER_MS=10000 RSOCKX_STATS_FILE="$tmpdir/nb.cstats" \
	"$PYTHON" "$py" nbclose $HOST_B $port $HOST_A 6 >"$tmpdir/nb.out" 2>&1
rc=$?
reap $spid 30
sed "s/^/  nbclose: /" "$tmpdir/nb.out" "$tmpdir/nb.server" >&2
wall=$(awk '/^close wall/ { print $3 }' "$tmpdir/nb.out")
check "nbclose: the client ended well ($rc), its HELLO went out" \
	test $rc = 0 -a "$(stat_of $tmpdir/nb.cstats hello_sent)" = 1
check "nbclose: close() returned at once (${wall:-?} s; the peer read nothing for 3 s)" \
	awk -v w="${wall:-99}" 'BEGIN { exit !(w < 0.5) }'
check "nbclose: its end went on in the background (closes_lingered $(stat_of $tmpdir/nb.cstats closes_lingered))" \
	test "$(stat_of $tmpdir/nb.cstats closes_lingered)" = 1
sent=$(awk '/^sent/ { print $2, $3 }' "$tmpdir/nb.out")
got=$(awk '/^got/ { print $2, $3 }' "$tmpdir/nb.server")
check "nbclose: the server got every byte and the end ($got / $sent)" \
	test -n "$sent" -a "$sent" = "$got"
tend=$(awk '/^got/ { print $5 }' "$tmpdir/nb.server")
texit=$(awk '/^exiting/ { print $2 }' "$tmpdir/nb.out")
check "nbclose: ... before the client exited (end $tend, exit $texit)" \
	awk -v a="${tend:-99999999999}" -v b="${texit:-0}" 'BEGIN { exit !(a < b) }'

EVIL=$abs_top_builddir/tests/vm/evil
port=$(vm_port)
timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= RSOCKX_LINGER_MS=2000 \
	RSOCKX_STATS_FILE="$tmpdir/nr.sstats" "$PYTHON" -c '
import resource, socket, sys, time
l = socket.create_server((sys.argv[1], int(sys.argv[2])))
c, _ = l.accept()
time.sleep(0.5)
c.send(b"x" * 1000)     # the HELLO is in: answered, this goes over TCP
time.sleep(1)           # the peer cuts over meanwhile
c.setblocking(False)
c.send(b"y" * 1000)     # our CUTOVER and this go to its ring: RNR
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
t = time.monotonic()
c.close()
print("close wall %.3f" % (time.monotonic() - t), flush=True)
c0 = cpu()
time.sleep(6)           # the close goes on in the background
print("cpu %.2f" % (cpu() - c0), flush=True)' \
	$HOST_B $port >"$tmpdir/nr.server" 2>&1 &
spid=$!
wait_listen $port || bail "norecv: server did not listen"
timeout 60 "$EVIL" -d $DEV_A -g $GID_INDEX -c $HOST_B -p "$port" \
	-b $HOST_A -m norecv >"$tmpdir/nr.evil" 2>&1
erc=$?
reap $spid 30
src=$?
sed "s/^/  norecv: /" "$tmpdir/nr.evil" "$tmpdir/nr.server" >&2
check "norecv: the peer upgraded and cut over, with no receive posted ($erc)" \
	test $erc = 0 -a "$(grep -c '^cutover ok' "$tmpdir/nr.evil")" = 1
wall=$(awk '/^close wall/ { print $3 }' "$tmpdir/nr.server")
check "norecv: the server's close() returned at once (${wall:-?} s)" \
	awk -v w="${wall:-99}" 'BEGIN { exit !(w < 0.5) }'
check "norecv: ... its end went on in the background (closes_lingered $(stat_of $tmpdir/nr.sstats closes_lingered))" \
	test "$(stat_of $tmpdir/nr.sstats closes_lingered)" = 1
ms=$(awk '/^server-closed/ { print $3 }' "$tmpdir/nr.evil")
check "norecv: the TCP connection closed once RSOCKX_LINGER_MS had passed (${ms:-?} ms after the cut-over)" \
	awk -v m="${ms:-0}" 'BEGIN { exit !(m >= 2500 && m < 8000) }'
cpu=$(awk '/^cpu/ { print $2 }' "$tmpdir/nr.server")
check "norecv: the server slept meanwhile (${cpu:-?} s of CPU in the 6 s after the close; exit $src)" \
	awk -v c="${cpu:-99}" -v s="$src" 'BEGIN { exit !(c < 1 && s == 0) }'
done_testing
