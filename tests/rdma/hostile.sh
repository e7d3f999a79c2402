#!/bin/bash
# A hostile server against a client that really negotiates (it has a
# device, and rules that say rdma): the server takes the client's HELLO and
# answers with a NAK, ACKs for another nonce or with a bad field, a NAK
# with an unknown reason, a HELLO of its own, garbage, a truncated ACK, or
# a well-formed ACK for a queue pair that does not exist
# (tests/passthrough/hostile.py; the host-side half is
# tests/passthrough/hostile.test).  The client must never crash or hang:
# it stays on TCP and its application gets exactly the bytes that are not
# an answer for it, or, after the bogus ACK, it fails with ECONNRESET within
# RSOCKX_QP_TIMEOUT_MS (see ack-bogus-qp below), without any timeout of the
# application's own.
# vm-exclusive: no
# vm-timeout: 300
. "$abs_top_srcdir/tests/lib.sh"
. "$abs_top_srcdir/tests/vm/lib.sh"
. "$abs_top_srcdir/tests/rdma/stream-lib.sh"
in_vm || skip_all "runs only in the test VM (tests/vm/run.sh)"
py=$abs_top_srcdir/tests/passthrough/hostile.py

printf 'rdma connect * *\n' >"$tmpdir/rdma.conf"

# same DESC FILE_A FILE_B: one test point, the files are identical
same() {
	if cmp -s "$2" "$3"; then
		ok "$1"
	else
		not_ok "$1"
		cmp "$2" "$3" 2>&1 | sed 's/^/# /'
	fi
}

for name in $("$PYTHON" "$py" scenarios rsx-server); do
	d=$tmpdir/$name
	mkdir -p "$d"
	timeout 60 "$PYTHON" "$py" hostile-rsx-server "$d/port" "$name" "$d" \
		$HOST_B >"$d/hostile.out" 2>&1 &
	hpid=$!
	if ! wait_file "$d/port" 400; then
		not_ok "$name: hostile server listens"
		continue
	fi
	delay=0
	[ "$name" = ack-bogus-qp ] && delay=1
	t0=$(date +%s%N)
	HOSTILE_DELAY=$delay timeout 60 env LD_PRELOAD="$RSOCKX_PRELOAD" \
		RSOCKX_LOG=info \
		RSOCKX_CONF="$tmpdir/rdma.conf" RSOCKX_STATS_FILE="$d/stats" \
		RSOCKX_TEST_PROBE_YES=1 \
		"$PYTHON" "$py" victim-client "$(cat "$d/port")" "$d/recv" \
		$HOST_B $HOST_A >"$d/victim.out" 2>&1
	vrc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	reap $hpid 60
	hrc=$?
	sed "s/^/  $name victim: /" "$d/victim.out" >&2
	sed "s/^/  $name hostile: /" "$d/hostile.out" >&2
	check "$name: the client sent a real HELLO" \
		grep -q "^hello ok" "$d/hello"
	check "$name: hostile server ended normally ($hrc)" test "$hrc" = 0
	if [ "$name" = ack-bogus-qp ]; then
		# The client waits 1 s before its first send, which then finds
		# the ACK.  Should the ACK still come late, the client is
		# half-closed by then and stays TCP (fallback_qp: every byte
		# arrives).  Otherwise its QP reaches RTS and nothing ever
		# answers it: after RSOCKX_QP_TIMEOUT_MS (500 ms: retry_cnt 6,
		# never 7, which rxe reads as "for ever") the QP fails and the
		# application, which has no timeout of its own, gets
		# ECONNRESET.  This server keeps its TCP connection open and
		# silent, so nothing else could end the wait.  Bound: the 1 s
		# delay, the 0.5 s, and slack for a loaded, emulated guest.
		if [ "$(stat_of "$d/stats" fallback_qp)" = 1 ]; then
			check "$name: QP refused, stayed TCP, exit 0 ($vrc)" \
				test "$vrc" = 0
			same "$name: server got the client's bytes over TCP" \
				"$d/payload" "$d/got"
		else
			check "$name: upgraded to nowhere, failed ($vrc)" \
				test "$vrc" = 1 -a \
				"$(stat_of "$d/stats" upgraded)" = 1
			check "$name: the application saw ECONNRESET" \
				grep -q "Connection reset by peer" "$d/victim.out"
			check "$name: within 10 s, no timeout of its own (${ms} ms)" \
				test "$ms" -lt 10000
			check "$name: the broken connection was counted" \
				test "$(stat_of "$d/stats" conn_errors)" -ge 1
			check "$name: no byte to the application" \
				test ! -s "$d/recv"
		fi
		check "$name: client took the ACK" \
			test "$(stat_of "$d/stats" ack_received)" = 1
		diag "$name: exit $vrc, upgraded=$(stat_of "$d/stats" upgraded)" \
			"conn_errors=$(stat_of "$d/stats" conn_errors)" \
			"fallback_qp=$(stat_of "$d/stats" fallback_qp)," \
			"server got $(wc -c <"$d/got") bytes," \
			"client $(wc -c 2>/dev/null <"$d/recv") bytes"
		sed 's/^/# victim: /' "$d/victim.out" | tail -n 6
		continue
	fi
	check "$name: client exits 0 ($vrc)" test "$vrc" = 0
	same "$name: client application got every byte not meant for it" \
		"$d/expect" "$d/recv"
	same "$name: server got the client's bytes over TCP" \
		"$d/payload" "$d/got"
	if [ "$name" = nak ]; then
		check "$name: NAK taken, stayed TCP" \
			test "$(stat_of "$d/stats" nak_received)" = 1 -a \
			"$(stat_of "$d/stats" fallback_nak)" = 1
	else
		check "$name: answer not taken, stayed TCP (fallback_peer)" \
			test "$(stat_of "$d/stats" fallback_peer)" = 1 -a \
			"$(stat_of "$d/stats" nak_received)" = 0
	fi
	check "$name: nothing upgraded" \
		test "$(stat_of "$d/stats" upgraded)" = 0 -a \
		"$(stat_of "$d/stats" hello_sent)" = 1
done
done_testing
