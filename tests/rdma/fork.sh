#!/bin/bash
# A connection upgraded before fork() keeps working in parent and child,
# like TCP (tests/rdma/fork.py).  Three phases of echoed records on one
# connection, with a fork after the first, both ends under librsockx, the
# client's rules saying rdma (upgraded from its first byte):
#   child   the client's child runs phase 2 (its parent takes the
#           connection back to TCP when the child asks), the parent phase 3
#   idle    the child never touches it: the parent stays on RDMA
#   daemon  the client's parent exits at once (it downgrades on the way
#           out); the child goes on alone
#   reader  a thread of the client's parent sleeps in recv() on the
#           connection when the child's send takes it back to TCP: it
#           reads the rest of the echo over TCP
#   srvfork the server forks and closes its copy (it downgrades instead of
#           ending the stream); the server's child echoes the rest
# In daemon and srvfork one process alone holds the connection again after
# the hand-off: it comes back onto a queue pair out of band, the counts of
# an in-band upgrade (the HELLO and ACK not among them) going on from the
# downgrade.  Before (2026-12-07): TCP for the rest of the stream.
# Checked: every byte (sha256 at both ends), bytes over RDMA before the
# fork (rsockx and rxe counters), the hand-off counted where it happens,
# no connection lost.
# Two more with no configuration on either end, the client pausing before
# each record so that its out-of-band upgrade comes mid-stream:
#   oobfork the server forks right after accept() and its parent closes
#           its copy (fork per connection): the child, the only holder
#           now, with every byte counted, upgrades (src/share.c)
#   oobhold the same, but the parent keeps its copy open until the child
#           is done: counts of one holder prove nothing, so it stays TCP
#   oobsrvfork the server reads the first phase, upgraded out of band by
#           then, forks and closes its copy (downgrading it for the child,
#           and saying where the stream stood); the client asks again and
#           the child, alone with the socket, every byte counted, answers:
#           the rest of the stream goes over RDMA again
#   oobdaemon the client, upgraded out of band, forks and exits (daemon):
#           its child, alone with the socket, asks again
#   oobearly the client forks 0.1 s after connect(), while its request is
#           out (the server holds its answer 500 ms), and the child exits
#           0.3 s later without touching the socket: the parent, alone,
#           asks again; the server, still waiting for the first answer's
#           CUTOVER, pings that client's QP, finds it gone, counts on and
#           takes the new request.  Before: TCP in both processes.
#   oobearlydaemon the same fork, but the parent exits at once: the child
#           asks again and streams
# vm-exclusive: yes
# vm-timeout: 300
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"

FORKPY=$abs_top_srcdir/tests/rdma/fork.py
# The client's first send waits for its probe (rules say rdma), so that
# the HELLO leads the stream; the first probe of a process in the
# emulated guest may take longer than the default second.
export RSOCKX_PROBE_TIMEOUT_MS=10000
printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"

for scen in ${RSOCKX_FORK_SCENARIOS:-child idle daemon reader srvfork oobfork oobhold oobsrvfork oobdaemon oobearly oobearlydaemon}; do
	d=$tmpdir/$scen
	mkdir -p "$d"
	smode=echo cscen=$scen cconf=$tmpdir/rdma.conf hold=0
	case $scen in
	oobearly*) cscen=${scen#oob} cconf= hold=500 ;;
	srvfork) smode=fork cscen=plain ;;
	oobfork) smode=forkfirst cscen=paced cconf= ;;
	oobhold) smode=forkhold cscen=paced cconf= ;;
	oobsrvfork) smode=fork cscen=slow cconf= ;;
	oobdaemon) cscen=slowdaemon cconf= ;;
	esac
	port=$(vm_port)
	snap=$(rxe_snap)
	timeout 120 env LD_PRELOAD="$RSOCKX_PRELOAD" RSOCKX_CONF= \
		RSOCKX_STATS_FILE="$d/sstats" RSOCKX_TEST_ANSWER_HOLD_MS=$hold \
		"$PYTHON" "$FORKPY" server $HOST_B $port $smode "$d/sout" &
	spid=$!
	wait_listen $port || bail "$scen: server did not listen"
	timeout 120 env LD_PRELOAD="$RSOCKX_PRELOAD" \
		RSOCKX_CONF="$cconf" RSOCKX_STATS_FILE="$d/cstats" \
		"$PYTHON" "$FORKPY" client $HOST_B $port $HOST_A $cscen "$d/cout"
	rc=$?
	wait_filled "$d/cout" 1200
	reap $spid 60
	wait_filled "$d/sout" 100
	check "$scen: the client ended well (exit $rc: $(head -c 200 "$d/cout"))" \
		test $rc = 0 -a -s "$d/cout" -a "$(cut -c1-4 "$d/cout")" != FAIL
	check "$scen: the server got exactly the client's bytes ($(cat "$d/sout") / $(cat "$d/cout"))" \
		cmp -s "$d/sout" "$d/cout"
	if [ $scen = oobhold ]; then
		check "$scen: neither end upgraded while two processes held the server's socket (upgraded $(stat_of $d/cstats upgraded)/$(stat_of $d/sstats upgraded), fork_alone $(stat_of $d/sstats fork_alone))" \
			test "$(stat_of $d/cstats upgraded)$(stat_of $d/sstats upgraded)$(stat_of $d/sstats fork_alone)" = 000
		check "$scen: no byte over RDMA (client rx $(stat_of $d/cstats rdma_rx_bytes), server rx $(stat_of $d/sstats rdma_rx_bytes))" \
			test "$(stat_of $d/cstats rdma_rx_bytes)$(stat_of $d/sstats rdma_rx_bytes)" = 00
	else
		check "$scen: both ends upgraded" \
			test "$(stat_of $d/cstats upgraded)" -ge 1 -a "$(stat_of $d/sstats upgraded)" -ge 1
		check "$scen: bytes over RDMA both ways (client rx $(stat_of $d/cstats rdma_rx_bytes), server rx $(stat_of $d/sstats rdma_rx_bytes))" \
			test "$(stat_of $d/cstats rdma_rx_bytes)" -ge 100000 -a \
			     "$(stat_of $d/sstats rdma_rx_bytes)" -ge 100000
		check "$scen: the rxe devices carried them ($(rxe_total "$snap") packets)" \
			test "$(rxe_total "$snap")" -gt 100
	fi
	check "$scen: no connection broke or was lost (conn_errors $(stat_of $d/cstats conn_errors)/$(stat_of $d/sstats conn_errors), fork_lost $(stat_of $d/cstats fork_lost)/$(stat_of $d/sstats fork_lost))" \
		test "$(stat_of $d/cstats conn_errors)$(stat_of $d/sstats conn_errors)$(stat_of $d/cstats fork_lost)$(stat_of $d/sstats fork_lost)" = 0000
	cf=$(stat_of $d/cstats fork_downgraded) sf=$(stat_of $d/sstats fork_downgraded)
	ch=$(stat_of $d/cstats fork_handoffs) sh=$(stat_of $d/sstats fork_handoffs)
	case $scen in
	child|daemon|reader)
		check "$scen: the client's parent went back to TCP for its child, the child took it over (fork_downgraded $cf, fork_handoffs $ch)" \
			test "$cf" = 1 -a "$ch" = 1
		check "$scen: the server went back to TCP after the client's parent (peer_downgrades $(stat_of $d/sstats peer_downgrades))" \
			test "$(stat_of $d/sstats peer_downgrades)" = 1 ;;
	idle)
		check "$scen: nothing handed over (fork_downgraded $cf, fork_handoffs $ch)" \
			test "$cf$ch" = 00
		# phases 2 and 3 are 450 kB, after the fork: on the ring too
		check "$scen: the parent stayed on RDMA after the fork (client rdma_tx_bytes $(stat_of $d/cstats rdma_tx_bytes))" \
			test "$(stat_of $d/cstats rdma_tx_bytes)" -ge 600000 ;;
	oobfork)
		check "$scen: the server's child upgraded out of band, alone with the socket after its parent's close (fork_alone $(stat_of $d/sstats fork_alone), midstream_upgrades $(stat_of $d/sstats midstream_upgrades)/$(stat_of $d/cstats midstream_upgrades))" \
			test "$(stat_of $d/sstats fork_alone)" -ge 1 -a \
			     "$(stat_of $d/sstats midstream_upgrades)" -ge 1 -a \
			     "$(stat_of $d/cstats midstream_upgrades)" -ge 1 ;;
	oobsrvfork)
		check "$scen: the server's parent went back to TCP at its close, the child took it over alone (fork_downgraded $sf, fork_handoffs $sh, fork_alone $(stat_of $d/sstats fork_alone))" \
			test "$sf" = 1 -a "$sh" = 1 -a "$(stat_of $d/sstats fork_alone)" -ge 1
		check "$scen: the client asked again and was upgraded a second time (peer_downgrades $(stat_of $d/cstats peer_downgrades), oob_again $(stat_of $d/cstats oob_again), upgraded $(stat_of $d/cstats upgraded), midstream_upgrades $(stat_of $d/cstats midstream_upgrades))" \
			test "$(stat_of $d/cstats peer_downgrades)$(stat_of $d/cstats oob_again)$(stat_of $d/cstats upgraded)$(stat_of $d/cstats midstream_upgrades)" = 1122
		# the first phase is 300000 bytes: more than that came after
		check "$scen: the child's echo came over RDMA after the second upgrade (client rdma_rx_bytes $(stat_of $d/cstats rdma_rx_bytes) > 300000)" \
			test "$(stat_of $d/cstats rdma_rx_bytes)" -gt 300000 ;;
	oobdaemon)
		check "$scen: the client's parent went back to TCP on its way out, the child took it over alone (fork_downgraded $cf, fork_handoffs $ch, fork_alone $(stat_of $d/cstats fork_alone))" \
			test "$cf" = 1 -a "$ch" = 1 -a "$(stat_of $d/cstats fork_alone)" -ge 1
		check "$scen: the server counted on, the child asked again, and the server was upgraded a second time (peer_downgrades $(stat_of $d/sstats peer_downgrades), upgraded $(stat_of $d/sstats upgraded), midstream_upgrades $(stat_of $d/sstats midstream_upgrades))" \
			test "$(stat_of $d/sstats peer_downgrades)$(stat_of $d/sstats upgraded)$(stat_of $d/sstats midstream_upgrades)" = 122
		check "$scen: the child's records came over RDMA after the second upgrade (server rdma_rx_bytes $(stat_of $d/sstats rdma_rx_bytes) > 300000)" \
			test "$(stat_of $d/sstats rdma_rx_bytes)" -gt 300000 ;;
	oobearly*)
		check "$scen: the client left alone asked again and was upgraded (fork_alone $(stat_of $d/cstats fork_alone), midstream_upgrades $(stat_of $d/cstats midstream_upgrades), fallback_fork $(stat_of $d/cstats fallback_fork))" \
			test "$(stat_of $d/cstats fork_alone)" -ge 1 -a \
			     "$(stat_of $d/cstats midstream_upgrades)$(stat_of $d/cstats fallback_fork)" = 10
		check "$scen: the server let the first answer go and took the new request (midstream_upgrades $(stat_of $d/sstats midstream_upgrades), fallback_no_cutover $(stat_of $d/sstats fallback_no_cutover))" \
			test "$(stat_of $d/sstats midstream_upgrades)" -ge 1 -a \
			     "$(stat_of $d/sstats fallback_no_cutover)" = 0 ;;
	srvfork)
		check "$scen: the server's parent went back to TCP at its close, the child took it over (fork_downgraded $sf, fork_handoffs $sh)" \
			test "$sf" = 1 -a "$sh" = 1
		check "$scen: the client went back to TCP after it (peer_downgrades $(stat_of $d/cstats peer_downgrades))" \
			test "$(stat_of $d/cstats peer_downgrades)" = 1 ;;
	esac
	case $scen in
	daemon)
		check "$scen: the client's child, alone, asked out of band and was upgraded again (fork_alone $(stat_of $d/cstats fork_alone), midstream_upgrades $(stat_of $d/cstats midstream_upgrades)/$(stat_of $d/sstats midstream_upgrades))" \
			test "$(stat_of $d/cstats fork_alone)" -ge 1 -a \
			     "$(stat_of $d/cstats midstream_upgrades)$(stat_of $d/sstats midstream_upgrades)" = 11
		# the first phase is 300000 bytes: more than that came after
		check "$scen: the child's records came over RDMA after it (server rdma_rx_bytes $(stat_of $d/sstats rdma_rx_bytes) > 300000)" \
			test "$(stat_of $d/sstats rdma_rx_bytes)" -gt 300000 ;;
	srvfork)
		check "$scen: the server's child, alone, answered the client's new request (fork_alone $(stat_of $d/sstats fork_alone), oob_again $(stat_of $d/cstats oob_again), midstream_upgrades $(stat_of $d/cstats midstream_upgrades)/$(stat_of $d/sstats midstream_upgrades))" \
			test "$(stat_of $d/sstats fork_alone)" -ge 1 -a \
			     "$(stat_of $d/cstats oob_again)$(stat_of $d/cstats midstream_upgrades)$(stat_of $d/sstats midstream_upgrades)" = 111
		check "$scen: the child's echo came over RDMA after it (client rdma_rx_bytes $(stat_of $d/cstats rdma_rx_bytes) > 300000)" \
			test "$(stat_of $d/cstats rdma_rx_bytes)" -gt 300000 ;;
	esac
	[ "${RSOCKX_FORK_SHOW:-}" = 1 ] && sed "s/^/  $scen: /" $d/sstats $d/cstats >&2
done
done_testing
